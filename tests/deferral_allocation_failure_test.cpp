// An allocation failure in the replay of a catch-up released before its
// anchor (its stores deferred) ends the deferral with the resync it fails.
// Found by the outside review of 1.3.0: the failure escaped Replay() before
// Resync recorded the deferral, and nothing ever ended it -- every later
// store withheld for good (a subscriber that applies no store again).
//
// This binary replaces the global operator new and fails, on the
// subscriber's thread only, the first allocation of at least 512 KiB (the
// decoder's scratch for a 10000-event batch, decoded first in the replay)
// and the one after it (the replay's `why` string in its bad_alloc handler).
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <execinfo.h>

#include <atomic>
#include <cstring>
#include <string>
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
std::atomic<bool> g_armed{false};
std::atomic<int> g_fail_next{0};
std::atomic<int> g_failed{0};
}  // namespace

static bool CalledFromLibzmq() {
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
  if (!in_nothrow_new && std::this_thread::get_id() == g_subscriber_thread.load() && !CalledFromLibzmq()) {
    if (g_fail_next.load() > 0) {
      g_fail_next.fetch_sub(1);
      g_failed.fetch_add(1);
      return nullptr;
    }
    if (size >= (512u << 10) && g_armed.exchange(false)) {
      g_fail_next.store(1);
      g_failed.fetch_add(1);
      return nullptr;
    }
  }
  return HeapAllocate(size, alignment);
}

namespace sci {
namespace {

using namespace std::chrono_literals;
using sci::testing::Master;
using sci::testing::StoredEvent;
using sci::testing::WaitFor;

void FindSubscriberThread(void*, int32_t, const char* msg, size_t len) {
  const std::string_view line(msg, len);
  if (line.find(": connected to ") != std::string_view::npos) g_subscriber_thread.store(std::this_thread::get_id());
}

TEST(DeferralAllocationFailure, AFailedReplayWhileDeferringEndsTheDeferral) {
  void* warm[1];
  (void)::backtrace(warm, 1);
  SetLogCallback(&FindSubscriberThread, nullptr);
  Master master;
  master.ServeStatus();  // published + dropped == the last sequence: the quiet rule -> deferring release
  Index index;
  SubscriberOptions options;
  options.endpoint = master.publisher().endpoint();
  options.snapshot_url = master.snapshot().url();
  options.resync_min_interval_ms = 20;
  options.resync_catch_up_ms = 20;
  SubscriberError code = SubscriberError::kNone;
  std::string error;
  auto subscriber = Subscriber::Start(index, options, &code, &error);
  ASSERT_NE(subscriber, nullptr) << error;
  ASSERT_TRUE(master.publisher().AwaitSubscription());
  ASSERT_TRUE(WaitFor([] { return g_subscriber_thread.load() != std::thread::id{}; }));

  // One big batch proves the subscription; it is decoded first in the replay.
  std::vector<std::string> keys;
  for (int i = 0; i < 10000; ++i) keys.push_back("big-" + std::to_string(i));
  std::vector<MooncakeEvent> big;
  for (const std::string& key : keys) {
    master.snapshot().Add(key);
    big.push_back(StoredEvent(master.NextEventId(), key));
  }
  g_armed.store(true);
  master.Send(big);
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().subscriber_failures >= 1; }, 20s));
  EXPECT_EQ(g_failed.load(), 2);

  // Memory is back. The master's status endpoint goes away (or the next
  // catch-up anchors): the next resync ends without deferring.
  master.snapshot().SetStatus(nullptr);
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resyncs >= 1; }, 20s));
  const Stats after = index.GetStats();
  EXPECT_EQ(after.resyncs_timed, 1u);

  // Later stores, one a batch: they must show.
  for (int i = 0; i < 5; ++i) master.Store("later-" + std::to_string(i));
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().last_sequence == 6; }, 10s));
  const bool shown = WaitFor([&] { return index.Contains({}, "later-4"); }, 7s);
  EXPECT_TRUE(shown) << "stores_withheld=" << index.GetStats().stores_withheld
                     << " resyncs=" << index.GetStats().resyncs
                     << " resyncs_withholding=" << index.GetStats().resyncs_withholding;
  SetLogCallback(nullptr, nullptr);
}

}  // namespace
}  // namespace sci
