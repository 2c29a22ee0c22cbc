#include "wire/message_apply.h"

#include "common/log.h"

namespace sci {

bool ApplyMessage(Index& index, std::span<const std::span<const uint8_t>> frames, DecodedMessage& scratch,
                  std::string* error) {
  std::string reason;
  if (!DecodeMessage(frames, &scratch, &reason)) {
    // Decoding finishes before anything is applied, so a bad message
    // touches neither the tables nor the cursor: the next good batch is
    // judged against the last good one.
    index.counters().malformed_messages.Add();
    Logf(LogLevel::kWarn, "malformed message dropped: %s", reason);
    if (error != nullptr) *error = std::move(reason);
    return false;
  }
  if (scratch.unknown_event_types > 0) {
    index.counters().ignored_events.Add(scratch.unknown_event_types);
    Logf(LogLevel::kDebug, "batch %d: %d events of an unknown type (their keys are dropped)", scratch.sequence,
         scratch.unknown_event_types);
  }
  // Only the production publisher numbers a batch after encoding it (see SequenceRules).
  const SequenceRules rules =
      scratch.format == WireFormat::kMooncake ? SequenceRules::kMooncakeProduction : SequenceRules::kPlain;
  index.ApplyBatch(scratch.sequence, scratch.events, rules);
  return true;
}

}  // namespace sci
