// The production Mooncake master format, byte for byte: what the real
// publisher sends (golden captures in testdata/mooncake-publisher prove the
// match). Used by the fake publisher, the benchmarks and the tests.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "encode/mooncake_event.h"

namespace sci {

// Appends the msgpack payload (frame 2) of one batch to *out:
// [timestamp_ms, [event map...], dp_rank 0]. The timestamps (batch and
// per-event) are written as fixed 8-byte integers, as the publisher does;
// every other integer in its shortest encoding.
void EncodeMooncakePayload(int64_t timestamp_ms, std::span<const MooncakeEvent> events, std::string* out);

// The 8-byte big-endian sequence frame (frame 1). Frame 0 (topic) is empty.
std::array<uint8_t, 8> EncodeSequence(uint64_t sequence);

// The number the publisher derives from an object key for `seq_hashes`
// (and, as int64, `block_hashes`): the whole key read as a decimal u64
// ("12345") or as 0x/0X-prefixed hex ("0x2a"); anything else (signs,
// spaces, other text, overflow) has none, and the lists are empty.
std::optional<uint64_t> ObjectKeyNumber(std::string_view object_key);

}  // namespace sci
