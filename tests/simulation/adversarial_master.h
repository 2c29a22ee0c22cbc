// One adversarial Mooncake master for the simulation (simulation_test.cpp),
// made of sci-publish's real pieces on loopback sockets: HeldKeys (what it
// holds, changed before the event is enqueued), PublisherQueue (one worker,
// 64 events a batch, drop-oldest), BatchPublisher (the production wire
// format) and AdminServer (GET /get_all_keys, GET /kv_events/status), with
// the faults its nemesis asks for: a stalled worker, failed sends, lost
// batches, a publisher restarted on the same endpoint with any numbering, a
// status that lags, resets, fails or belongs to the other master, a listing
// served late.
//
// The admin server lives as long as the master (its port is the master's
// address); a restart replaces the publisher, its counters and its queue,
// and forgets what the master held.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "admin_server.h"
#include "batch_publisher.h"
#include "held_keys.h"
#include "publisher_counters.h"
#include "publisher_queue.h"
#include "schedule.h"
#include "truth.h"

namespace sci::testing::sim {

class AdversarialMaster {
 public:
  using Clock = std::chrono::steady_clock;

  AdversarialMaster(int id, Truth& truth, size_t queue_depth, double drain_rate)
      : id_(id), truth_(truth), admin_(held_, counters_), depth_(queue_depth), rate_(drain_rate) {
    admin_.SetFaultHooks([this](int* http_status, std::string* body) { return Status(http_status, body); },
                         [this] { return Listing(); });
    std::string error;
    if (!admin_.Start("127.0.0.1", 0, &error)) throw std::runtime_error(error);
  }
  ~AdversarialMaster() {
    StopPublisher(/*drain=*/false);
    admin_.Stop();
  }
  AdversarialMaster(const AdversarialMaster&) = delete;
  AdversarialMaster& operator=(const AdversarialMaster&) = delete;

  void set_other(AdversarialMaster* other) { other_ = other; }
  int id() const { return id_; }
  std::string endpoint() const { return endpoint_; }
  std::string snapshot_url() const { return base_url() + "/get_all_keys"; }
  std::string status_url() const { return base_url() + "/kv_events/status"; }

  // A publisher incarnation: bound (on the master's endpoint once it has
  // one), then `after_bind` (a retarget to it), then, once a subscriber has
  // subscribed (bounded), its queue. `preset_published`: batches it says it
  // sent before anyone saw them.
  bool StartPublisher(uint64_t first_sequence, uint64_t first_event_id, uint64_t preset_published,
                      const std::function<void()>& after_bind, std::string* error) {
    counters_.published_batches.store(preset_published);
    counters_.published_events.store(preset_published);
    counters_.dropped_events.store(0);
    tools::PublisherConfig config;
    config.endpoint = endpoint_.empty() ? "tcp://127.0.0.1:*" : endpoint_;
    config.first_sequence = first_sequence;
    config.first_event_id = first_event_id;
    // Long enough for a closing publisher to hand a burst to the subscriber
    // (a backlog across the restart); the production 0 would lose its tail.
    config.linger_ms = 2000;
    config.backend_id = "sim-master-" + std::to_string(id_);
    first_event_id_ = first_event_id;
    first_sequence_ = first_sequence;
    publisher_ = std::make_unique<tools::BatchPublisher>(config, counters_);
    if (!publisher_->Open(error)) return false;
    if (endpoint_.empty()) endpoint_ = publisher_->BoundEndpoint();
    if (after_bind) after_bind();
    subscribed_ = publisher_->WaitForSubscriptions(1, std::chrono::seconds(5), -1) == 1;
    queue_ = std::make_unique<tools::PublisherQueue>(*publisher_, counters_, depth_, rate_);
    return true;
  }

  // The publisher goes away: its queue drained first or dropped with it.
  void StopPublisher(bool drain) {
    if (queue_ != nullptr) queue_->Close(drain);
    if (publisher_ != nullptr) {
      last_sequence_ = LastSequence();
      last_event_id_ = LastEventId();
      publisher_->Close();
    }
    queue_.reset();
    publisher_.reset();
  }

  bool subscribed() const { return subscribed_; }
  bool running() const { return queue_ != nullptr; }

  // The metadata first, then the event (Mooncake's order).
  void Store(const std::string& key) { Change(key, true); }
  void Remove(const std::string& key) { Change(key, false); }
  void Drain() {
    if (queue_ != nullptr) queue_->Drain();
  }
  tools::PublisherQueue& queue() { return *queue_; }
  tools::HeldKeys& held() { return held_; }
  tools::PublisherCounters& counters() { return counters_; }

  // The last sequence sent and event id used, by the running publisher
  // (call once drained) or the last one.
  uint64_t LastSequence() const {
    if (publisher_ == nullptr) return last_sequence_;
    return publisher_->sent_any() ? publisher_->last_sequence_sent() : first_sequence_ - 1;
  }
  uint64_t LastEventId() const {
    if (publisher_ == nullptr) return last_event_id_;
    return first_event_id_ + publisher_->events() - 1;
  }

  void SetStatusMode(StatusMode mode, std::chrono::milliseconds for_how_long) {
    std::lock_guard<std::mutex> lock(mu_);
    mode_ = mode;
    mode_until_ = Clock::now() + for_how_long;
    frozen_published_ = counters_.published_batches.load();
    frozen_events_ = counters_.published_events.load();
    frozen_dropped_ = counters_.dropped_events.load();
  }
  void DelayNextListing(std::chrono::milliseconds delay) {
    std::lock_guard<std::mutex> lock(mu_);
    listing_delay_ = delay;
  }
  uint64_t listings_served() const { return admin_.listings_served(); }

 private:
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(admin_.port()); }

  void Change(const std::string& key, bool stored) {
    tools::ScriptEvent event;
    event.object_key = key;
    event.stored = stored;
    truth_.Apply(id_, held_, event);
    queue_->Add(event);
  }

  static std::string StatusJson(uint64_t published, uint64_t events, uint64_t dropped) {
    return "{\"enabled\":true,\"published_batches\":" + std::to_string(published) +
           ",\"published_events\":" + std::to_string(events) + ",\"dropped_events\":" + std::to_string(dropped) +
           ",\"skipped_unparsed_keys\":0}";
  }

  // A count since `base` (the count itself if a restart reset it since).
  static uint64_t Since(uint64_t now, uint64_t base) { return now >= base ? now - base : now; }

  // The admin server's status hook: false = answer the counters as usual.
  bool Status(int* http_status, std::string* body) {
    std::lock_guard<std::mutex> lock(mu_);
    if (mode_ == StatusMode::kNormal || Clock::now() >= mode_until_) return false;
    switch (mode_) {
      case StatusMode::kNormal: return false;
      case StatusMode::kLagging: *body = StatusJson(frozen_published_, frozen_events_, frozen_dropped_); return true;
      case StatusMode::kReset:
        *body = StatusJson(Since(counters_.published_batches.load(), frozen_published_),
                           Since(counters_.published_events.load(), frozen_events_),
                           Since(counters_.dropped_events.load(), frozen_dropped_));
        return true;
      case StatusMode::kNotFound: *http_status = 404; *body = "Not Found"; return true;
      case StatusMode::kUnavailable: *http_status = 503; *body = "Service Unavailable"; return true;
      case StatusMode::kOtherMaster: {
        const tools::PublisherCounters& c = other_->counters();
        *body = StatusJson(c.published_batches.load(), c.published_events.load(), c.dropped_events.load());
        return true;
      }
      case StatusMode::kDuplicateKeys:
        // Each key twice: first a frozen copy, then the live counters.
        *body = "{\"enabled\":true,\"published_batches\":" + std::to_string(frozen_published_) +
                ",\"dropped_events\":" + std::to_string(frozen_dropped_) +
                ",\"published_batches\":" + std::to_string(counters_.published_batches.load()) +
                ",\"published_events\":" + std::to_string(counters_.published_events.load()) +
                ",\"dropped_events\":" + std::to_string(counters_.dropped_events.load()) +
                ",\"skipped_unparsed_keys\":0}";
        return true;
    }
    return false;
  }

  // The admin server's listing hook: taken (and recorded) at once, served
  // late if the nemesis asked (the stream meanwhile runs ahead of it).
  std::shared_ptr<const std::string> Listing() {
    std::shared_ptr<const std::string> body = truth_.TakeListing(id_, held_);
    std::chrono::milliseconds delay{0};
    {
      std::lock_guard<std::mutex> lock(mu_);
      delay = std::exchange(listing_delay_, std::chrono::milliseconds(0));
    }
    if (delay.count() > 0) std::this_thread::sleep_for(delay);  // the fault itself, not a synchronisation
    return body;
  }

  const int id_;
  Truth& truth_;
  AdversarialMaster* other_ = nullptr;
  tools::HeldKeys held_;
  tools::PublisherCounters counters_;
  tools::AdminServer admin_;
  const size_t depth_;
  const double rate_;
  std::string endpoint_;

  std::unique_ptr<tools::BatchPublisher> publisher_;
  std::unique_ptr<tools::PublisherQueue> queue_;
  bool subscribed_ = false;
  uint64_t first_sequence_ = 1;
  uint64_t first_event_id_ = 1;
  uint64_t last_sequence_ = 0;
  uint64_t last_event_id_ = 0;

  std::mutex mu_;  // the fault modes, read on the admin server's threads
  StatusMode mode_ = StatusMode::kNormal;
  Clock::time_point mode_until_{};
  uint64_t frozen_published_ = 0;
  uint64_t frozen_events_ = 0;
  uint64_t frozen_dropped_ = 0;
  std::chrono::milliseconds listing_delay_{0};
};

}  // namespace sci::testing::sim
