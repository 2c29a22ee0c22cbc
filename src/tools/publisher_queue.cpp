#include "publisher_queue.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace sci::tools {

PublisherQueue::PublisherQueue(BatchPublisher& publisher, PublisherCounters& counters, size_t depth,
                               double drain_rate)
    : publisher_(publisher),
      counters_(counters),
      depth_(std::max<size_t>(depth, 1)),
      drain_rate_(drain_rate),
      worker_([this] { Work(); }) {}

PublisherQueue::~PublisherQueue() { Close(); }

void PublisherQueue::Add(const ScriptEvent& event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= depth_) {
      // Full: the oldest goes, and its sequence number with it.
      queue_.pop_front();
      ++dropped_sequences_;
      counters_.dropped_events.fetch_add(1, std::memory_order_release);
    }
    queue_.push_back(event);
  }
  work_.notify_one();
}

void PublisherQueue::Skip(uint64_t n) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    lost_batches_ += n;
  }
  work_.notify_one();
}

void PublisherQueue::StallNextBatch(std::chrono::milliseconds stall, std::chrono::milliseconds after) {
  std::lock_guard<std::mutex> lock(mu_);
  stall_next_ = stall;
  stall_from_ = std::chrono::steady_clock::now() + after;
  end_stall_ = false;
}

void PublisherQueue::EndStall() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    end_stall_ = true;
  }
  unstall_.notify_all();
}

void PublisherQueue::FailNextSends(uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  failed_sends_ = n;
}

void PublisherQueue::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  drained_.wait(lock, [this] { return queue_.empty() && lost_batches_ == 0 && !busy_; });
}

void PublisherQueue::Close(bool drain) {
  if (!worker_.joinable()) return;
  if (drain) Drain();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!drain) {
      queue_.clear();
      lost_batches_ = 0;
      abandon_ = true;
    }
    stop_ = true;
  }
  work_.notify_one();
  unstall_.notify_all();
  worker_.join();
  // Dropped events at the very end still consumed their sequences.
  if (dropped_sequences_ > 0) publisher_.ConsumeSequences(dropped_sequences_);
  dropped_sequences_ = 0;
}

void PublisherQueue::Work() {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point started = Clock::now();
  uint64_t taken = 0;  // events taken so far, for the drain rate
  std::vector<ScriptEvent> batch;
  batch.reserve(PublisherConfig::kMaxBatch);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_.wait(lock, [this] { return stop_ || !queue_.empty() || lost_batches_ > 0; });
    if (queue_.empty() && lost_batches_ == 0) return;  // stopped, and nothing left
    const size_t n = std::min(queue_.size(), PublisherConfig::kMaxBatch);
    batch.assign(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.begin() + n));
    queue_.erase(queue_.begin(), queue_.begin() + n);
    const uint64_t dropped = std::exchange(dropped_sequences_, 0);
    const uint64_t lost = std::exchange(lost_batches_, 0);
    const std::chrono::milliseconds stall = n > 0 && Clock::now() >= stall_from_
                                                ? std::exchange(stall_next_, std::chrono::milliseconds(0))
                                                : std::chrono::milliseconds(0);
    const bool fail = n > 0 && failed_sends_ > 0;
    if (fail) --failed_sends_;
    busy_ = true;
    if (stall.count() > 0) {
      // Taken, not sent: published_batches does not count it yet.
      unstall_.wait_for(lock, stall, [this] { return abandon_ || end_stall_; });
      end_stall_ = false;
      if (abandon_) {
        busy_ = false;
        drained_.notify_all();
        continue;
      }
    }
    lock.unlock();
    // The sequence numbers dropped events and lost batches consumed come
    // before this batch's: it was taken after them.
    if (dropped > 0) publisher_.ConsumeSequences(dropped);
    if (lost > 0) publisher_.Skip(lost);
    if (fail) {
      publisher_.ConsumeSequences(1);
      counters_.dropped_events.fetch_add(n, std::memory_order_release);
    } else {
      for (const ScriptEvent& event : batch) publisher_.Add(event);
      publisher_.Flush();
    }
    taken += n;
    if (drain_rate_ > 0) {
      // The next batch is taken when the events before it fit the rate.
      const std::chrono::duration<double> due(static_cast<double>(taken) / drain_rate_);
      std::this_thread::sleep_until(started + std::chrono::duration_cast<Clock::duration>(due));
    }
    lock.lock();
    busy_ = false;
    drained_.notify_all();
  }
}

}  // namespace sci::tools
