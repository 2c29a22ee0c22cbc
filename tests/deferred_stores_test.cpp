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

}  // namespace
}  // namespace sci
