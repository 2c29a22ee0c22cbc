// Test support: production-format messages, encoded as the Mooncake
// publisher encodes them (src/encode/), applied to an index directly
// through ApplyMessage -- the subscriber's path without a socket.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "encode/mooncake_encoder.h"
#include "index/index.h"
#include "wire/message_apply.h"

namespace sci::testing {

class EncodedBatches {
 public:
  // Applies `events` as the batch numbered `sequence`; the message must decode.
  void Apply(Index& index, uint64_t sequence, const std::vector<MooncakeEvent>& events) {
    std::string payload;
    EncodeMooncakePayload(kTimestampMs + static_cast<int64_t>(sequence), events, &payload);
    const std::array<uint8_t, 8> encoded = EncodeSequence(sequence);
    const std::array<std::span<const uint8_t>, 3> frames = {
        std::span<const uint8_t>(), encoded,
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(payload.data()), payload.size())};
    std::string error;
    ASSERT_TRUE(ApplyMessage(index, frames, scratch_, &error)) << error;
  }

  // The next batch of a stream numbered from 1.
  void Send(Index& index, const std::vector<MooncakeEvent>& events) { Apply(index, next_++, events); }

 private:
  static constexpr int64_t kTimestampMs = 1796138256390;
  uint64_t next_ = 1;
  DecodedMessage scratch_;
};

}  // namespace sci::testing
