// The Mooncake master's event queue and its publisher thread, for
// sci-publish --queue-depth: what makes a real master's stream lag behind
// its metadata, and lose events when it overflows (kv_event_publisher.cpp,
// both generations; docs/wire-formats.md, section 4).
//
//   - Events wait in a queue of at most `depth`. When it is full, the oldest
//     is dropped: it consumes a sequence number (the subscriber sees a gap)
//     and counts in dropped_events.
//   - One worker thread takes up to 64 events at a time (fewer only when it
//     empties the queue) and sends them as one batch, at most `drain_rate`
//     events per second (0: as fast as it can).
//
// The caller changes what the master holds before it adds the event, as
// Mooncake changes its metadata before it enqueues (held_keys.h): a
// snapshot taken meanwhile is ahead of the stream by the queue's length.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "batch_publisher.h"

namespace sci::tools {

class PublisherQueue final : public EventSink {
 public:
  // `publisher` is used by the worker thread alone from now on, until Close.
  PublisherQueue(BatchPublisher& publisher, PublisherCounters& counters, size_t depth, double drain_rate);
  ~PublisherQueue() override;  // Close()

  void Add(const ScriptEvent& event) override;
  // The worker batches as it takes: nothing to do.
  void Flush() override {}
  // `n` lost batches: the worker skips their sequences before its next batch.
  void Skip(uint64_t n) override;

  // Faults for a simulation's nemesis (tests/simulation_test.cpp); a real
  // master shows both. The next batch the worker takes is held for `stall`
  // before it is sent (a worker blocked in its send: it counts nothing
  // meanwhile, and Drain waits for it; Close(false) cuts it short and the
  // batch goes with the queue). With `after`, the first batch taken once
  // that long has passed (a worker that gets stuck at some moment, not
  // necessarily now). 0 cancels a stall not yet begun.
  void StallNextBatch(std::chrono::milliseconds stall, std::chrono::milliseconds after = std::chrono::milliseconds(0));
  // Ends a stall under way (or the one StallNextBatch armed, before it
  // begins): the held batch is sent now.
  void EndStall();
  // The next `n` batches taken fail to send: each consumes one sequence
  // number and adds its event count to dropped_events, as Mooncake counts a
  // failed send (docs/wire-formats.md, section 6). Replaces a count not yet
  // used up (0 cancels it).
  void FailNextSends(uint64_t n);

  // Waits until everything queued has been sent.
  void Drain();
  // Drains (or, `drain` false, drops what is still queued, as a stopped
  // master's queue goes with it), then stops the worker; idempotent.
  void Close(bool drain = true);

 private:
  void Work();

  BatchPublisher& publisher_;
  PublisherCounters& counters_;
  const size_t depth_;
  const double drain_rate_;

  std::mutex mu_;
  std::condition_variable work_;     // the worker waits for events (or a stop)
  std::condition_variable drained_;  // Drain waits for an empty queue and an idle worker
  std::deque<ScriptEvent> queue_;
  uint64_t dropped_sequences_ = 0;  // dropped events whose sequences the next batch skips
  uint64_t lost_batches_ = 0;       // Skip()s not yet taken
  bool busy_ = false;               // the worker holds a batch it has taken
  bool stop_ = false;
  bool abandon_ = false;                            // Close(false): a stalled batch is not sent
  bool end_stall_ = false;                          // EndStall
  std::chrono::milliseconds stall_next_{0};         // StallNextBatch
  std::chrono::steady_clock::time_point stall_from_{};  // ... for batches taken from then on
  uint64_t failed_sends_ = 0;                       // FailNextSends not yet taken
  std::condition_variable unstall_;                 // a stalled worker waits on it
  std::thread worker_;  // last: started once everything above exists
};

}  // namespace sci::tools
