// The subscriber outlives allocation failures (issue #34, R6): a failure
// anywhere in its loop -- decoding, applying, logging, the resync buffer --
// costs the index and a resync, never the subscriber, and no query answers
// a hit that the stream does not support meanwhile.
//
// This binary replaces the global operator new (replaced_operator_new.h)
// and fails allocations on the subscriber's own thread only (found through
// its "connected" log line), and only those the library makes: libzmq, which
// runs on that thread too, is not exception-safe (a std::bad_alloc thrown
// inside zmq_connect leaves its I/O thread to crash later), so neither its
// nothrow forms nor any allocation with libzmq on the stack are failed.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <execinfo.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/log.h"
#include "encode/mooncake_event.h"
#include "feed/subscriber.h"
#include "index/index.h"
#include "loopback_publisher.h"
#include "master_stand_in.h"
#include "wait_for.h"

#include "replaced_operator_new.h"

namespace {
std::atomic<std::thread::id> g_subscriber_thread{};
// Allocations still to fail on the subscriber's thread; -1: every one.
std::atomic<long> g_fail_remaining{0};
std::atomic<long> g_failed{0};
// Allocations of the subscriber's thread to let through before failing
// (the sweep's: the K-th allocation fails); counted while positive.
std::atomic<long> g_pass_before_failing{0};
std::atomic<long> g_counted{0};  // allocations seen while counting (g_count_only)
std::atomic<bool> g_count_only{false};
// The bytes a completed resync replayed from its spill file (its log line).
std::atomic<long> g_spilled_replayed{-1};

bool TakeFailure() {
  if (g_count_only.load()) {
    g_counted.fetch_add(1);
    return false;
  }
  for (long pass = g_pass_before_failing.load(); pass > 0;) {
    if (g_pass_before_failing.compare_exchange_weak(pass, pass - 1)) return false;
  }
  long remaining = g_fail_remaining.load();
  while (remaining != 0) {
    if (remaining < 0) return true;
    if (g_fail_remaining.compare_exchange_weak(remaining, remaining - 1)) return true;
  }
  return false;
}
}  // namespace

// Whether libzmq is on the stack of this allocation (its own, or the
// standard library's on its behalf). backtrace() and dladdr() allocate
// nothing once libgcc's unwinder is loaded (the test's SetUp warms it).
bool CalledFromLibzmq() {
  void* frames[32];
  const int n = ::backtrace(frames, 32);
  for (int i = 1; i < n; ++i) {
    Dl_info info;
    if (::dladdr(frames[i], &info) != 0 && info.dli_fname != nullptr && std::strstr(info.dli_fname, "libzmq")) {
      return true;
    }
  }
  return false;
}

void* sci_test::AllocateForTest(std::size_t size, std::size_t alignment) {
  if (!in_nothrow_new && std::this_thread::get_id() == g_subscriber_thread.load() && !CalledFromLibzmq() &&
      TakeFailure()) {
    g_failed.fetch_add(1);
    return nullptr;
  }
  return HeapAllocate(size, alignment);
}

namespace sci {
namespace {

using sci::testing::AbsentKeyReader;
using sci::testing::LoopbackPublisher;
using sci::testing::Master;
using sci::testing::RemovedEvent;
using sci::testing::StoredEvent;
using sci::testing::TickUntil;
using sci::testing::WaitFor;

// Learns the subscriber's thread from its "connected" line, and what a
// resync replayed from its spill file from its "serving" line; allocates
// nothing.
void FindSubscriberThread(void*, int32_t, const char* msg, size_t len) {
  const std::string_view line(msg, len);
  if (line.find(": connected to ") != std::string_view::npos) {
    g_subscriber_thread.store(std::this_thread::get_id());
  }
  constexpr std::string_view kReplayed = "buffered messages replayed (";
  if (const size_t at = line.find(kReplayed); at != std::string_view::npos) {
    g_spilled_replayed.store(std::strtol(msg + at + kReplayed.size(), nullptr, 10));
  }
}

class SubscriberAllocationFailure : public ::testing::TestWithParam<long> {
 protected:
  void SetUp() override {
    void* warm[1];
    (void)::backtrace(warm, 1);  // loads the unwinder now, not inside an allocation
    g_subscriber_thread.store(std::thread::id{});
    g_fail_remaining.store(0);
    g_failed.store(0);
    g_pass_before_failing.store(0);
    g_count_only.store(false);
    g_counted.store(0);
    SetLogCallback(&FindSubscriberThread, nullptr);
  }
  void TearDown() override {
    g_fail_remaining.store(0);
    SetLogCallback(nullptr, nullptr);
  }
};

std::unique_ptr<Subscriber> Start(Index& index, SubscriberOptions options) {
  SubscriberError code = SubscriberError::kNone;
  std::string error;
  auto subscriber = Subscriber::Start(index, options, &code, &error);
  EXPECT_NE(subscriber, nullptr) << error;
  return subscriber;
}

// The next `GetParam()` allocations of the subscriber's thread fail (-1:
// all of them, until the loop has failed once) while it takes a batch that
// removes a key; whatever failed, the key never answers hit, and the
// subscriber applies what comes next.
TEST_P(SubscriberAllocationFailure, ARunOfFailuresCostsAtMostTheIndex) {
  Index index;
  LoopbackPublisher publisher(sci::testing::kAnyLoopbackTcpPort);
  SubscriberOptions options;
  options.endpoint = publisher.endpoint();
  auto subscriber = Start(index, options);
  ASSERT_NE(subscriber, nullptr);
  ASSERT_TRUE(publisher.AwaitSubscription());
  ASSERT_TRUE(WaitFor([] { return g_subscriber_thread.load() != std::thread::id{}; }));

  const MooncakeEvent one[] = {StoredEvent(1, "a"), StoredEvent(2, "b")};
  publisher.SendBatch(1, one);
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().last_sequence == 1; }));

  // A batch that must allocate (its events outgrow the decoder's scratch,
  // its keys the tables): the removal of "a" and 300 stores.
  std::vector<std::string> keys;
  for (int i = 0; i < 300; ++i) keys.push_back("key-" + std::to_string(i));
  std::vector<MooncakeEvent> two = {RemovedEvent(3, "a")};
  for (const std::string& key : keys) two.push_back(StoredEvent(4 + two.size(), key));

  const long failures = GetParam();
  const uint64_t clears_before = index.GetStats().clears;
  g_fail_remaining.store(failures);
  publisher.SendBatch(2, two);
  // Either the batch was applied, or a failure cleared the index (any
  // other outcome times out here: a lost batch that nothing shows).
  ASSERT_TRUE(WaitFor([&] {
    const Stats stats = index.GetStats();
    return stats.last_sequence == 2 || stats.clears > clears_before;
  })) << g_failed.load() << " allocations failed";
  // From here on "a" never answers hit, while the failures run out and the
  // subscriber recovers.
  AbsentKeyReader reader(index, {"a"});
  if (failures < 0) {
    // Every allocation fails until the loop itself has failed once.
    ASSERT_TRUE(WaitFor([&] { return index.GetStats().subscriber_failures >= 1; }));
  }
  g_fail_remaining.store(0);  // a run of at most `failures`
  const bool failed = g_failed.load() > 0;
  if (failures < 0 || failures <= 8) EXPECT_TRUE(failed);

  const MooncakeEvent three[] = {StoredEvent(5, "d")};
  const MooncakeEvent four[] = {StoredEvent(6, "e")};
  publisher.SendBatch(3, three);
  publisher.SendBatch(4, four);
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().last_sequence == 4; }))
      << "the subscriber applies nothing after " << g_failed.load() << " failed allocations";
  EXPECT_TRUE(index.Contains({}, "e"));
  reader.Stop();
  EXPECT_EQ(reader.false_hits(), 0) << "a removed key answered hit";
  EXPECT_FALSE(index.Contains({}, "a"));
  if (!failed) {
    EXPECT_TRUE(index.Contains({}, "b"));
    EXPECT_TRUE(index.Contains({}, "d"));
    for (const std::string& key : keys) EXPECT_TRUE(index.Contains({}, key)) << key;
  }
  EXPECT_TRUE(index.GetStats().subscriber_connected);
}

INSTANTIATE_TEST_SUITE_P(Runs, SubscriberAllocationFailure, ::testing::Values(1, 2, 3, 5, 8, 13, 21, 34, -1),
                         [](const ::testing::TestParamInfo<long>& info) {
                           return info.param < 0 ? std::string("Every") : std::to_string(info.param);
                         });

// A master whose snapshot holds "a" and "b", and a subscriber resyncing
// from it (`options`: its buffer's) whose download the master holds: the
// subscription proven, the snapshot asked for, nothing loaded yet. Null,
// with a failure recorded, if a step does not happen.
std::unique_ptr<Subscriber> StartWithDownloadHeld(Master& master, Index& index, SubscriberOptions options = {}) {
  g_subscriber_thread.store(std::thread::id{});  // this subscriber names its own
  master.snapshot().Add("a");
  master.snapshot().Add("b");
  const SubscriberOptions follow = sci::testing::OptionsToFollow(master);
  options.endpoint = follow.endpoint;  // the buffer's options are the caller's
  options.snapshot_url = follow.snapshot_url;
  options.resync_min_interval_ms = follow.resync_min_interval_ms;
  options.snapshot_timeout_ms = follow.snapshot_timeout_ms;
  master.snapshot().Hold();
  auto subscriber = Start(index, options);
  if (subscriber == nullptr) return nullptr;
  EXPECT_TRUE(master.publisher().AwaitSubscription());
  EXPECT_TRUE(WaitFor([] { return g_subscriber_thread.load() != std::thread::id{}; }));
  master.Tick();  // proves the subscription; the download starts and is held
  EXPECT_TRUE(WaitFor([&] { return master.snapshot().requests() == 1; }));
  return ::testing::Test::HasFailure() ? nullptr : std::move(subscriber);
}

// A resync's buffer cannot take a message (ResyncBuffer::Add, 1.2: the
// subscriber was abandoned): the resync fails, is retried after its
// back-off, and serves the master's state.
TEST_F(SubscriberAllocationFailure, ABufferThatCannotGrowFailsTheResyncNotTheSubscriber) {
  Master master;
  Index index;
  auto subscriber = StartWithDownloadHeld(master, index);
  ASSERT_NE(subscriber, nullptr);

  AbsentKeyReader reader(index, {"a"});
  g_fail_remaining.store(-1);
  master.Remove("a");  // buffered while the download is held: cannot be
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().subscriber_failures >= 1; }));
  g_fail_remaining.store(0);
  master.snapshot().Release();

  ASSERT_TRUE(TickUntil(master, [&] {
    const Stats stats = index.GetStats();
    return stats.resyncs >= 1 && !stats.resyncing;
  }));
  EXPECT_GE(index.GetStats().resync_failures, 1u);
  EXPECT_TRUE(index.Contains({}, "b"));
  master.Remove("b");
  master.Store("c");
  ASSERT_TRUE(WaitFor([&] { return index.Contains({}, "c"); }));
  EXPECT_FALSE(index.Contains({}, "b"));
  reader.Stop();
  EXPECT_EQ(reader.false_hits(), 0) << "a removed key answered hit";
  EXPECT_FALSE(index.Contains({}, "a"));
}

// The sweep of a resync's second half (issue #34 §2): the snapshot is
// loaded and the stream buffered during its download is replayed -- from
// memory and from the spill file (a 1-byte memory buffer spills every
// message) -- and the stream goes on. The run is made once counting the
// subscriber thread's allocations from the snapshot's release to the end of
// the catch-up, then once per allocation, failing the K-th. Whatever fails,
// the removed key never answers hit, and the subscriber ends on the
// master's state, connected. Twice: with the master's status endpoint (the
// catch-up anchored: its reads, the batches it peeks) and without (the
// timer, after a read that finds none).
struct ResyncRun {
  bool caught_up = false;     // resynced, and the stream applied after it
  int false_hits = 0;
  bool a_absent = false, c_present = false, connected = false;
  bool anchored = false;
};

ResyncRun RunResyncWithSpill(long fail_at, bool status) {
  Master master;
  if (status) master.ServeStatus();
  Index index;
  SubscriberOptions options;
  options.resync_buffer_bytes = 1;  // every buffered message goes to the spill file
  options.resync_spill_bytes = 1 << 20;
  ResyncRun run;
  auto subscriber = StartWithDownloadHeld(master, index, options);
  if (subscriber == nullptr) return run;
  // Buffered (spilled) while the download is held: a removal of a snapshot
  // key, stores, a removal of one of them.
  master.Remove("a");
  for (int i = 0; i < 20; ++i) master.Store("s" + std::to_string(i));
  master.Remove("s0");
  master.Store("c");
  AbsentKeyReader reader(index, {"a", "s0"});
  if (fail_at == 0) {
    g_count_only.store(true);
  } else {
    g_pass_before_failing.store(fail_at - 1);
    g_fail_remaining.store(1);
  }
  master.snapshot().Release();
  run.caught_up = TickUntil(master, [&] {
    const Stats stats = index.GetStats();
    return stats.resyncs >= 1 && !stats.resyncing && index.Contains({}, "c");
  });
  g_count_only.store(false);
  g_fail_remaining.store(0);
  g_pass_before_failing.store(0);
  master.Store("d");  // the stream goes on after the resync
  run.caught_up = run.caught_up && WaitFor([&] { return index.Contains({}, "d"); });
  reader.Stop();
  run.false_hits = reader.false_hits();
  run.a_absent = !index.Contains({}, "a") && !index.Contains({}, "s0");
  run.c_present = index.Contains({}, "c") && index.Contains({}, "s1") && index.Contains({}, "b");
  run.connected = index.GetStats().subscriber_connected;
  run.anchored = index.GetStats().resyncs_anchored > 0;
  return run;
}

class ResyncAllocationSweep : public SubscriberAllocationFailure {};

TEST_P(ResyncAllocationSweep, EveryAllocationOfAResyncsReplayFromItsSpillFileMayFail) {
  const bool status = GetParam() != 0;
  const ResyncRun counted = RunResyncWithSpill(0, status);
  ASSERT_TRUE(counted.caught_up);
  ASSERT_TRUE(counted.a_absent && counted.c_present);
  ASSERT_EQ(counted.anchored, status) << "the catch-up should be anchored exactly when the master has the endpoint";
  ASSERT_GT(g_spilled_replayed.load(), 0) << "the buffered stream should have been replayed from the spill file";
  const long allocations = g_counted.load();
  ASSERT_GT(allocations, 0);
  long failed_runs = 0;
  for (long k = 1; k <= allocations; ++k) {
    g_failed.store(0);
    const ResyncRun run = RunResyncWithSpill(k, status);
    failed_runs += g_failed.load() > 0 ? 1 : 0;
    SCOPED_TRACE("allocation " + std::to_string(k) + " of " + std::to_string(allocations));
    EXPECT_EQ(run.false_hits, 0) << "a removed key answered hit";
    EXPECT_TRUE(run.caught_up) << "the subscriber did not come back to the master's state";
    EXPECT_TRUE(run.a_absent);
    EXPECT_TRUE(run.c_present);
    EXPECT_TRUE(run.connected);
    if (HasFailure()) return;
  }
  std::printf("resync with spill, catch-up %s: %ld allocations on the subscriber's thread, each failed in turn (%ld "
              "runs met their failure)\n",
              status ? "anchored" : "timed", allocations, failed_runs);
  EXPECT_GT(failed_runs, 0);
}

INSTANTIATE_TEST_SUITE_P(CatchUp, ResyncAllocationSweep, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<long>& info) {
                           return info.param != 0 ? std::string("Anchored") : std::string("Timed");
                         });

// The sweep of a leader change (issue #34 §2), through the retarget the
// HA follower makes (Subscriber::Retarget, sci_subscriber_retarget): the
// subscriber follows master A, then is told to follow B, whose snapshot
// lacks A's "a-only". Counted once from the retarget to B's state being
// served, then run once per allocation of the subscriber's thread, failing
// the K-th. A retarget that fails for want of memory says so (kNoMemory;
// 1.2 left its caller waiting for ever) and is retried, as the follower
// retries a view it could not follow. Whatever fails, once a retarget has
// returned success "a-only" never answers hit, and the subscriber ends on
// B's state, connected.
struct RetargetRun {
  bool followed = false;  // a retarget succeeded, and B's state is served
  int retries = 0;        // retargets that failed for want of memory
  int false_hits = 0;
  bool b_state = false, connected = false;
  const char* stuck = "";  // the step that did not happen, if any
  Stats stats;              // at the end, or where it got stuck
};

std::string Describe(const RetargetRun& run) {
  return std::string(run.stuck) + "; " + std::to_string(run.retries) + " retargets retried; resyncing " +
         std::to_string(run.stats.resyncing) + ", resyncs " + std::to_string(run.stats.resyncs) + ", failures " +
         std::to_string(run.stats.resync_failures) + ", subscriber_failures " +
         std::to_string(run.stats.subscriber_failures) + ", connected " +
         std::to_string(run.stats.subscriber_connected) + ", messages " + std::to_string(run.stats.messages_received);
}

RetargetRun RunRetarget(long fail_at) {
  g_subscriber_thread.store(std::thread::id{});
  Master a, b;
  a.ServeStatus();
  b.ServeStatus();
  a.snapshot().Add("a-only");
  a.snapshot().Add("shared");
  b.snapshot().Add("shared");
  b.snapshot().Add("b-only");
  Index index;
  RetargetRun run;
  auto subscriber = Start(index, sci::testing::OptionsToFollow(a));
  if (subscriber == nullptr || !a.publisher().AwaitSubscription()) return run;
  if (!TickUntil(a, [&] { return index.GetStats().resyncs == 1 && index.Contains({}, "a-only"); })) return run;
  if (fail_at == 0) {
    g_count_only.store(true);
  } else {
    g_pass_before_failing.store(fail_at - 1);
    g_fail_remaining.store(1);
  }
  SubscriberError code = SubscriberError::kNoMemory;
  std::string error;
  for (int attempt = 0; attempt < 10 && code == SubscriberError::kNoMemory; ++attempt) {
    code = subscriber->Retarget(b.publisher().endpoint(), b.snapshot().url(), &error);
    if (code == SubscriberError::kNoMemory) ++run.retries;
  }
  if (code != SubscriberError::kNone) {
    ADD_FAILURE() << "retarget: " << error;
    return run;
  }
  AbsentKeyReader reader(index, {"a-only"});
  if (!b.publisher().AwaitSubscription()) {
    run.stuck = "B saw no subscription";
    run.stats = index.GetStats();
    return run;
  }
  run.followed = TickUntil(b, [&] {
    const Stats stats = index.GetStats();
    return !stats.resyncing && index.Contains({}, "b-only");
  });
  g_count_only.store(false);
  g_fail_remaining.store(0);
  g_pass_before_failing.store(0);
  b.Store("b-live");  // the stream goes on
  if (!run.followed) {
    run.stuck = "B's state was not served";
    run.stats = index.GetStats();
  }
  run.followed = run.followed && WaitFor([&] { return index.Contains({}, "b-live"); });
  reader.Stop();
  run.false_hits = reader.false_hits();
  run.b_state = !index.Contains({}, "a-only") && index.Contains({}, "shared") && index.Contains({}, "b-only");
  run.connected = index.GetStats().subscriber_connected;
  return run;
}

TEST_F(SubscriberAllocationFailure, EveryAllocationOfALeaderChangeMayFail) {
  const RetargetRun counted = RunRetarget(0);
  ASSERT_TRUE(counted.followed);
  ASSERT_TRUE(counted.b_state);
  ASSERT_EQ(counted.retries, 0);
  const long allocations = g_counted.load();
  ASSERT_GT(allocations, 0);
  long failed_runs = 0, retried_runs = 0;
  for (long k = 1; k <= allocations; ++k) {
    g_failed.store(0);
    const RetargetRun run = RunRetarget(k);
    failed_runs += g_failed.load() > 0 ? 1 : 0;
    retried_runs += run.retries > 0 ? 1 : 0;
    SCOPED_TRACE("allocation " + std::to_string(k) + " of " + std::to_string(allocations));
    EXPECT_EQ(run.false_hits, 0) << "the old leader's key answered hit";
    EXPECT_TRUE(run.followed) << "the subscriber did not come to the new leader's state: " << Describe(run);
    EXPECT_TRUE(run.b_state);
    EXPECT_TRUE(run.connected);
    if (HasFailure()) return;
  }
  std::printf("leader change: %ld allocations on the subscriber's thread, each failed in turn (%ld runs met their "
              "failure, %ld retargets retried)\n",
              allocations, failed_runs, retried_runs);
  EXPECT_GT(failed_runs, 0);
}

}  // namespace
}  // namespace sci
