// Stores a resync defers until its catch-up's anchor (index/deferred_stores.h,
// Index::DeferStores): each key's last store waits, a later removal or clear
// drops it, removals apply at once, and the end applies or drops what waits.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "index/index.h"

namespace sci {
namespace {

Event Stored(const std::string& key, const std::string& tenant = {}) {
  Event e;
  e.kind = EventKind::kStored;
  e.object_key = key;
  e.tenant_id = tenant;
  return e;
}
Event Removed(const std::string& key, const std::string& tenant = {}) {
  Event e = Stored(key, tenant);
  e.kind = EventKind::kRemoved;
  return e;
}
Event TenantCleared(const std::string& tenant) {
  Event e;
  e.kind = EventKind::kTenantCleared;
  e.tenant_id = tenant;
  return e;
}

TEST(DeferredStores, EachKeysLastStoreWaitsAndRemovalsApplyAtOnce) {
  // The events view these: kept alive for the whole test.
  const std::string a = "a", b = "b", c = "c", d = "d", t = "tenant-t";
  Index index;
  const Event first[] = {Stored(a), Stored(b)};
  index.ApplyBatch(1, first);
  index.DeferStores();
  const Event during[] = {Removed(a), Stored(c), Stored(b), Removed(b), Stored(d, t), Stored(a)};
  index.ApplyBatch(2, during);
  EXPECT_FALSE(index.Contains({}, a)) << "a removal applies at once";
  EXPECT_FALSE(index.Contains({}, b));
  EXPECT_FALSE(index.Contains({}, c)) << "a store waits";
  EXPECT_FALSE(index.Contains(t, d));
  EXPECT_EQ(index.GetStats().stores_withheld, 4u);
  const Event clear_t[] = {TenantCleared(t)};
  index.ApplyBatch(3, clear_t);
  index.EndDeferral(/*apply=*/true);
  EXPECT_TRUE(index.Contains({}, a)) << "its last event was a store";
  EXPECT_FALSE(index.Contains({}, b)) << "its last event was a removal";
  EXPECT_TRUE(index.Contains({}, c));
  EXPECT_FALSE(index.Contains(t, d)) << "its tenant was cleared after it";
  // Over: stores apply as they come.
  const Event after[] = {Stored(d, t)};
  index.ApplyBatch(4, after);
  EXPECT_TRUE(index.Contains(t, d));
}

TEST(DeferredStores, DroppedByAClearOrAnEndThatDoesNotApplyThem) {
  const std::string a = "a", b = "b";
  Index index;
  index.DeferStores();
  const Event one[] = {Stored(a)};
  index.ApplyBatch(1, one);
  index.Clear();  // a gap, a restart, an operator: what waited was of that stream
  const Event two[] = {Stored(b)};
  index.ApplyBatch(5, two);
  index.EndDeferral(/*apply=*/true);
  EXPECT_FALSE(index.Contains({}, a));
  EXPECT_TRUE(index.Contains({}, b));

  index.DeferStores();
  const Event three[] = {Stored(a)};
  index.ApplyBatch(6, three);
  index.EndDeferral(/*apply=*/false);  // the resync failed or started over
  EXPECT_FALSE(index.Contains({}, a));
}

Event Ev(EventKind kind, std::string_view key, std::string_view tenant = {}, std::string_view medium = {}) {
  Event e;
  e.kind = kind;
  e.object_key = key;
  e.tenant_id = tenant;
  e.medium = medium;
  e.generation = PublisherGeneration::kSecond;
  return e;
}

// The rules in the Mooncake format (from the outside review of 1.3.0, which
// they held against): a store on one medium dropped by a removal on
// another, "" and "default" one tenant, a tenant's clear, a duplicate batch
// ignored, an empty batch, an unnumbered one, a clear while deferring.
TEST(DeferredStores, PerMediumTenantsDuplicatesAndClearsDropWhatWaits) {
  IndexOptions o;
  o.residency = Residency::kPerMedium;
  Index index(o);
  const std::vector<Event> first = {Ev(EventKind::kStored, "seed")};
  index.ApplyBatch(1, first, SequenceRules::kMooncakeProduction, {true, 1, 1});
  index.DeferStores();
  // A store on cpu, its removal on disk (another medium): the store goes.
  const std::vector<Event> b2 = {Ev(EventKind::kStored, "k", {}, "cpu"), Ev(EventKind::kRemoved, "k", {}, "disk")};
  index.ApplyBatch(2, b2, SequenceRules::kMooncakeProduction, {true, 2, 3});
  // Tenant "" and "default" are one.
  const std::vector<Event> b3 = {Ev(EventKind::kStored, "t", ""), Ev(EventKind::kRemoved, "t", "default"),
                                 Ev(EventKind::kStored, "u", "x"), Ev(EventKind::kTenantCleared, {}, "x")};
  index.ApplyBatch(3, b3, SequenceRules::kMooncakeProduction, {true, 4, 7});
  // Duplicate (seq == last) is ignored, stores included.
  const std::vector<Event> dup = {Ev(EventKind::kStored, "d")};
  index.ApplyBatch(3, dup, SequenceRules::kMooncakeProduction, {true, 8, 8});
  // Empty batch, then a batch whose id 0 makes it unnumbered.
  index.ApplyBatch(4, {}, SequenceRules::kMooncakeProduction, {});
  const std::vector<Event> b5 = {Ev(EventKind::kStored, "w")};
  index.ApplyBatch(5, b5, SequenceRules::kMooncakeProduction, {true, 8, 8});
  index.EndDeferral(true);
  EXPECT_FALSE(index.Contains({}, "k"));
  EXPECT_FALSE(index.Contains({}, "t"));
  EXPECT_FALSE(index.Contains("x", "u"));
  EXPECT_FALSE(index.Contains({}, "d"));
  EXPECT_TRUE(index.Contains({}, "w"));

  // A clear while deferring drops what waits; a restart (ids not continuing) too.
  index.DeferStores();
  const std::vector<Event> b6 = {Ev(EventKind::kStored, "c")};
  index.ApplyBatch(6, b6, SequenceRules::kMooncakeProduction, {true, 9, 9});
  index.Clear();
  index.EndDeferral(true);
  EXPECT_FALSE(index.Contains({}, "c"));
}

}  // namespace
}  // namespace sci
