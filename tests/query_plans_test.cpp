// The slot plans a thread keeps between queries (query/query_plans.h, I48):
// layouts and indexes queried in turn keep their plans, up to
// QueryPlans::kSetsPerThread of them, the least recently used replaced; a
// set serves only the index and layout it was made for; a query nested in
// another never takes the plans the outer one is using.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "index/index.h"
#include "index/slot_plan.h"
#include "query/query_plans.h"

namespace sci {
namespace {

const std::vector<SlotName>& Slots() {
  static const std::vector<SlotName> slots = {{"", "_0_k"}, {"", "_0_v"}};
  return slots;
}

// One query's use of its plans: leases them, notes the version the plan
// had when leased (0: the set was empty, a new plan), and makes it current
// (a plan never resolved is resolved then: version 1). Returns the version
// it had.
uint32_t Query(const Index& index, uint64_t layout_serial) {
  QueryPlans::Lease plans(index, layout_serial, 1);
  const uint32_t kept = plans->version(0);
  const Index::Reader reader(index);
  const SlotPlan& plan = plans->Current(reader, 0, Slots());
  EXPECT_TRUE(reader.Current(plan));
  EXPECT_EQ(plans->version(0), kept == 0 ? 1u : kept) << "a kept plan is current: not resolved again";
  return kept;
}

TEST(QueryPlans, LayoutsQueriedInTurnKeepTheirPlans) {
  const Index index;
  const uint64_t first = NextLayoutSerial(), second = NextLayoutSerial();
  EXPECT_EQ(Query(index, first), 0u);
  EXPECT_EQ(Query(index, second), 0u);
  for (int turn = 0; turn < 3; ++turn) {
    EXPECT_EQ(Query(index, first), 1u) << "turn " << turn;
    EXPECT_EQ(Query(index, second), 1u) << "turn " << turn;
  }
}

TEST(QueryPlans, IndexesQueriedInTurnKeepTheirPlansAndNeverShareThem) {
  const Index one, other;
  const uint64_t layout = NextLayoutSerial();
  EXPECT_EQ(Query(one, layout), 0u);
  EXPECT_EQ(Query(other, layout), 0u) << "another index under the same layout starts with no plan";
  EXPECT_EQ(Query(one, layout), 1u);
  EXPECT_EQ(Query(other, layout), 1u);
}

TEST(QueryPlans, TheLeastRecentlyUsedSetIsReplaced) {
  static_assert(QueryPlans::kSetsPerThread == 4, "the sequence below counts four sets");
  const Index index;
  std::vector<uint64_t> layouts;
  for (size_t i = 0; i <= QueryPlans::kSetsPerThread; ++i) layouts.push_back(NextLayoutSerial());
  // Five layouts in order: the fifth replaces the first's set.
  for (const uint64_t layout : layouts) EXPECT_EQ(Query(index, layout), 0u);
  EXPECT_EQ(Query(index, layouts[4]), 1u);
  EXPECT_EQ(Query(index, layouts[0]), 0u) << "replaced by the fifth";
  // Sets now hold 4, 0, 2, 3 (in order of use: 1's was the oldest, taken by 0).
  EXPECT_EQ(Query(index, layouts[3]), 1u);
  EXPECT_EQ(Query(index, layouts[2]), 1u);
  EXPECT_EQ(Query(index, layouts[1]), 0u) << "its set went to the first layout";
  // 1 took the oldest set, 4's: 0, 2 and 3 keep theirs.
  EXPECT_EQ(Query(index, layouts[0]), 1u);
  EXPECT_EQ(Query(index, layouts[4]), 0u);
}

TEST(QueryPlans, ANestedQueryNeverTakesThePlansOfTheQueryAroundIt) {
  const Index index;
  const uint64_t layout = NextLayoutSerial();
  QueryPlans::Lease outer(index, layout, 1);
  const SlotPlan* outer_plan = nullptr;
  {
    const Index::Reader reader(index);
    outer_plan = &outer->Current(reader, 0, Slots());
  }
  ASSERT_EQ(outer->version(0), 1u);
  // Queries nested deeper than the thread has sets: the last ones get sets
  // of their own. Each resolves its own plan; none is the outer one's.
  std::vector<std::unique_ptr<QueryPlans::Lease>> nested;
  for (size_t depth = 0; depth <= QueryPlans::kSetsPerThread; ++depth) {
    nested.push_back(std::make_unique<QueryPlans::Lease>(index, layout, 1));
    QueryPlans& plans = **nested.back();
    EXPECT_NE(&plans, &*outer) << "depth " << depth;
    for (size_t shallower = 0; shallower + 1 < nested.size(); ++shallower) {
      EXPECT_NE(&plans, &**nested[shallower]) << "depth " << depth;
    }
    EXPECT_EQ(plans.version(0), 0u) << "depth " << depth;
    const Index::Reader reader(index);
    EXPECT_NE(&plans.Current(reader, 0, Slots()), outer_plan);
  }
  nested.clear();
  EXPECT_EQ(&outer->Last(0), outer_plan);
  EXPECT_EQ(outer->version(0), 1u) << "the outer query's plan was never resolved again";
}

}  // namespace
}  // namespace sci
