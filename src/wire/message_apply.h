// Decode-then-apply: the one path from wire bytes to the index, shared by
// the subscriber thread and sci_index_apply_message.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "index/index.h"
#include "wire/wire_decoder.h"

namespace sci {

// Decodes `frames` and applies them to `index` as one batch. On malformed input: counts
// malformed_messages, logs a warning with the reason, changes no key/group/cursor,
// returns false and sets *error. `scratch` lets a hot loop (the subscriber) reuse the event vector.
// `error` may be null. Production events of an unknown type are added to ignored_events (see
// wire_decoder.h for how they are applied). Production-format messages are applied under
// SequenceRules::kMooncakeProduction (a run's first batch has its stores withheld), every other
// format under the plain rules. std::bad_alloc anywhere in here (decoding, logging, applying)
// clears the index before it propagates: a message that could not be applied may have removed
// keys, and its loss would not show in the cursor. `outcome` (may be null): what the batch did
// (Index::ApplyBatch), written when it returns true.
bool ApplyMessage(Index& index, std::span<const std::span<const uint8_t>> frames,
                  DecodedMessage& scratch, std::string* error, BatchOutcome* outcome = nullptr);

}  // namespace sci
