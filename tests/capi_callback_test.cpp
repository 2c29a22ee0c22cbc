// What a log callback may do, through the public header only: stop the
// subscriber whose thread is calling it (and free that subscriber's index),
// and install another callback. Neither aborts nor hangs. Also: one
// subscriber per index.
//
// A line on the subscriber's own thread without any publisher: the index
// holds a batch, the subscriber points at a port nobody listens on, and after
// stale_after_ms it clears the index and logs it, from its thread.
#include <dirent.h>
#include <gtest/gtest.h>

#include <cstddef>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "capi_test_support.h"
#include "shared_cache_index.h"

namespace {

using namespace std::chrono_literals;
using sci_test::IndexHandle;
using sci_test::Stats;

bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return done();
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Threads of this process: a subscriber adds its own and ZeroMQ's, and they
// are all gone once it has really stopped and been freed.
int ThreadCount() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  int n = 0;
  while (dirent* entry = readdir(dir)) n += entry->d_name[0] != '.';
  closedir(dir);
  return n;
}

// The count before a test starts a subscriber, once the process has made
// and ended a thread of its own (ThreadSanitizer starts a helper thread of
// its own at the first one) and no thread is on its way out: a joined
// thread can stay listed in /proc/self/task for a moment after the join
// returns (the kernel reaps it just after waking the joiner). Bounded.
int BaselineThreadCount() {
  std::thread([] {}).join();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int last = ThreadCount();
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const int now = ThreadCount();
    if (now == last || std::chrono::steady_clock::now() > deadline) return now;
    last = now;
  }
}

constexpr char kNobodyListens[] = "tcp://127.0.0.1:9";

sci_subscriber_options StaleQuickly() {
  sci_subscriber_options options{};
  options.struct_size = sizeof options;
  options.endpoint = {kNobodyListens, sizeof kNobodyListens - 1};
  options.stale_after_ms = 20;
  return options;
}

void StoreOneKey(sci_index* index) {
  sci_event event{};
  event.kind = SCI_EVENT_STORED;
  event.object_key = {"k", 1};
  ASSERT_EQ(sci_index_apply_events(index, 1, &event, 1), SCI_OK) << sci_last_error();
}

// Runs `body` on another thread and fails (and ends the process, which could
// not finish) if it does not return within a bound: a deadlock is a failure,
// not a hung suite.
void WithinBound(const std::function<void()>& body) {
  std::packaged_task<void()> task(body);
  std::future<void> done = task.get_future();
  std::thread(std::move(task)).detach();
  if (done.wait_for(20s) != std::future_status::ready) {
    ADD_FAILURE() << "deadlock: the body did not return within 20 s";
    std::abort();
  }
  done.get();
}

// ---- sci_subscriber_stop from the subscriber's own thread ----

struct StopFromCallback {
  std::mutex mu;
  sci_subscriber* sub = nullptr;  // guarded by mu; taken by the callback
  sci_index* index_to_free = nullptr;  // guarded by mu; freed after the stop, if set
  std::thread::id stopped_on;  // guarded by mu
  std::atomic<bool> stopped{false};

  static void Fn(void* user, int32_t, const char* msg, size_t len) {
    auto* self = static_cast<StopFromCallback*>(user);
    if (std::string_view(msg, len).find("index cleared") == std::string_view::npos) return;
    std::lock_guard<std::mutex> lock(self->mu);
    if (self->sub == nullptr) return;
    sci_subscriber_stop(std::exchange(self->sub, nullptr));
    sci_index_free(std::exchange(self->index_to_free, nullptr));
    self->stopped_on = std::this_thread::get_id();
    self->stopped.store(true);
  }
};

class CapiCallback : public ::testing::Test {
 protected:
  void TearDown() override { sci_set_log_callback(nullptr, nullptr); }
};

TEST_F(CapiCallback, StopFromTheSubscribersOwnCallbackStopsAndFreesIt) {
  const int baseline = BaselineThreadCount();
  IndexHandle h;
  StoreOneKey(h.index);
  StopFromCallback context;
  sci_set_log_callback(&StopFromCallback::Fn, &context);
  const sci_subscriber_options options = StaleQuickly();
  {
    std::lock_guard<std::mutex> lock(context.mu);  // the callback waits until `sub` is set
    ASSERT_EQ(sci_subscriber_start(h.index, &options, &context.sub), SCI_OK) << sci_last_error();
  }
  WithinBound([&] { ASSERT_TRUE(WaitFor([&] { return context.stopped.load(); })); });
  {
    std::lock_guard<std::mutex> lock(context.mu);
    EXPECT_NE(context.stopped_on, std::this_thread::get_id()) << "the stop ran on the subscriber's thread";
  }
  // Its thread and ZeroMQ's have exited: it freed itself.
  EXPECT_TRUE(WaitFor([&] { return ThreadCount() == baseline; })) << ThreadCount() << " threads, " << baseline
                                                                   << " before";
  const sci_stats stats = Stats(h.index);
  EXPECT_FALSE(stats.subscriber_connected);
  EXPECT_EQ(stats.keys, 0u);  // the stale clear that logged the line
  // The index takes a new subscriber: the stopped one let go of it.
  sci_subscriber* again = nullptr;
  ASSERT_EQ(sci_subscriber_start(h.index, &options, &again), SCI_OK) << sci_last_error();
  sci_subscriber_stop(again);
}

TEST_F(CapiCallback, TheIndexMayBeFreedByTheCallbackThatStoppedItsSubscriber) {
  const int baseline = BaselineThreadCount();
  sci_index* index = nullptr;
  ASSERT_EQ(sci_index_new(nullptr, &index), SCI_OK);
  StoreOneKey(index);
  StopFromCallback context;
  sci_set_log_callback(&StopFromCallback::Fn, &context);
  const sci_subscriber_options options = StaleQuickly();
  {
    std::lock_guard<std::mutex> lock(context.mu);
    ASSERT_EQ(sci_subscriber_start(index, &options, &context.sub), SCI_OK) << sci_last_error();
    context.index_to_free = index;
  }
  WithinBound([&] { ASSERT_TRUE(WaitFor([&] { return context.stopped.load(); })); });
  // The thread finished its step on memory the library kept alive, then
  // freed it (the sanitizer builds check the "freed" and "alive").
  EXPECT_TRUE(WaitFor([&] { return ThreadCount() == baseline; })) << ThreadCount() << " threads, " << baseline
                                                                   << " before";
}

// ---- sci_set_log_callback from inside a callback ----

struct Switching {
  sci_index* index = nullptr;
  int first_lines = 0;   // written on the test's worker thread only
  int second_lines = 0;

  static void First(void* user, int32_t, const char*, size_t) {
    auto* self = static_cast<Switching*>(user);
    if (++self->first_lines > 1) return;
    sci_set_log_callback(&Switching::Second, self);
    // Still this callback's turn: a line logged meanwhile comes here again.
    LogAMalformedMessage(self->index);
  }
  static void Second(void* user, int32_t, const char*, size_t) { ++static_cast<Switching*>(user)->second_lines; }

  static void LogAMalformedMessage(sci_index* index) {
    const uint8_t sequence[8] = {0, 0, 0, 0, 0, 0, 0, 1};
    const uint8_t not_msgpack[1] = {0xc1};
    const sci_bytes frames[3] = {{nullptr, 0}, {sequence, 8}, {not_msgpack, 1}};
    EXPECT_EQ(sci_index_apply_message(index, frames, 3), SCI_ERR_DECODE);
  }
};

TEST_F(CapiCallback, ACallbackSetFromACallbackTakesEffectAfterItReturns) {
  IndexHandle h;
  Switching switching;
  switching.index = h.index;
  sci_set_log_callback(&Switching::First, &switching);
  WithinBound([&] { Switching::LogAMalformedMessage(h.index); });
  EXPECT_EQ(switching.first_lines, 2);  // its own line, and the one logged from inside it
  EXPECT_EQ(switching.second_lines, 0);
  WithinBound([&] { Switching::LogAMalformedMessage(h.index); });
  EXPECT_EQ(switching.first_lines, 2);
  EXPECT_EQ(switching.second_lines, 1);
}

TEST_F(CapiCallback, SilencingFromACallbackTakesEffectAfterItReturns) {
  IndexHandle h;
  static int lines = 0;
  lines = 0;
  sci_set_log_callback(
      [](void*, int32_t, const char*, size_t) {
        ++lines;
        sci_set_log_callback(nullptr, nullptr);
      },
      nullptr);
  WithinBound([&] { Switching::LogAMalformedMessage(h.index); });
  WithinBound([&] { Switching::LogAMalformedMessage(h.index); });
  EXPECT_EQ(lines, 1);
}

// ---- one subscriber per index ----

TEST_F(CapiCallback, ASecondSubscriberOnTheSameIndexIsRefused) {
  IndexHandle h, other;
  const sci_subscriber_options options = StaleQuickly();
  sci_subscriber* first = nullptr;
  ASSERT_EQ(sci_subscriber_start(h.index, &options, &first), SCI_OK) << sci_last_error();

  sci_subscriber* second = reinterpret_cast<sci_subscriber*>(0x1);
  EXPECT_EQ(sci_subscriber_start(h.index, &options, &second), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(second, nullptr);
  EXPECT_NE(std::string(sci_last_error()).find("already has a subscriber"), std::string::npos) << sci_last_error();

  // Another index is another matter.
  sci_subscriber* elsewhere = nullptr;
  ASSERT_EQ(sci_subscriber_start(other.index, &options, &elsewhere), SCI_OK) << sci_last_error();
  sci_subscriber_stop(elsewhere);

  // After a stop, the index takes one again.
  sci_subscriber_stop(first);
  ASSERT_EQ(sci_subscriber_start(h.index, &options, &second), SCI_OK) << sci_last_error();
  sci_subscriber_stop(second);
}

TEST_F(CapiCallback, AFailedStartLeavesTheIndexFreeForAnother) {
  IndexHandle h;
  sci_subscriber_options options = StaleQuickly();
  options.endpoint = {"bogus://x", 9};
  sci_subscriber* sub = nullptr;
  EXPECT_EQ(sci_subscriber_start(h.index, &options, &sub), SCI_ERR_INVALID_ARGUMENT);
  const sci_subscriber_options good = StaleQuickly();
  ASSERT_EQ(sci_subscriber_start(h.index, &good, &sub), SCI_OK) << sci_last_error();
  sci_subscriber_stop(sub);
}

// 1.3.0's options: a reconnect policy that is neither is refused by name;
// zero keeps the defaults; a caller built before them (a smaller
// struct_size) gets the defaults.
TEST_F(CapiCallback, TheReconnectPolicyAndTheCatchUpLimitAreChecked) {
  IndexHandle h;
  sci_subscriber_options options = StaleQuickly();
  options.reconnect_policy = 2;
  sci_subscriber* sub = nullptr;
  EXPECT_EQ(sci_subscriber_start(h.index, &options, &sub), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sci_last_error()).find("opts->reconnect_policy 2"), std::string::npos) << sci_last_error();
  for (const uint32_t policy : {uint32_t{SCI_RECONNECT_RESYNC}, uint32_t{SCI_RECONNECT_EVENT_IDS}}) {
    options.reconnect_policy = policy;
    options.resync_catch_up_max_ms = policy == SCI_RECONNECT_RESYNC ? 0 : 5000;
    ASSERT_EQ(sci_subscriber_start(h.index, &options, &sub), SCI_OK) << sci_last_error();
    sci_subscriber_stop(sub);
  }
  options.resync_catch_up_max_ms = 0x80000000u;
  EXPECT_EQ(sci_subscriber_start(h.index, &options, &sub), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sci_last_error()).find("resync_catch_up_max_ms"), std::string::npos) << sci_last_error();
  sci_subscriber_options older = StaleQuickly();
  older.reconnect_policy = 99;  // not covered by its struct_size: never read
  older.struct_size = offsetof(sci_subscriber_options, reconnect_policy);
  ASSERT_EQ(sci_subscriber_start(h.index, &older, &sub), SCI_OK) << sci_last_error();
  sci_subscriber_stop(sub);
}

}  // namespace
