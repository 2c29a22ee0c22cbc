// Test support for resync and HA following: a Mooncake master as the
// subscriber sees it (a real ZeroMQ publisher and a real HTTP snapshot
// server, kept in step), a stream driver, and a reader asserting that some
// keys are never reported present.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "feed/subscriber.h"
#include "index/index.h"
#include "loopback_publisher.h"
#include "snapshot_server.h"

namespace sci::testing {

using namespace std::chrono_literals;

// A Mooncake master as the subscriber sees it: an event stream and a
// snapshot of what it holds, kept in step.
class Master {
 public:
  explicit Master(const std::string& host = "127.0.0.1", const std::string& endpoint = kAnyLoopbackTcpPort,
                  int admin_port = 0)
      : publisher_(endpoint), snapshot_(host, admin_port) {}

  void Store(const std::string& key) {
    snapshot_.Add(key);
    Send({StoredEvent(++event_id_, key)});
  }
  void Remove(const std::string& key) {
    snapshot_.Erase(key);
    Send({RemovedEvent(++event_id_, key)});
  }
  // The next event id, as the master numbers its events (one publisher's
  // ids run on from batch to batch: Index::ApplyBatch checks it).
  uint64_t NextEventId() { return ++event_id_; }
  // A batch with no event: keeps the stream moving.
  void Tick() { Send({}); }
  // Stores that reach the snapshot but whose batch is lost on the way.
  void StoreLost(const std::string& key) {
    snapshot_.Add(key);
    ++sequence_;
  }
  void Send(const std::vector<MooncakeEvent>& events) {
    publisher_.SendBatch(++sequence_, events);
    published_batches_.fetch_add(1);
  }
  void SkipSequence() { ++sequence_; }

  // Serves GET /kv_events/status beside the snapshot, as a 1.3-era master
  // does (404 otherwise): every batch sent is published, every sequence
  // skipped (a lost batch, a lost store) counts as a dropped event, so
  // published + dropped is the last sequence, and a resync's catch-up is
  // anchored (feed/catch_up_anchor.h).
  void ServeStatus() {
    snapshot_.SetStatus([this] {
      const uint64_t published = published_batches_.load();
      const uint64_t dropped = sequence_.load() - published;
      return "{\"enabled\":true,\"published_batches\":" + std::to_string(published) +
             ",\"published_events\":0,\"dropped_events\":" + std::to_string(dropped) +
             ",\"skipped_unparsed_keys\":0}";
    });
  }

  LoopbackPublisher& publisher() { return publisher_; }
  SnapshotServer& snapshot() { return snapshot_; }

 private:
  LoopbackPublisher publisher_;
  SnapshotServer snapshot_;
  std::atomic<uint64_t> sequence_{0};
  std::atomic<uint64_t> published_batches_{0};
  uint64_t event_id_ = 0;
};

// Options that follow `master` and resync from it, with the short back-off
// and time-out a test wants.
inline SubscriberOptions OptionsToFollow(Master& master) {
  SubscriberOptions options;
  options.endpoint = master.publisher().endpoint();
  options.snapshot_url = master.snapshot().url();
  options.resync_min_interval_ms = 20;
  options.snapshot_timeout_ms = 5000;
  return options;
}

// Sends empty batches until `done` holds (a resync waits for a message, and
// a retry for one after its back-off): bounded like every wait.
bool TickUntil(Master& master, const std::function<bool()>& done, std::chrono::milliseconds timeout = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return done();
    master.Tick();
    WaitFor(done, 10ms);
  }
  return true;
}

// Queries `keys` on its own thread until stopped; counts any time one of
// them is reported present (each must be absent throughout).
class AbsentKeyReader {
 public:
  AbsentKeyReader(const Index& index, std::vector<std::string> keys)
      : thread_([this, &index, keys = std::move(keys)] {
          while (!stop_.load()) {
            for (const std::string& key : keys) {
              if (index.Contains({}, key)) false_hits_.fetch_add(1);
            }
            queries_.fetch_add(1);
          }
        }) {}
  ~AbsentKeyReader() { Stop(); }
  // Lets the reader finish one more round of queries (bounded: 10 s), so it
  // has queried the state the test reached even if it was slow to start on
  // a busy machine, then stops it.
  void Stop() {
    const uint64_t seen = queries_.load();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!stop_.load() && queries_.load() <= seen + 1 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  int false_hits() const { return false_hits_.load(); }
  uint64_t queries() const { return queries_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> false_hits_{0};
  std::atomic<uint64_t> queries_{0};
  std::thread thread_;
};

}  // namespace sci::testing
