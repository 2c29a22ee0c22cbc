// The page store kept beside the index's key tables in the builds that
// check invariants (I46, docs/architecture.md): failures the index survives
// must not trip the check. Each test is a reproducer from the outside
// review of the mechanism; each aborted the process before its fix. In a
// release build the index keeps no shadow and the tests only show that the
// index stays right.
#include <gtest/gtest.h>

#include <cstdint>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "index/index.h"
#include "replaced_operator_new.h"

namespace {
thread_local long g_fail_at = -1;  // the allocation (counting from 0) that fails; -1: none
thread_local long g_seen = 0;
}  // namespace

void* sci_test::AllocateForTest(std::size_t size, std::size_t alignment) {
  if (g_fail_at >= 0 && g_seen++ == g_fail_at) return nullptr;
  return HeapAllocate(size, alignment);
}

namespace sci {
namespace {

// Fails allocation `n` (from 0) of `run`, then none: whether `run` threw.
template <typename Run>
bool FailingAllocation(long n, Run&& run) {
  g_seen = 0;
  g_fail_at = n;
  bool threw = false;
  try {
    run();
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  g_fail_at = -1;
  return threw;
}

Event Stored(std::string_view key, std::string_view medium) {
  Event e;
  e.kind = EventKind::kStored;
  e.object_key = key;
  e.medium = medium;
  e.generation = PublisherGeneration::kSecond;
  return e;
}

Event Removed(std::string_view key, std::string_view medium) {
  Event e = Stored(key, medium);
  e.kind = EventKind::kRemoved;
  return e;
}

// Under the per-medium rule, a key on cpu and disk loses cpu: the page
// store must record its page's slots' media apart (a row), and when it
// cannot, it drops the slot (a miss it chooses) where the key table keeps
// the key. The shadow is then no mirror, and must stop being checked.
TEST(ShadowStore, AMediumRemovalThePageStoreCannotRecordStopsTheCheck) {
  const std::string hex(64, 'a');
  const std::string k0 = hex + "_0_k", k1 = hex + "_1_k";
  for (long n = 0; n < 8; ++n) {
    SCOPED_TRACE(n);
    IndexOptions options;
    options.residency = Residency::kPerMedium;
    Index index(options);
    const std::vector<Event> stores = {Stored(k0, "cpu"), Stored(k0, "disk"), Stored(k1, "cpu"), Stored(k1, "disk")};
    index.ApplyBatch(1, stores);
    const std::vector<Event> removal = {Removed(k0, "cpu")};  // k0 stays on disk: the page's media differ
    const bool threw = FailingAllocation(n, [&] { index.ApplyBatch(2, removal); });
    EXPECT_EQ(index.Contains({}, k0), !threw);  // kept on disk, unless the batch was lost (cleared)
    EXPECT_EQ(index.Contains({}, k1), !threw);
  }
}

// A failed allocation after the key table took a key (its group, its
// tail's number): the shadow holds it already, so a reader that looks
// before the index is cleared or concealed sees both agree.
TEST(ShadowStore, AFailureAfterTheKeyTableTookAKeyLeavesBothAgreeing) {
  const std::string key = std::string(64, 'b') + "@tp_rank:0@a_tail_longer_than_sso";
  for (long n = 0; n < 12; ++n) {
    SCOPED_TRACE(n);
    Index index{IndexOptions{}};
    const std::vector<std::string_view> keys = {key};
    const bool threw = FailingAllocation(n, [&] { index.LoadKeys(keys); });
    if (!threw) EXPECT_TRUE(index.Contains({}, key));
    (void)index.Contains({}, key);  // a query thread's read before anyone clears: must not abort
    const std::vector<Event> batch = {Stored(key, "cpu")};
    const bool batch_threw = FailingAllocation(n, [&] { index.ApplyBatch(1, batch); });
    (void)index.Contains({}, key);
    if (!batch_threw) EXPECT_TRUE(index.Contains({}, key));
  }
}

}  // namespace
}  // namespace sci
