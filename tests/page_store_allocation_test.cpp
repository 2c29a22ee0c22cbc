// Every allocation a store into the object store makes (index/object_store.h:
// a slot's number, a page table's growth, a per-object table's growth, a
// page's per-slot media row) fails in turn: the store throws bad_alloc and
// changes nothing, or completes. A removal never throws: when the smaller
// media set it must record cannot be (no memory for a page's row), the key
// goes (a miss, never a false hit).
#include <gtest/gtest.h>

#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "index/object_store.h"
#include "index/split_table.h"
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

std::string Hex(uint64_t a) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 64; ++i) out.push_back(digits[((a * 0x9E3779B97F4A7C15ull) >> (4 * (i % 16))) & 15]);
  return out;
}

struct Snapshot {
  std::vector<std::pair<bool, MediaSet>> answers;
  uint64_t objects = 0;
  bool operator==(const Snapshot&) const = default;
};

Snapshot Take(const ObjectStore& store, const std::vector<std::string>& universe) {
  Snapshot s;
  for (const std::string& key : universe) {
    s.answers.emplace_back(store.Contains(TenantSeed(""), key), store.Media(TenantSeed(""), key));
  }
  s.objects = store.objects();
  return s;
}

struct Store {
  std::string key;
  MediaSet medium;
};

// Runs `stores` in order on a fresh store made by `fill`, failing
// allocation k (counted over the stores only) for k = 0, 1, ... until one
// run makes no allocation fail. The store whose allocation failed must
// throw and leave the store as it was just before it.
template <typename Fill>
void SweepFailures(Fill fill, const std::vector<Store>& stores, const std::vector<std::string>& universe,
                   const char* what) {
  for (long k = 0;; ++k) {
    ObjectStore store;
    fill(store);
    g_seen = 0;
    bool threw = false;
    for (const Store& next : stores) {
      const Snapshot before = Take(store, universe);  // (allocations not counted: failures off)
      g_fail_at = k;
      try {
        store.Store(TenantSeed(""), next.key, next.medium);
      } catch (const std::bad_alloc&) {
        threw = true;
      }
      g_fail_at = -1;
      if (threw) {
        const Snapshot after = Take(store, universe);
        EXPECT_EQ(after.objects, before.objects) << what << ": allocation " << k;
        for (size_t i = 0; i < universe.size(); ++i) {
          EXPECT_EQ(after.answers[i], before.answers[i])
              << what << ": allocation " << k << " failed and changed " << universe[i];
        }
        break;
      }
    }
    if (!threw) {
      EXPECT_LE(g_seen, k) << what << ": an allocation failed and the store did not throw";
      EXPECT_GT(k, 0) << what << ": made no allocation (the sweep proves nothing)";
      return;
    }
  }
}

TEST(PageStoreAllocationFailure, EveryFailedAllocationOfAStoreChangesNothing) {
  std::vector<std::string> universe;
  for (uint64_t p = 0; p < 40; ++p) {
    universe.push_back(Hex(p) + "_0_k");
    universe.push_back(Hex(p) + "_1_k");
    universe.push_back("object-" + std::to_string(p));
  }
  universe.push_back(Hex(99) + "_new_slot");
  const auto fill = [&](ObjectStore& store) {
    for (uint64_t p = 0; p < 40; ++p) {
      store.Store(TenantSeed(""), Hex(p) + "_0_k", 1);
      store.Store(TenantSeed(""), "object-" + std::to_string(p), 1);
    }
  };
  std::vector<Store> grow_pages, grow_whole;
  for (uint64_t p = 100; p < 200; ++p) grow_pages.push_back({Hex(p) + "_0_k", 1});
  for (int i = 100; i < 300; ++i) grow_whole.push_back({"object-" + std::to_string(i), 1});
  SweepFailures(fill, {{Hex(99) + "_new_slot", 1}}, universe, "a new slot of a new page");
  SweepFailures(fill, grow_pages, universe, "pages until the table grows");
  SweepFailures(fill, {{Hex(3) + "_1_k", 2}}, universe, "a page's slots on two media");
  SweepFailures(fill, grow_whole, universe, "whole keys until their table grows");
}

// A removal that leaves a slot on fewer media of a page whose slots then
// differ needs a row; without memory the slot goes instead.
TEST(PageStoreAllocationFailure, ARemovalThatCannotRecordTheMediaLeftDropsTheKey) {
  ObjectStore store;
  const uint64_t seed = TenantSeed("");
  store.Store(seed, Hex(5) + "_0_k", 1);
  store.Store(seed, Hex(5) + "_1_k", 1);
  store.Store(seed, Hex(5) + "_0_k", 2);  // on media 1 and 2: the page's slots differ (a row)
  store.Store(seed, Hex(6) + "_0_k", 3);
  store.Store(seed, Hex(6) + "_1_k", 3);
  const std::string six = Hex(6) + "_0_k";  // (made before allocations fail)
  g_seen = 0;
  g_fail_at = 0;
  const bool went = store.Remove(seed, six, 1);  // left on medium 2: the row cannot be made
  g_fail_at = -1;
  EXPECT_EQ(g_seen, 1);  // the row's allocation, which failed
  EXPECT_TRUE(went);
  EXPECT_FALSE(store.Contains(seed, Hex(6) + "_0_k"));
  EXPECT_TRUE(store.Contains(seed, Hex(6) + "_1_k"));
  EXPECT_EQ(store.Media(seed, Hex(6) + "_1_k"), 3);
  // With memory, the same removal keeps the key on its other medium.
  EXPECT_FALSE(store.Remove(seed, Hex(5) + "_0_k", 1));
  EXPECT_EQ(store.Media(seed, Hex(5) + "_0_k"), 2);
}

struct NoLock {
  void Lock() {}
  void Unlock() {}
};

// A store into a worn table (1,180 of 1,200 whole keys erased) renews it
// first (ObjectStore::MakeRoom, I57). Each allocation of that store fails
// in turn: the renewal's own is skipped (the worn table answers exactly;
// nothing throws and the store goes on), any other throws and changes
// nothing, as any store's.
TEST(PageStoreAllocationFailure, ARenewalThatCannotAllocateIsSkippedAndTheStoreGoesOn) {
  const uint64_t seed = TenantSeed("");
  constexpr int kFill = 1200, kKept = 20;
  const auto key = [](int n) { return "whole-" + std::to_string(n); };
  bool skipped_once = false;
  for (long k = 0;; ++k) {
    ObjectStore store;
    NoLock lock;
    for (int n = 0; n < kFill; ++n) store.Store(seed, key(n), 0);
    for (int n = kKept; n < kFill; ++n) store.Remove(seed, key(n), 0);
    ASSERT_TRUE(store.whole_table().worn());
    const ObjectStore::Place place = store.Locate(seed, key(kFill));
    g_seen = 0;
    g_fail_at = k;
    bool threw = false;
    try {
      store.MakeRoom(place, lock);
      store.Store(seed, key(kFill), place, 0);
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    g_fail_at = -1;
    const bool failed = g_seen > k;
    EXPECT_EQ(store.Inconsistency(), "") << k;
    for (int n = 0; n < kKept; ++n) EXPECT_TRUE(store.Contains(seed, key(n))) << k;
    EXPECT_EQ(store.Contains(seed, key(kFill)), !threw) << k;
    EXPECT_EQ(store.objects(), static_cast<uint64_t>(kKept + (threw ? 0 : 1))) << k;
    if (store.renewals_skipped() == 1) {
      EXPECT_FALSE(threw) << k;
      EXPECT_TRUE(store.whole_table().worn()) << k;  // tried again at the next store
      skipped_once = true;
    } else {
      EXPECT_EQ(store.renewals(), threw ? 0u : 1u) << k;
    }
    if (!failed) break;
  }
  EXPECT_TRUE(skipped_once) << "no failure reached the renewal's allocation";
}

}  // namespace
// The split of a full table into 64 parts (split_table.h, I58) with each
// of its allocations failing in turn: it throws bad_alloc before any change
// (the table still one, every key found), as a growth would; once nothing
// fails, it splits.
TEST(PageStoreAllocationFailure, ASplitThatCannotAllocateChangesNothing) {
  using Table = SplitTable<PageEntry, 2>;
  Table table(4 << 10);  // parts of a few buckets: from operator new, which fails here
  NoLock lock;
  TableRenewals renewals;
  std::vector<PackedFingerprint> keys;
  uint64_t n = 0;
  const auto next_key = [&] { return PackedFingerprint(Fingerprint{++n * 0x9E3779B97F4A7C15ull, n * 0xD6E8FEB86659FD93ull}); };
  for (;;) {
    const PackedFingerprint key = next_key();
    const Table::Part& one = table.part(0);
    if (one.full() && one.GrownBytes() >= (4 << 10)) break;  // the next MakeRoom splits
    table.MakeRoom(&key, lock, &renewals);
    table.insert_absent(key, PageEntry{1, 0, 0});
    keys.push_back(key);
  }
  const PackedFingerprint key = next_key();
  long failures = 0;
  for (long k = 0;; ++k) {
    g_seen = 0;
    g_fail_at = k;
    bool threw = false;
    try {
      table.MakeRoom(&key, lock, &renewals);
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    g_fail_at = -1;
    if (!threw) {
      EXPECT_LE(g_seen, k) << "an allocation failed and the split did not throw";
      break;
    }
    ++failures;
    ASSERT_FALSE(table.split()) << k;
    ASSERT_EQ(table.Inconsistency(), "") << k;
    for (const PackedFingerprint& kept : keys) ASSERT_NE(table.find(kept), nullptr) << k;
  }
  EXPECT_GE(failures, 64);  // one array a part
  EXPECT_TRUE(table.split());
  table.insert_absent(key, PageEntry{1, 0, 0});
  for (const PackedFingerprint& kept : keys) ASSERT_NE(table.find(kept), nullptr);
  EXPECT_EQ(table.Inconsistency(), "");
}

}  // namespace sci
