#include "wire/message_apply.h"

#include <new>
#include <set>
#include <string>

#include "absl/synchronization/mutex.h"
#include "common/log.h"

namespace sci {
namespace {

// Whether `type` is logged for the first time. An unknown key-less type
// clears its tenant on every event, so it is worth a warning, but once per
// type string (for the process; at most 64 types are remembered).
bool FirstSightOfKeylessType(std::string_view type) {
  static absl::Mutex mu;
  // A std::set: a failed insert changes nothing (absl's flat_hash_set
  // would be left corrupt: event_hash_digests.h).
  static auto* seen = new std::set<std::string, std::less<>>();
  absl::MutexLock lock(&mu);
  // Looked up as a view: a type seen before costs no copy (it comes with
  // every message of such a publisher).
  if (seen->find(type) != seen->end() || seen->size() >= 64) return false;
  seen->insert(std::string(type));
  return true;
}

}  // namespace

bool ApplyMessage(Index& index, std::span<const std::span<const uint8_t>> frames, DecodedMessage& scratch,
                  std::string* error, BatchOutcome* outcome) {
  try {
    std::string reason;
    if (!DecodeMessage(frames, &scratch, &reason)) {
      // Decoding finishes before anything is applied, so a bad message
      // touches neither the tables nor the cursor: the next good batch is
      // judged against the last good one.
      index.CountMalformedMessage();
      Logf(LogLevel::kWarn, "malformed message dropped: %s", reason);
      if (error != nullptr) *error = std::move(reason);
      return false;
    }
    if (scratch.unknown_event_types > 0) {
      index.CountIgnoredEvents(scratch.unknown_event_types);
      Logf(LogLevel::kDebug, "batch %d: %d events of an unknown type (their keys are dropped)", scratch.sequence,
           scratch.unknown_event_types);
      if (!scratch.unknown_keyless_type.empty() && FirstSightOfKeylessType(scratch.unknown_keyless_type)) {
        Logf(LogLevel::kWarn, "events of unknown type '%s' name no object key: each clears its tenant (batch %d)",
             scratch.unknown_keyless_type, scratch.sequence);
      }
    }
  } catch (const std::bad_alloc&) {
    // The message is lost before it was applied, and with it whatever it
    // removed; the cursor has not moved, so the next message would not
    // show the loss (and on a quiet master there may be none). What the
    // index holds can no longer be vouched for: empty is the only state that
    // can, as when a batch fails half-applied (Index::ApplyBatch).
    index.Clear();
    throw;
  }
  // Only the production publisher numbers a batch after encoding it (see SequenceRules).
  const SequenceRules rules =
      scratch.format == WireFormat::kMooncake ? SequenceRules::kMooncakeProduction : SequenceRules::kPlain;
  const BatchEventIds ids{scratch.event_ids_known, scratch.first_event_id, scratch.last_event_id};
  // Clears the index itself if it throws.
  const BatchOutcome applied = index.ApplyBatch(scratch.sequence, scratch.events, rules, ids);
  if (outcome != nullptr) *outcome = applied;
  return true;
}

}  // namespace sci
