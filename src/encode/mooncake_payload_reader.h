// The encoder's inverse: reads a production Mooncake payload (frame 2) back
// into MooncakeEvents with every field, including those the index does not
// need (event_id, backend_id, base_block_idx). For the tools (sci-tail shows
// event ids) and the tests (a golden message read and re-encoded must give
// back its bytes). The shipped library decodes with src/wire/wire_decoder.h,
// which keeps only what the index applies.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "encode/mooncake_event.h"

namespace sci {

struct MooncakePayload {
  int64_t timestamp_ms = 0;
  // Views into the payload's bytes. An absent or nil string field is empty
  // here (not the MooncakeEvent default); `stored` is true only for a
  // "stored" event_type (or, without one, a "BlockStored" type), `cleared`
  // only for "cleared" (or, without one, "AllBlocksCleared"), and
  // `second_generation` when dp_rank is not nil.
  std::vector<MooncakeEvent> events;
};

// Reads [timestamp_ms, [event map...], ...]. False, with a reason in *error
// (may be null), when `payload` is not a production Mooncake payload; *out
// is then unspecified.
bool ReadMooncakePayload(std::span<const uint8_t> payload, MooncakePayload* out, std::string* error);

}  // namespace sci
