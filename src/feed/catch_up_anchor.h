// Where a resync's catch-up may end, anchored to the stream instead of a
// timer (issue #35 §4; docs/index-semantics.md, "Resync").
//
// A snapshot may already reflect events still on their way: Mooncake changes
// its metadata before it enqueues the event, and its publisher's one worker
// thread sends from that queue, which lags most exactly when it overflowed
// (the gap that caused the resync). So the buffered stream is replayed only
// once every event older than the snapshot is in the buffer. The publisher's
// facts (both generations, kv_event_publisher.cpp): the worker takes up to
// 64 events per batch from a queue it empties; the sequence starts at 1 and
// is consumed by every batch sent (`published_batches`), every batch whose
// send failed and every event dropped from a full queue (both in
// `dropped_events`, a failed batch by its event count: an over-count).
//
// After the snapshot's last byte, the status endpoint is read. Every batch
// the worker had taken before that read has a sequence of at most
//   bound = published_batches + dropped_events + 1
// (the +1: the batch the worker may hold, taken but not yet sent). A
// batch with a sequence beyond the bound was taken after the read; one of
// fewer than 64 events was taken from a queue it emptied, so every event
// enqueued before -- every event the snapshot can reflect -- is in that batch
// or an earlier one: the catch-up ends there (kAnchored).
//
// A quiet master sends no such batch. Two answers a re-read apart whose
// published_batches + dropped_events both equal the last sequence the stream
// showed prove the same (kQuiet): nothing was sent between them, so the
// worker held nothing at the first; everything it had sent has arrived.
// (A quiet master whose last events were dropped, or that ever failed a
// multi-event send, never shows that equality: its resync waits for its
// next batch.)
//
// Without the endpoint (no URL, a failed read before any answer, an answer
// without dropped_events) the caller falls back to the 1.2 timer
// (kUnavailable). After one good answer a failed re-read is only retried.
//
// Owned by the subscriber's thread; only StatusRequest runs elsewhere.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <zmq.hpp>

#include "feed/batch_peek.h"  // PeekBatchEventCount, for the anchor's tests
#include "feed/status_request.h"
#include "feed/wake_signal.h"
#include "index/index.h"

namespace sci {

class CatchUpAnchor {
 public:
  using Clock = std::chrono::steady_clock;
  // The publisher's batch limit (kMaxBatchSize): a batch with fewer events
  // emptied the queue.
  static constexpr uint32_t kFullBatch = 64;

  enum class State { kOff, kReading, kWaiting, kAnchored, kQuiet, kUnavailable };

  // `reread`: the interval between reads while it waits (the quiet rule's
  // "a re-read apart").
  CatchUpAnchor(bool proxy_from_env, Clock::duration reread, WakeSignal& wake);
  ~CatchUpAnchor();

  // The snapshot's last byte has been read: start (over), reading
  // `status_url` (empty: kUnavailable at once). The URL is taken here, not
  // kept from a leader change, so that a change allocates nothing here.
  void Start(Clock::time_point now, std::string status_url);
  // Back to kOff (a cancelled or finished resync).
  void Stop();

  // A batch buffered since Start (its sequence and event count).
  void OnBatch(uint64_t sequence, uint32_t events);

  // Takes a finished read, starts a due one. `last_sequence`: the last the
  // stream showed (`has_last_sequence` false: none yet).
  State Poll(Clock::time_point now, bool has_last_sequence, uint64_t last_sequence, Index& index);

  State state() const { return state_; }
  bool ended() const { return state_ == State::kAnchored || state_ == State::kQuiet; }
  // Whether an answer has set the bound, and the bound: every batch taken
  // before the first read has a sequence at most this.
  bool bound_known() const { return bound_known_; }
  uint64_t bound() const { return bound_; }
  // For the log: how it ended, or why it is unavailable.
  const std::string& detail() const { return detail_; }

  // Milliseconds until the next read is due; -1 when none is (a read in
  // flight wakes the loop through `wake`).
  long MsUntilNextRead(Clock::time_point now) const;

 private:
  void TakeAnswer(Clock::time_point now, bool has_last_sequence, uint64_t last_sequence, Index& index);
  void CheckAnchor();

  std::string url_;
  const bool proxy_from_env_;
  const Clock::duration reread_;
  WakeSignal& wake_;

  State state_ = State::kOff;
  std::unique_ptr<StatusRequest> read_;
  Clock::time_point next_read_{};
  bool bound_known_ = false;
  uint64_t bound_ = 0;
  // The last sequence the stream had shown when the read in flight was
  // sent (0: none): its answer's bound must not be below it.
  uint64_t shown_before_read_ = 0;
  // The highest sequence of a batch of fewer than kFullBatch events since
  // Start (0: none).
  uint64_t highest_short_batch_ = 0;
  // The last answer's published_batches + dropped_events, when it equalled
  // the stream's last sequence (the quiet rule's first half).
  bool quiet_candidate_ = false;
  uint64_t quiet_total_ = 0;
  std::string detail_;
};

}  // namespace sci
