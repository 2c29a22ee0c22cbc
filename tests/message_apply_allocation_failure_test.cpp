// A received message that cannot be applied for want of memory clears the
// index (issue #34, R4; architecture.md, "Invariants"): whatever it removed
// is lost with it, and the cursor, which has not moved, would not show the
// loss to the next message (on a quiet master there may be none). So no
// failure -- in the C thunk, decoding, the unknown-type bookkeeping, or the
// batch -- may leave a removed key answering hit.
//
// This binary replaces the global operator new (replaced_operator_new.h):
//   - sci_index_apply_message is run with its N-th allocation failed, for
//     every N until it completes, on the publisher's bytes; after each
//     failure the status is SCI_ERR_NO_MEMORY and the index is empty, and
//     the next messages are applied as after any clear;
//   - a subscriber on a real ZeroMQ socket is sent a message whose unknown
//     key-less type cannot be copied (that allocation alone fails, on the
//     subscriber's thread): the message's removal is lost, so the index
//     must be cleared, and the subscriber goes on applying.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "encode/mooncake_event.h"
#include "feed/subscriber.h"
#include "index/index.h"
#include "loopback_publisher.h"
#include "shared_cache_index.h"
#include "wait_for.h"

#include "replaced_operator_new.h"

namespace {
// The sweep: fail the g_fail_at-th allocation made while armed.
long g_fail_at = 0;
long g_allocations = 0;
bool g_armed = false;  // read on the test's thread only
bool g_failed = false;

// The subscriber: fail every allocation of this many bytes made off the
// test's thread while armed (0: none).
std::atomic<std::size_t> g_fail_size_off_main{0};
std::atomic<long> g_failed_off_main{0};
std::thread::id g_main_thread;
}  // namespace

void* sci_test::AllocateForTest(std::size_t size, std::size_t alignment) {
  if (std::this_thread::get_id() == g_main_thread) {
    if (g_armed && ++g_allocations == g_fail_at) {
      g_failed = true;
      return nullptr;
    }
  } else if (size == g_fail_size_off_main.load(std::memory_order_relaxed) && size != 0) {
    g_failed_off_main.fetch_add(1);
    return nullptr;
  }
  return HeapAllocate(size, alignment);
}

namespace sci {
namespace {

using sci::testing::LoopbackPublisher;
using sci::testing::RemovedEvent;
using sci::testing::StoredEvent;
using sci::testing::WaitFor;

sci_str S(const std::string& s) { return sci_str{s.data(), s.size()}; }

struct CIndex {
  CIndex() { EXPECT_EQ(sci_index_new(nullptr, &index), SCI_OK); }
  ~CIndex() { sci_index_free(index); }
  sci_index* index = nullptr;
};

bool Contains(sci_index* index, const std::string& tenant, const std::string& key) {
  bool present = false;
  EXPECT_EQ(sci_index_contains(index, S(tenant), S(key), &present), SCI_OK);
  return present;
}

sci_stats Stats(sci_index* index) {
  sci_stats stats{};
  stats.struct_size = sizeof stats;
  EXPECT_EQ(sci_index_stats(index, &stats), SCI_OK);
  return stats;
}

// An unknown key-less event of `type` in `tenant`: it clears the tenant.
MooncakeEvent UnknownKeyless(uint64_t event_id, std::string_view type, std::string_view tenant) {
  MooncakeEvent event;
  event.event_id = event_id;
  event.unknown_type = type;
  event.tenant_id = tenant;
  return event;
}

sci_status ApplyBatch(sci_index* index, uint64_t sequence, const std::vector<MooncakeEvent>& events) {
  const std::vector<std::string> frames = LoopbackPublisher::EncodeBatch(sequence, events);
  std::vector<sci_bytes> bytes;
  for (const std::string& frame : frames) {
    bytes.push_back(sci_bytes{reinterpret_cast<const uint8_t*>(frame.data()), frame.size()});
  }
  g_armed = true;
  const sci_status status = sci_index_apply_message(index, bytes.data(), bytes.size());
  g_armed = false;
  return status;
}

class MessageApplyAllocationFailure : public ::testing::Test {
 protected:
  void SetUp() override { g_main_thread = std::this_thread::get_id(); }
  void TearDown() override {
    g_fail_at = 0;
    g_fail_size_off_main.store(0);
  }
};

TEST_F(MessageApplyAllocationFailure, EveryFailureInApplyMessageClearsTheIndex) {
  long sites = 0;
  for (long n = 1;; ++n) {
    SCOPED_TRACE("allocation " + std::to_string(n) + " failed");
    CIndex h;
    g_fail_at = 0;
    ASSERT_EQ(ApplyBatch(h.index, 1, {StoredEvent(1, "a"), StoredEvent(2, "b"), StoredEvent(3, "t", {}, "other")}),
              SCI_OK);
    ASSERT_TRUE(Contains(h.index, "", "a"));

    // A type never seen before (the process remembers 64 of them), longer
    // than a short string: its first sight copies it.
    const std::string type = "a-type-no-publisher-has-sent-yet-" + std::to_string(n) + std::string(24, 'x');
    g_fail_at = n;
    g_allocations = 0;
    g_failed = false;
    const sci_status status =
        ApplyBatch(h.index, 2, {RemovedEvent(4, "a"), UnknownKeyless(5, type, "other"), StoredEvent(6, "c")});
    const bool failed = g_failed;
    g_fail_at = 0;

    // Whatever failed, the removals are never lost silently.
    EXPECT_FALSE(Contains(h.index, "", "a"));
    EXPECT_FALSE(Contains(h.index, "other", "t"));
    const sci_stats stats = Stats(h.index);
    if (failed) {
      ++sites;
      EXPECT_EQ(status, SCI_ERR_NO_MEMORY) << sci_last_error();
      EXPECT_EQ(stats.keys, 0u);  // cleared, cursor with it
      EXPECT_FALSE(stats.has_sequence);
      EXPECT_FALSE(Contains(h.index, "", "b"));
    } else {
      EXPECT_EQ(status, SCI_OK) << sci_last_error();
      EXPECT_TRUE(Contains(h.index, "", "b"));
      EXPECT_TRUE(Contains(h.index, "", "c"));
      EXPECT_EQ(stats.last_sequence, 2u);
    }
    // The next messages are applied as after any clear: the run's first
    // batch withholds its stores (its number is not 1), the one after it
    // is applied whole.
    ASSERT_EQ(ApplyBatch(h.index, 3, {StoredEvent(7, "d")}), SCI_OK) << sci_last_error();
    ASSERT_EQ(ApplyBatch(h.index, 4, {StoredEvent(8, "e")}), SCI_OK) << sci_last_error();
    EXPECT_EQ(Contains(h.index, "", "d"), !failed);
    EXPECT_TRUE(Contains(h.index, "", "e"));
    if (!failed) break;
    if (HasFailure()) break;
  }
  // The thunk's frame views, the decoder's events, the type's copy, the
  // tables' growth: at least these four.
  EXPECT_GE(sites, 4);
  std::printf("sci_index_apply_message: %ld allocation sites, each failed once\n", sites);
}

TEST_F(MessageApplyAllocationFailure, TheSubscriberClearsTheIndexWhenTheTypeCannotBeCopied) {
  Index index;
  LoopbackPublisher publisher(sci::testing::kAnyLoopbackTcpPort);
  SubscriberOptions options;
  options.endpoint = publisher.endpoint();
  SubscriberError code = SubscriberError::kNone;
  std::string error;
  std::unique_ptr<Subscriber> subscriber = Subscriber::Start(index, options, &code, &error);
  ASSERT_NE(subscriber, nullptr) << error;
  ASSERT_TRUE(publisher.AwaitSubscription());

  const MooncakeEvent one[] = {StoredEvent(1, "a"), StoredEvent(2, "b")};
  publisher.SendBatch(1, one);
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().messages_received == 1; }));
  ASSERT_TRUE(index.Contains("", "a"));

  // 300 bytes and its terminator: an allocation size nothing else on the
  // subscriber's thread makes while this message is applied.
  const std::string type = "unknown-to-this-subscriber-" + std::string(273, 'y');
  ASSERT_EQ(type.size(), 300u);
  g_fail_size_off_main.store(type.size() + 1);
  const MooncakeEvent two[] = {RemovedEvent(3, "a"), UnknownKeyless(4, type, "other")};
  publisher.SendBatch(2, two);
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().messages_received == 2; }));
  g_fail_size_off_main.store(0);
  ASSERT_GE(g_failed_off_main.load(), 1);

  // The removal of "a" was lost with the message: nothing may answer hit.
  EXPECT_FALSE(index.Contains("", "a"));
  EXPECT_FALSE(index.Contains("", "b"));
  EXPECT_FALSE(index.GetStats().has_sequence);

  // And the subscriber goes on: a run begins (stores withheld), then applies.
  const MooncakeEvent three[] = {StoredEvent(5, "c")};
  const MooncakeEvent four[] = {StoredEvent(6, "d")};
  publisher.SendBatch(3, three);
  publisher.SendBatch(4, four);
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().last_sequence == 4; }));
  EXPECT_FALSE(index.Contains("", "c"));
  EXPECT_TRUE(index.Contains("", "d"));
}

}  // namespace
}  // namespace sci
