// Where the event stream stands, and the sequence rules that judge each
// batch against it (docs/index-semantics.md, "Applying one batch"): a
// duplicate is ignored, a gap or another publisher at the next sequence
// (a restart) clears, the first batch after a clear begins a history, and
// under the Mooncake production format the batch that begins a run
// withholds its stores. The index owns one and applies what it decides;
// this file decides, and knows nothing of tables.
//
// Not thread-safe: the index's writer lock (apply_mu_) guards it. The
// sequence is mirrored in atomics for lock-free stats.
#pragma once

#include <atomic>
#include <cstdint>

#include "index/event.h"

namespace sci {

// Which sequence rules a batch is applied under.
enum class SequenceRules {
  // The plain rules: batches fed by hand (sci_index_apply_events) and wire
  // formats whose publishers number a batch when they send it.
  kPlain,
  // The Mooncake production format. Its publisher numbers a batch after
  // encoding it, so a loss shows up one batch early: the gap is revealed
  // before batch X while the lost events lie after X's. The batch that
  // begins a run (reveals a gap or a restart, or is the first accepted after
  // a clear), unless its sequence is 1, applies only its removals and
  // all-cleared events; its stored events are withheld (stores_withheld),
  // since a lost removal of one of them would leave a false hit.
  kMooncakeProduction,
};

// The last batch applied and the last event id it carried: what the next
// batch must continue.
struct StreamPosition {
  bool has_sequence = false;
  uint64_t last_sequence = 0;
  bool has_event_id = false;
  uint64_t last_event_id = 0;
};

class StreamCursor {
 public:
  // What the rules make of a batch.
  struct Verdict {
    BatchOutcome::Sequence sequence = BatchOutcome::Sequence::kFirst;
    // Its stored events must be withheld (the production format's rule).
    bool withhold_stores = false;
    bool clears() const {
      return sequence == BatchOutcome::Sequence::kGap || sequence == BatchOutcome::Sequence::kRestart;
    }
  };

  // Judges a batch of `sequence` (`has_events`: it carries any; `ids`: its
  // event ids, when its format has them). A batch continuing the sequence
  // with events settles a pending continuity requirement (judged now); a
  // first batch or a gap makes it moot. The caller clears on clears(),
  // which resets this cursor (Reset), then applies the events, then calls
  // Advance; a duplicate changes nothing.
  Verdict Judge(uint64_t sequence, bool has_events, const BatchEventIds& ids, SequenceRules rules) {
    Verdict verdict;
    if (position_.has_sequence && sequence == position_.last_sequence) {
      verdict.sequence = BatchOutcome::Sequence::kDuplicate;
      return verdict;
    }
    const bool first = !position_.has_sequence;
    const bool gap = !first && sequence != position_.last_sequence + 1;
    const bool restart = !first && !gap && has_events && !SamePublisher(ids);
    if (!first && !gap && has_events) continuity_required_ = false;  // judged just now
    if (first || gap) continuity_required_ = false;                   // judged by the cursor
    verdict.sequence = first     ? BatchOutcome::Sequence::kFirst
                       : gap     ? BatchOutcome::Sequence::kGap
                       : restart ? BatchOutcome::Sequence::kRestart
                                 : BatchOutcome::Sequence::kContinued;
    // Sequence 1 is a publisher's first batch: nothing can have been lost before it.
    verdict.withhold_stores =
        rules == SequenceRules::kMooncakeProduction && (first || gap || restart) && sequence != 1;
    return verdict;
  }

  // The batch was applied. An empty batch carries no id and breaks no chain.
  void Advance(uint64_t sequence, bool has_events, const BatchEventIds& ids) {
    SetSequence(sequence);
    if (has_events) {
      position_.has_event_id = ids.known;
      position_.last_event_id = ids.last;
    }
  }

  // The connection the batches came on was lost: the next batch with events
  // that continues the sequence must show the same publisher by its ids
  // (Index::RequireEventContinuity).
  void RequireContinuity() { continuity_required_ = true; }

  // After a clear: the next batch begins a new history, not a gap.
  void Reset() {
    position_.has_sequence = false;
    position_.has_event_id = false;
    continuity_required_ = false;
    has_sequence_mirror_.store(false, std::memory_order_relaxed);
  }

  // As if the batch at `position` had just been applied (a resync with
  // nothing buffered). Unknown ids: a later reconnect cannot prove
  // continuity (a resync then).
  void ResumeAt(const StreamPosition& position) {
    SetSequence(position.last_sequence);
    position_.has_event_id = position.has_event_id;
    position_.last_event_id = position.last_event_id;
  }

  const StreamPosition& position() const { return position_; }
  // Lock-free, for stats: the sequence as of the last change.
  bool has_sequence_now() const { return has_sequence_mirror_.load(std::memory_order_relaxed); }
  uint64_t last_sequence_now() const { return last_sequence_mirror_.load(std::memory_order_relaxed); }

 private:
  // Whether a batch continuing the sequence with `ids` comes from the
  // publisher of the last one.
  bool SamePublisher(const BatchEventIds& ids) const {
    // Both sides numbered: one publisher's ids run on from batch to batch.
    if (ids.known && position_.has_event_id) return ids.first == position_.last_event_id + 1;
    // After a lost connection nothing else can show it.
    return !continuity_required_;
  }

  void SetSequence(uint64_t sequence) {
    position_.has_sequence = true;
    position_.last_sequence = sequence;
    last_sequence_mirror_.store(sequence, std::memory_order_relaxed);
    has_sequence_mirror_.store(true, std::memory_order_relaxed);
  }

  StreamPosition position_;
  bool continuity_required_ = false;
  std::atomic<bool> has_sequence_mirror_{false};
  std::atomic<uint64_t> last_sequence_mirror_{0};
};

}  // namespace sci
