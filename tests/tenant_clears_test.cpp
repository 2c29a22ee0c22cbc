// A tenant's `cleared` and what it takes (index/tenant_keys.h). Keys are
// filed by their tenant's tag, 8 public bits, so a clear that knows only
// the tag walks the whole store and drops every tenant of the tag. Counted
// by tenant: a tenant holding nothing clears nothing; one holding at most
// TenantKeys::kListed keys has them removed by name, and a tenant sharing
// its tag keeps its own; only a tenant holding more is walked by its tag.
// Before, a tenant whose name was chosen to share the default tenant's tag
// wiped the default tenant's pool by storing one key and clearing (an
// outside review of 1.4), and every such clear walked the store.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/log.h"
#include "index/deferred_stores.h"
#include "index/fingerprint.h"
#include "index/index.h"
#include "index/tenant_keys.h"
#include "log_capture.h"

namespace sci {
namespace {

// A tenant name other than `tenant` with its tag (one name in 256 has).
std::string TagMateOf(const std::string& tenant, const std::string& stem) {
  for (int n = 0;; ++n) {
    std::string name = stem + std::to_string(n);
    if (name != tenant && TenantTag(TenantSeed(name)) == TenantTag(TenantSeed(tenant))) return name;
  }
}

std::string PageKey(uint64_t page, int rank) {
  std::string hex(64, '0');
  for (int i = 0; i < 16; ++i) hex[63 - i] = "0123456789abcdef"[(page >> (4 * i)) & 15];
  hex[0] = 'c';
  return hex + "_" + std::to_string(rank) + "_k";
}

struct Feed {
  Index& index;
  uint64_t sequence = 1;
  void Store(const std::string& tenant, const std::vector<std::string>& keys) {
    std::vector<Event> batch;
    for (const std::string& key : keys) batch.push_back(Event{EventKind::kStored, key, {}, tenant, "cpu"});
    index.ApplyBatch(sequence++, batch);
  }
  void Remove(const std::string& tenant, const std::vector<std::string>& keys) {
    std::vector<Event> batch;
    for (const std::string& key : keys) batch.push_back(Event{EventKind::kRemoved, key, {}, tenant, "cpu"});
    index.ApplyBatch(sequence++, batch);
  }
  void Clear(const std::string& tenant) {
    index.ApplyBatch(sequence++, std::vector<Event>{Event{EventKind::kTenantCleared, {}, {}, tenant, {}}});
  }
};

std::vector<std::string> Keys(uint64_t first_page, size_t pages) {
  std::vector<std::string> keys;
  for (size_t p = 0; p < pages; ++p) {
    for (int rank = 0; rank < 2; ++rank) keys.push_back(PageKey(first_page + p, rank));
  }
  keys.push_back("a-key-that-does-not-decompose-" + std::to_string(first_page));
  return keys;
}

size_t Present(const Index& index, const std::string& tenant, const std::vector<std::string>& keys) {
  size_t n = 0;
  for (const std::string& key : keys) n += index.Contains(tenant, key) ? 1 : 0;
  return n;
}

// The default tenant's pool of `pages` pages, and a tenant sharing its tag.
struct PoolAndTagMate {
  explicit PoolAndTagMate(size_t pages) : pool(Keys(1, pages)) { feed.Store("default", pool); }
  testing::LogCapture log;
  Index index;
  Feed feed{index};
  const std::vector<std::string> pool;
  const std::string mate = TagMateOf("default", "mate-");
};

TEST(TenantClears, ATagMateWithOneKeyClearsItAloneAndTheDefaultTenantKeepsItsPool) {
  PoolAndTagMate t(500);
  auto& [log, index, feed, pool, mate] = t;
  const std::vector<std::string> its = {PageKey(1, 0), "its-own-key"};  // one the pool has too, of its own tenant
  for (int round = 0; round < 3; ++round) {
    feed.Store(mate, its);
    ASSERT_EQ(Present(index, mate, its), its.size());
    feed.Clear(mate);
    EXPECT_EQ(Present(index, mate, its), 0u);
    EXPECT_EQ(Present(index, "default", pool), pool.size()) << "a tag-mate's clear took the default tenant's keys";
    EXPECT_EQ(index.GetStats().keys, pool.size());
    EXPECT_EQ(index.Inconsistency(), "");
  }
  EXPECT_EQ(log.Count(LogLevel::kInfo, "its keys removed by name"), 3u);
}

TEST(TenantClears, ATenantHoldingNothingClearsNothingEvenWhenItsTagHoldsKeys) {
  PoolAndTagMate t(100);
  auto& [log, index, feed, pool, mate] = t;
  // As Mooncake's master does: the removals first, then `cleared`.
  feed.Store(mate, Keys(1000, 3));
  feed.Remove(mate, Keys(1000, 3));
  feed.Clear(mate);
  EXPECT_EQ(Present(index, "default", pool), pool.size());
  EXPECT_EQ(log.Count(LogLevel::kInfo, "it held no key"), 1u);
  EXPECT_EQ(index.Inconsistency(), "");
}

// Past kListed keys the tenant is walked by its tag, and every tenant of
// the tag loses its keys (a miss); a tenant of another tag keeps its own.
// The tag-mate's count is forgotten with its keys, and it starts again.
TEST(TenantClears, ATenantPastTheListedBoundIsWalkedByItsTagAndItsTagMatesStartAgain) {
  testing::LogCapture log;
  Index index;
  Feed feed{index};
  const std::string big = "big", mate = TagMateOf("big", "mate-");
  std::string apart = "apart";
  while (TenantTag(TenantSeed(apart)) == TenantTag(TenantSeed(big))) apart += "+";
  const std::vector<std::string> bigs = Keys(1, TenantKeys::kListed / 2 + 1);  // kListed + 3 keys
  ASSERT_GT(bigs.size(), TenantKeys::kListed);
  feed.Store(big, bigs);
  feed.Store(mate, Keys(5000, 2));
  feed.Store(apart, Keys(9000, 2));
  feed.Clear(big);
  EXPECT_EQ(log.Count(LogLevel::kInfo, "a walk of the store"), 1u);
  EXPECT_EQ(Present(index, big, bigs), 0u);
  EXPECT_EQ(Present(index, mate, Keys(5000, 2)), 0u) << "a walk by tag takes the tag-mate's keys too";
  EXPECT_EQ(Present(index, apart, Keys(9000, 2)), Keys(9000, 2).size());
  EXPECT_EQ(index.Inconsistency(), "") << "the tag-mate's count outlived its keys";
  // The tag-mate stores again: listed afresh, cleared by name.
  feed.Store(mate, Keys(6000, 1));
  feed.Clear(mate);
  EXPECT_EQ(log.Count(LogLevel::kInfo, "its keys removed by name"), 1u);
  EXPECT_EQ(index.GetStats().keys, Keys(9000, 2).size());
  EXPECT_EQ(index.Inconsistency(), "");
}

// A tenant that grew past the bound stays unlisted while it holds a key,
// however few are left; once it holds none it is counted afresh.
TEST(TenantClears, ATenantThatGrewPastTheBoundIsWalkedUntilItHeldNothing) {
  testing::LogCapture log;
  Index index;
  Feed feed{index};
  const std::vector<std::string> many = Keys(1, TenantKeys::kListed / 2 + 1);
  feed.Store("t", many);
  std::vector<std::string> all_but_one(many.begin() + 1, many.end());
  feed.Remove("t", all_but_one);
  ASSERT_EQ(index.GetStats().keys, 1u);
  EXPECT_EQ(index.Inconsistency(), "");
  feed.Store("other", Keys(7000, 1));
  feed.Clear("t");
  EXPECT_EQ(log.Count(LogLevel::kInfo, "a walk of the store"), 1u);
  EXPECT_EQ(index.GetStats().keys, Keys(7000, 1).size());
  feed.Store("t", Keys(8000, 1));
  feed.Clear("t");
  EXPECT_EQ(log.Count(LogLevel::kInfo, "its keys removed by name"), 1u);
  EXPECT_EQ(index.GetStats().keys, Keys(7000, 1).size());
  EXPECT_EQ(index.Inconsistency(), "");
}

// Keys stored again, on another medium, or removed from one medium and kept
// on another are counted once; a clear by name takes every medium.
TEST(TenantClears, KeysOnSeveralMediaAreCountedOnceAndClearedOnEvery) {
  IndexOptions options;
  options.residency = Residency::kPerMedium;
  Index index(options);
  uint64_t sequence = 1;
  const std::string key = PageKey(3, 0);
  index.ApplyBatch(sequence++, std::vector<Event>{Event{EventKind::kStored, key, {}, "t", "cpu"},
                                                  Event{EventKind::kStored, key, {}, "t", "disk"},
                                                  Event{EventKind::kStored, key, {}, "t", "cpu"},
                                                  Event{EventKind::kRemoved, key, {}, "t", "cpu"}});
  ASSERT_TRUE(index.Contains("t", key));
  EXPECT_EQ(index.Inconsistency(), "");
  index.ApplyBatch(sequence++, std::vector<Event>{Event{EventKind::kTenantCleared, {}, {}, "t", {}}});
  EXPECT_FALSE(index.Contains("t", key));
  EXPECT_EQ(index.GetStats().keys, 0u);
  EXPECT_EQ(index.Inconsistency(), "");
}

// Names are listed by their bytes too: a tenant of long keys (up to 64 KiB
// each) is unlisted once its names pass kListedBytes, so a listed tenant
// costs at most about 200 kB whatever its keys (an outside review listed
// 64 MiB for one tenant of 1,024 long keys). It is then cleared by its tag.
TEST(TenantClears, ATenantOfLongKeysIsUnlistedByTheirBytes) {
  TenantKeys keys;
  const uint64_t seed = TenantSeed("long");
  const std::string long_key(60 * 1024, 'k');
  TenantKeys::Names names;
  for (int i = 0; i < 3; ++i) {
    const std::string key = long_key + std::to_string(i);
    keys.Prepare(seed, key);
    keys.Came(seed);
  }
  EXPECT_EQ(keys.Inconsistency(3), "");
  EXPECT_EQ(keys.PlanClear(seed, &names), TenantKeys::ClearBy::kTagWalk) << "180 kB of names are still listed";
  EXPECT_TRUE(names.empty());
}

// A listed tenant that shrinks gives its buckets back: one that stored
// 1,024 keys and kept one held 8 kB of buckets for it (an outside review:
// 256 such tenants, 9 kB a present key).
TEST(TenantClears, AListedTenantThatShrinksGivesItsBucketsBack) {
  TenantKeys keys;
  const uint64_t seed = TenantSeed("shrinks");
  std::vector<std::string> names;
  for (uint64_t i = 0; i < TenantKeys::kListed; ++i) {
    names.push_back(PageKey(i, 0));
    keys.Prepare(seed, names.back());
    keys.Came(seed);
  }
  for (uint64_t i = 1; i < TenantKeys::kListed; ++i) keys.Went(seed, names[i]);
  EXPECT_EQ(keys.Inconsistency(1), "");
  TenantKeys::Names left;
  ASSERT_EQ(keys.PlanClear(seed, &left), TenantKeys::ClearBy::kNames);
  EXPECT_EQ(left.size(), 1u);
  EXPECT_LE(left.bucket_count(), 64u) << "the names kept the buckets of 1,024";
}

// While a resync defers stores, a tenant's clear drops that tenant's
// waiting stores only, in one erase (they were one table, scanned whole
// per clear: 33 ms with 200k stores of others waiting, an outside review).
TEST(TenantClears, AClearDuringADeferralDropsOnlyItsTenantsWaitingStores) {
  DeferredStores deferred;
  // Views of literals and of `keys`: an Event holds views, never copies.
  const auto stored = [](std::string_view tenant, std::string_view key) {
    return Event{EventKind::kStored, key, {}, tenant, "cpu"};
  };
  const std::vector<std::string> keys = {"k1", "k2", "k3"};
  std::vector<Event> events;
  for (const std::string& key : keys) {
    events.push_back(stored("", key));
    events.push_back(stored("a", key));
  }
  for (const Event& e : events) ASSERT_TRUE(deferred.Add(e));
  EXPECT_EQ(deferred.size(), 6u);
  deferred.ClearTenant("nobody");
  EXPECT_EQ(deferred.size(), 6u);
  deferred.ClearTenant("default");  // "" and "default" are one tenant
  EXPECT_EQ(deferred.size(), 3u);
  deferred.Remove("a", "k2");
  EXPECT_EQ(deferred.size(), 2u);
  size_t kept = 0;
  for (const auto& [tenant, by_key] : deferred.by_tenant()) {
    EXPECT_EQ(tenant, "a");
    kept += by_key.size();
  }
  EXPECT_EQ(kept, 2u);
  deferred.ClearTenant("a");
  EXPECT_TRUE(deferred.empty());
  EXPECT_TRUE(deferred.by_tenant().empty());
}

}  // namespace
}  // namespace sci
