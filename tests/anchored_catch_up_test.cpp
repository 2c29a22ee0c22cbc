// A resync's catch-up anchored to the stream, not to a timer (issue #35 §4;
// feed/catch_up_anchor.h). A Mooncake master changes its metadata before it
// enqueues the event, and its publisher's queue can lag by seconds, most
// when it has just overflowed: a snapshot then reflects events the stream
// has not delivered. The catch-up ends only once the publisher's counters
// (GET /kv_events/status) prove every event older than the snapshot
// buffered. The master here is sci-publish's own (tools/): its held keys,
// admin server, production-format publisher and lagging queue, on real
// loopback sockets.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <stdexcept>
#include <memory>
#include <mutex>
#include <string_view>
#include <string>
#include <vector>

#include "admin_server.h"
#include "batch_publisher.h"
#include "encode/mooncake_encoder.h"
#include "feed/batch_peek.h"
#include "feed/catch_up_anchor.h"
#include "feed/subscriber.h"
#include "feed/wake_signal.h"
#include "held_keys.h"
#include "index/index.h"
#include "log_capture.h"
#include "master_stand_in.h"
#include "publisher_counters.h"
#include "publisher_queue.h"
#include "wait_for.h"

namespace sci {
namespace {

using namespace std::chrono_literals;
using sci::testing::AbsentKeyReader;
using sci::testing::WaitFor;
using tools::AdminServer;
using tools::BatchPublisher;
using tools::HeldKeys;
using tools::PublisherConfig;
using tools::PublisherCounters;
using tools::PublisherQueue;
using tools::ScriptEvent;

// A master whose events wait in its queue (drained at `drain_rate` events/s)
// while what it holds, and lists, changes at once.
class LaggingMaster {
 public:
  LaggingMaster(size_t depth, double drain_rate) : admin_(held_, counters_), depth_(depth), rate_(drain_rate) {
    std::string error;
    if (!admin_.Start("127.0.0.1", 0, &error)) throw std::runtime_error(error);
    PublisherConfig config;
    config.endpoint = "tcp://127.0.0.1:*";
    config.linger_ms = 0;
    publisher_ = std::make_unique<BatchPublisher>(config, counters_);
    if (!publisher_->Open(&error)) throw std::runtime_error(error);
  }
  ~LaggingMaster() {
    if (queue_ != nullptr) queue_->Close(/*drain=*/false);
  }

  std::string endpoint() { return publisher_->BoundEndpoint(); }
  std::string snapshot_url() const { return "http://127.0.0.1:" + std::to_string(admin_.port()) + "/get_all_keys"; }
  std::string admin_url() const { return "http://127.0.0.1:" + std::to_string(admin_.port()); }

  // Waits for the subscriber, then hands the socket to the queue's worker.
  bool AwaitSubscriberThenOpenQueue() {
    if (publisher_->WaitForSubscriptions(1, 10s, -1) != 1) return false;
    queue_ = std::make_unique<PublisherQueue>(*publisher_, counters_, depth_, rate_);
    return true;
  }

  void Store(const std::string& key) { Apply(key, true); }
  void Remove(const std::string& key) { Apply(key, false); }
  void Drain() { queue_->Drain(); }
  uint64_t last_sequence_sent() const { return publisher_->last_sequence_sent(); }
  PublisherCounters& counters() { return counters_; }

 private:
  void Apply(const std::string& key, bool stored) {
    ScriptEvent event;
    event.object_key = key;
    event.stored = stored;
    held_.Apply(event);  // the metadata first, as Mooncake does
    queue_->Add(event);
  }

  HeldKeys held_;
  PublisherCounters counters_;
  AdminServer admin_;
  const size_t depth_;
  const double rate_;
  std::unique_ptr<BatchPublisher> publisher_;
  std::unique_ptr<PublisherQueue> queue_;
};

// A subscriber following `master` (its status at `status_url`; empty:
// beside the snapshot URL, as a master serves it), subscribed, the master's
// socket then handed to its queue. Null, with a failure recorded, otherwise.
std::unique_ptr<Subscriber> Follow(Index& index, LaggingMaster& master, const std::string& status_url = {}) {
  SubscriberOptions options;
  options.endpoint = master.endpoint();
  options.snapshot_url = master.snapshot_url();
  options.status_url = status_url;
  options.resync_min_interval_ms = 20;
  SubscriberError code = SubscriberError::kNone;
  std::string error;
  auto subscriber = Subscriber::Start(index, options, &code, &error);
  EXPECT_NE(subscriber, nullptr) << error;
  if (subscriber == nullptr || !master.AwaitSubscriberThenOpenQueue()) {
    ADD_FAILURE() << "the master saw no subscription";
    return nullptr;
  }
  return subscriber;
}

// The lag: `ahead` events, then K stored, `between` events, K removed, 200
// more. At 2000 events/s, K's store leaves the queue ahead/2000 s after the
// snapshot that already shows it gone, its removal between/2000 s later.
void StoreAndRemoveBehindALag(LaggingMaster& master, const std::string& key, int ahead, int between) {
  for (int i = 0; i < ahead; ++i) master.Store("ahead-" + std::to_string(i));
  master.Store(key);
  for (int i = 0; i < between; ++i) master.Store("between-" + std::to_string(i));
  master.Remove(key);
  for (int i = 0; i < 200; ++i) master.Store("after-" + std::to_string(i));
}

// Start-up on a quiet master: no batch will come after the snapshot, and
// two reads a re-read apart that account for every sequence seen show it
// quiet (the quiet rule). That cannot tell a quiet master from a worker
// paused while it holds a batch taken before the snapshot (1.3.0, finding
// 5): so the index serves at once, but stored events wait (deferred) until
// the anchor -- the first batch beyond the bound with fewer than 64 events
// -- which shows that nothing older than the snapshot is still on its way.
// The first batch after the quiet spell has the bound's own sequence (it
// may be the batch a paused worker held): its stores wait; the next
// anchors, and both apply.
TEST(AnchoredCatchUp, AQuietMastersResyncServesAtOnceAndDefersStoresUntilTheAnchor) {
  testing::LogCapture log;
  LaggingMaster master(/*depth=*/65536, /*drain_rate=*/0);
  Index index;
  auto subscriber = Follow(index, master);
  ASSERT_NE(subscriber, nullptr);
  master.Store("first");  // proves the subscription: the download starts
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resyncs == 1; }, 10s));
  const Stats s = index.GetStats();
  EXPECT_EQ(s.resyncs_withholding, 1u);
  EXPECT_EQ(s.resyncs_anchored, 0u);
  EXPECT_EQ(s.resyncs_timed, 0u);
  EXPECT_TRUE(index.Contains({}, "first"));  // from the snapshot
  EXPECT_EQ(log.Count(LogLevel::kInfo, "anchored on a quiet master"), 1u);
  EXPECT_EQ(log.Count(LogLevel::kInfo, "stored events withheld until a batch beyond 2"), 1u);

  master.Store("second");  // batch 2: the bound itself, deferred
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().last_sequence == 2; }, 10s));
  EXPECT_FALSE(index.Contains({}, "second"));
  master.Store("third");  // batch 3, one event: the anchor; what waited applies, then it
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().last_sequence == 3; }, 10s));
  EXPECT_TRUE(index.Contains({}, "second"));
  EXPECT_TRUE(index.Contains({}, "third"));
  EXPECT_EQ(log.Count(LogLevel::kInfo, "the anchor came, batch 3 (beyond 2); the deferred stores applied"), 1u);
  EXPECT_EQ(index.GetStats().catch_ups_unanchored, 0u);
}

// A deferral on a master that stays silent: the paused worker the quiet rule
// cannot rule out would have sent its batch by now, so after 5 s of silence
// what waited applies (the bound docs/operations.md states).
TEST(AnchoredCatchUp, DeferredStoresApplyAfterFiveSecondsOfSilence) {
  testing::LogCapture log;
  LaggingMaster master(/*depth=*/65536, /*drain_rate=*/0);
  Index index;
  auto subscriber = Follow(index, master);
  ASSERT_NE(subscriber, nullptr);
  master.Store("first");
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resyncs == 1; }, 10s));
  master.Store("second");  // the bound's batch: deferred, and then nothing more
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().last_sequence == 2; }, 10s));
  EXPECT_FALSE(index.Contains({}, "second"));
  const auto deferred_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return index.Contains({}, "second"); }, 10s));
  EXPECT_GE(std::chrono::steady_clock::now() - deferred_at, 4s);
  // Logged just after the stores apply, on the subscriber's thread: awaited.
  EXPECT_TRUE(WaitFor(
      [&] { return log.Count(LogLevel::kInfo, "the stream stayed silent for 5000 ms; the deferred stores applied") == 1; },
      10s));
}

// A master that never goes quiet (live traffic, one event a batch): only a
// batch beyond the bound ends the catch-up, two or three batches after the
// status read.
TEST(AnchoredCatchUp, ABusyMastersResyncEndsAtTheFirstShortBatchBeyondTheBound) {
  testing::LogCapture log;
  LaggingMaster master(/*depth=*/65536, /*drain_rate=*/0);
  Index index;
  auto subscriber = Follow(index, master);
  ASSERT_NE(subscriber, nullptr);
  int live = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        master.Store("live-" + std::to_string(++live));
        return index.GetStats().resyncs == 1;
      },
      10s));
  EXPECT_EQ(index.GetStats().resyncs_anchored, 1u);
  EXPECT_EQ(log.Count(LogLevel::kInfo, "catch-up anchored at batch"), 1u);
  master.Drain();
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().last_sequence == master.last_sequence_sent(); }, 10s));
  for (int i = 1; i <= live; ++i) EXPECT_TRUE(index.Contains({}, "live-" + std::to_string(i))) << i;
}

// The case: a key stored and removed at the master before the
// snapshot, whose events sit behind a second of queue. The snapshot shows
// it gone; its store arrives a second later, its removal after that. The
// catch-up waits for the batch that empties the queue, so both are replayed
// before the index serves: it never shows.
TEST(AnchoredCatchUp, AStoredThenRemovedKeyLaggingTheSnapshotBySecondsNeverShows) {
  testing::LogCapture log;
  LaggingMaster master(/*depth=*/65536, /*drain_rate=*/2000);
  Index index;
  auto subscriber = Follow(index, master);
  ASSERT_NE(subscriber, nullptr);
  master.Store("first");
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resyncs == 1; }, 10s));

  AbsentKeyReader reader(index, {"lagging"});
  StoreAndRemoveBehindALag(master, "lagging", /*ahead=*/2000, /*between=*/1000);
  index.Clear();  // an operator's clear, or a gap: the resync starts now, the queue 1.6 s long
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resyncs == 2; }, 30s));
  // The start-up's on a quiet master (withholding), this one's anchored.
  EXPECT_EQ(index.GetStats().resyncs_withholding, 1u);
  EXPECT_EQ(index.GetStats().resyncs_anchored, 1u);
  EXPECT_EQ(index.GetStats().resyncs_timed, 0u);
  // By the batch that emptied the queue, not by the quiet rule: the second
  // resync ended while the stream still flowed.
  EXPECT_EQ(log.Count(LogLevel::kInfo, "catch-up anchored at batch"), 1u);
  master.Drain();
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().last_sequence == master.last_sequence_sent(); }, 30s));
  reader.Stop();
  EXPECT_EQ(reader.false_hits(), 0);
  EXPECT_GT(reader.queries(), 0u);
  EXPECT_FALSE(index.Contains({}, "lagging"));
  EXPECT_TRUE(index.Contains({}, "ahead-0"));
  EXPECT_TRUE(index.Contains({}, "after-199"));
}

// The same master without its status endpoint: the catch-up falls back to
// the 1.2 timer (counted, warned once), which a queue lagging a second does
// not cover -- the key shows between its late store and its later removal.
// This is the hole the anchor closes, and the proof that the test above
// would see it.
TEST(AnchoredCatchUp, WithoutTheStatusEndpointTheTimerRunsAndALaggingQueueShowsThroughIt) {
  testing::LogCapture log;
  LaggingMaster master(/*depth=*/65536, /*drain_rate=*/2000);
  Index index;
  auto subscriber = Follow(index, master, master.admin_url() + "/no_status_here");
  ASSERT_NE(subscriber, nullptr);
  master.Store("first");
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resyncs == 1; }, 10s));
  EXPECT_EQ(index.GetStats().resyncs_timed, 1u);

  StoreAndRemoveBehindALag(master, "lagging", /*ahead=*/2000, /*between=*/2000);
  index.Clear();
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resyncs == 2; }, 30s));
  EXPECT_EQ(index.GetStats().resyncs_timed, 2u);
  EXPECT_EQ(index.GetStats().resyncs_anchored, 0u);
  // Served long before the store leaves the queue: the store shows it.
  EXPECT_TRUE(WaitFor([&] { return index.Contains({}, "lagging"); }, 30s));
  master.Drain();
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().last_sequence == master.last_sequence_sent(); }, 30s));
  EXPECT_FALSE(index.Contains({}, "lagging"));
  EXPECT_EQ(log.Count(LogLevel::kWarn, "the catch-up ends on the 100 ms timer"), 1u);
  EXPECT_GE(index.GetStats().status_unavailable, 2u);
}

// An admin server answering the publisher counters a test sets.
// How a catch-up ended is counted before the index serves: whoever meets a
// hit only a timed catch-up can give finds resyncs_timed already moved.
// Read at the resync's "serving" line, which comes after the index serves:
// the count was taken after that line before, and the simulation's soak
// met a timed catch-up's hit with the counter still behind.
TEST(AnchoredCatchUp, HowTheCatchUpEndedIsCountedBeforeTheIndexServes) {
  struct AtServing {
    Index index;
    std::mutex mu;
    std::vector<Stats> stats;  // at each "serving" line
    static void Record(void* user, int32_t, const char* msg, size_t len) {
      auto* self = static_cast<AtServing*>(user);
      if (std::string_view(msg, len).find("; serving") == std::string_view::npos) return;
      const Stats s = self->index.GetStats();
      std::lock_guard<std::mutex> lock(self->mu);
      self->stats.push_back(s);
    }
  };
  // A timed catch-up (no status endpoint), then one that withholds (a
  // quiet master), each on a master and an index of its own.
  for (const bool timed : {true, false}) {
    auto seen = std::make_unique<AtServing>();
    SetLogCallback(&AtServing::Record, seen.get());
    struct Unset {
      ~Unset() { SetLogCallback(nullptr, nullptr); }
    } unset;
    LaggingMaster master(/*depth=*/65536, /*drain_rate=*/0);
    auto subscriber = Follow(seen->index, master, timed ? master.admin_url() + "/no_status_here" : std::string());
    ASSERT_NE(subscriber, nullptr);
    master.Store("first");
    ASSERT_TRUE(WaitFor([&] { return seen->index.GetStats().resyncs == 1; }, 10s));
    subscriber.reset();
    std::lock_guard<std::mutex> lock(seen->mu);
    ASSERT_EQ(seen->stats.size(), 1u);
    EXPECT_EQ(seen->stats[0].resyncs_timed, timed ? 1u : 0u) << "a timed catch-up served before it was counted";
    EXPECT_EQ(seen->stats[0].resyncs_withholding, timed ? 0u : 1u) << "a withholding one served before it was counted";
  }
}

struct StatusAt {
  StatusAt(uint64_t published_batches, uint64_t dropped_events) : admin(held, counters) {
    counters.published_batches = published_batches;
    counters.dropped_events = dropped_events;
    std::string error;
    if (!admin.Start("127.0.0.1", 0, &error)) throw std::runtime_error(error);
  }
  std::string url(const std::string& path = "/kv_events/status") const {
    return "http://127.0.0.1:" + std::to_string(admin.port()) + path;
  }
  HeldKeys held;
  PublisherCounters counters;
  AdminServer admin;
};

// The bound, read from a status the test sets: published 10 + dropped 5
// means every batch taken before the read has a sequence of at most 16
// (16 itself: the batch the worker may hold). Only a batch beyond it with
// fewer than 64 events anchors; one that came before the answer counts.
TEST(CatchUpAnchor, OnlyAShortBatchBeyondTheBoundAnchors) {
  const StatusAt status(/*published_batches=*/10, /*dropped_events=*/5);
  const std::string url = status.url();
  WakeSignal wake;
  Index index;
  const auto poll_until_answered = [&](CatchUpAnchor& anchor) {
    return WaitFor([&] {
      return anchor.Poll(std::chrono::steady_clock::now(), true, 15, index) != CatchUpAnchor::State::kReading;
    });
  };

  CatchUpAnchor anchor(false, 1h, wake);  // one read: no quiet rule here
  anchor.Start(std::chrono::steady_clock::now(), url);
  ASSERT_TRUE(poll_until_answered(anchor));
  EXPECT_EQ(anchor.state(), CatchUpAnchor::State::kWaiting);
  anchor.OnBatch(16, 1);  // may have been taken before the read
  anchor.OnBatch(17, 64);  // a full batch: the queue may not be empty
  EXPECT_EQ(anchor.state(), CatchUpAnchor::State::kWaiting);
  anchor.OnBatch(18, 63);
  EXPECT_EQ(anchor.state(), CatchUpAnchor::State::kAnchored);
  EXPECT_TRUE(anchor.ended());
  EXPECT_NE(anchor.detail().find("anchored at batch 18"), std::string::npos) << anchor.detail();

  // A short batch beyond the bound that arrived while the read was out.
  anchor.Start(std::chrono::steady_clock::now(), url);
  anchor.OnBatch(20, 3);
  EXPECT_EQ(anchor.state(), CatchUpAnchor::State::kReading);
  ASSERT_TRUE(poll_until_answered(anchor));
  EXPECT_EQ(anchor.state(), CatchUpAnchor::State::kAnchored);

  // No endpoint there: unavailable, the caller's timer decides.
  CatchUpAnchor missing(false, 1h, wake);
  missing.Start(std::chrono::steady_clock::now(), status.url("/nothing"));
  ASSERT_TRUE(poll_until_answered(missing));
  EXPECT_EQ(missing.state(), CatchUpAnchor::State::kUnavailable);
  EXPECT_EQ(index.GetStats().status_unavailable, 1u);
  CatchUpAnchor nowhere(false, 1h, wake);
  nowhere.Start(std::chrono::steady_clock::now(), "");
  EXPECT_EQ(nowhere.state(), CatchUpAnchor::State::kUnavailable);
}

// The quiet rule wants two answers that both account for exactly the last
// sequence seen: one that is ahead (a batch on its way, or dropped events at
// the tail) never ends the catch-up.
TEST(CatchUpAnchor, TheQuietRuleWantsTwoAnswersEqualToTheLastSequence) {
  const StatusAt status(/*published_batches=*/7, /*dropped_events=*/2);
  const std::string url = status.url();
  WakeSignal wake;
  Index index;
  CatchUpAnchor anchor(false, 1ms, wake);
  anchor.Start(std::chrono::steady_clock::now(), url);
  ASSERT_TRUE(WaitFor(
      [&] { return anchor.Poll(std::chrono::steady_clock::now(), true, 8, index) != CatchUpAnchor::State::kReading; }));
  // Last sequence 8 < 9: however many reads (one every ms), it waits.
  EXPECT_FALSE(WaitFor(
      [&] { return anchor.Poll(std::chrono::steady_clock::now(), true, 8, index) != CatchUpAnchor::State::kWaiting; },
      300ms));
  EXPECT_EQ(anchor.state(), CatchUpAnchor::State::kWaiting);
  // The last batch arrives: sequence 9 = 7 + 2; two more answers end it.
  ASSERT_TRUE(WaitFor(
      [&] { return anchor.Poll(std::chrono::steady_clock::now(), true, 9, index) == CatchUpAnchor::State::kQuiet; }));
  EXPECT_NE(anchor.detail().find("quiet master"), std::string::npos) << anchor.detail();
}

// 1.3.0, finding 4: a status whose bound is below a batch the stream showed
// before the read (a restarted master's reset counters, another master's)
// cannot bound this stream: 1.3 anchored on it at once, with a removed key
// answered present for seconds. It is refused (status_refused) and the
// catch-up falls back to the timer; one that accounts for the stream is
// taken.
TEST(CatchUpAnchor, ABoundBelowWhatTheStreamShowedIsRefused) {
  const StatusAt reset(/*published_batches=*/3, /*dropped_events=*/0);  // bound 4
  WakeSignal wake;
  Index index;
  CatchUpAnchor anchor(false, 1h, wake);
  anchor.Start(std::chrono::steady_clock::now(), reset.url());
  ASSERT_TRUE(WaitFor([&] {
    return anchor.Poll(std::chrono::steady_clock::now(), true, 40, index) != CatchUpAnchor::State::kReading;
  }));
  EXPECT_EQ(anchor.state(), CatchUpAnchor::State::kUnavailable);
  EXPECT_FALSE(anchor.bound_known());
  EXPECT_EQ(index.GetStats().status_refused, 1u);
  EXPECT_NE(anchor.detail().find("is below batch 40"), std::string::npos) << anchor.detail();
  anchor.OnBatch(41, 1);  // would have anchored on the refused bound
  EXPECT_FALSE(anchor.ended());

  // The bound may equal the last batch shown + 1 (a batch counted after its
  // send returned): that is this stream's.
  const StatusAt same(/*published_batches=*/38, /*dropped_events=*/1);  // bound 40
  CatchUpAnchor taken(false, 1h, wake);
  taken.Start(std::chrono::steady_clock::now(), same.url());
  ASSERT_TRUE(WaitFor([&] {
    return taken.Poll(std::chrono::steady_clock::now(), true, 40, index) != CatchUpAnchor::State::kReading;
  }));
  EXPECT_EQ(taken.state(), CatchUpAnchor::State::kWaiting);
  EXPECT_EQ(taken.bound(), 40u);
  EXPECT_EQ(index.GetStats().status_refused, 1u);
}

// The event ids a batch begins and ends with, peeked from the real encoding
// without decoding it: what the resync's buffer checks for a restart.
TEST(BatchPeek, ReadsTheEventIdsOfTheRealEncoding) {
  const auto frames_of = [](const std::vector<MooncakeEvent>& events) {
    std::string payload;
    EncodeMooncakePayload(1700000000000, events, &payload);
    const std::array<uint8_t, 8> sequence = EncodeSequence(9);
    std::vector<zmq::message_t> frames;
    frames.emplace_back();
    frames.emplace_back(sequence.data(), sequence.size());
    frames.emplace_back(payload.data(), payload.size());
    return frames;
  };
  const std::string a = "a", b = "b", c = "c";
  BatchPeek peek = PeekBatch(frames_of({sci::testing::StoredEvent(41, a), sci::testing::RemovedEvent(42, b),
                                        sci::testing::StoredEvent(43, c)}));
  EXPECT_TRUE(peek.has_sequence);
  EXPECT_EQ(peek.sequence, 9u);
  EXPECT_EQ(peek.events, 3u);
  EXPECT_TRUE(peek.ids_known);
  EXPECT_EQ(peek.first_id, 41u);
  EXPECT_EQ(peek.last_id, 43u);
  // An event without a number (nil, or 0: no publisher's) leaves the ids unknown.
  MooncakeEvent nil = sci::testing::StoredEvent(7, b);
  nil.event_id_nil = true;
  EXPECT_FALSE(PeekBatch(frames_of({sci::testing::StoredEvent(6, a), nil})).ids_known);
  EXPECT_FALSE(PeekBatch(frames_of({sci::testing::StoredEvent(0, a)})).ids_known);
  EXPECT_FALSE(PeekBatch(frames_of({})).ids_known);
}

// The event count is read from the payload without decoding the events.
TEST(CatchUpAnchor, TheBatchSizeIsPeekedFromTheRealEncoding) {
  for (const size_t n : {size_t{0}, size_t{1}, size_t{63}, size_t{64}}) {
    std::vector<std::string> keys;  // the events view them
    for (size_t i = 0; i < n; ++i) keys.push_back("k" + std::to_string(i));
    std::vector<MooncakeEvent> events;
    for (size_t i = 0; i < n; ++i) events.push_back(sci::testing::StoredEvent(i + 1, keys[i]));
    std::string payload;
    EncodeMooncakePayload(1700000000000, events, &payload);
    const std::array<uint8_t, 8> sequence = EncodeSequence(5);
    std::vector<zmq::message_t> frames;
    frames.emplace_back();
    frames.emplace_back(sequence.data(), sequence.size());
    frames.emplace_back(payload.data(), payload.size());
    uint32_t count = 99;
    ASSERT_TRUE(PeekBatchEventCount(frames, &count)) << n;
    EXPECT_EQ(count, n);
  }
  std::vector<zmq::message_t> two(2);
  uint32_t count = 0;
  EXPECT_FALSE(PeekBatchEventCount(two, &count));
  std::vector<zmq::message_t> not_an_array(3);
  const uint8_t map[] = {0x80};
  not_an_array[2] = zmq::message_t(map, sizeof(map));
  EXPECT_FALSE(PeekBatchEventCount(not_an_array, &count));
}

}  // namespace
}  // namespace sci
