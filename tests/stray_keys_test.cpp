// Stray keys (index/stray_keys.h): a page whose group is unknown is answered
// absent without a key lookup unless a key of it may be present outside its
// group. These tests store keys every way they can end up outside it -- a
// snapshot (no group), an event without a label, a label naming another
// page, a layout whose key prefix is not its tag -- and check that such a
// page is still found, by both queries; that the stray_keys gauge follows
// them (adoption, re-labelling, removal, clear); and the counts' own rules.
// The page-level model test (index_model_test) compares every answer with a
// reference model over random histories of all of these.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "index/stray_keys.h"
#include "prompt_fixture.h"
#include "sglang/page_query.h"

namespace sci {
namespace {

constexpr size_t kPages = 4;

class StrayKeys : public PromptFixture {
 public:
  void SetUp() override { UseLayoutForPrompt(TpSpec(2)); }  // 4 keys a page

  void UseLayoutForPrompt(const LayoutSpec& spec) {
    UseLayout(spec);
    MakePrompt(kPages);
  }
  // Every key of `page`, stored with `label` (empty: none).
  void StorePage(size_t page, const std::string& label) {
    std::vector<Event> events;
    for (const std::string& key : keys_[page]) events.push_back(Event{EventKind::kStored, key, label, {}, "cpu"});
    Apply(events);
  }
  void RemovePage(size_t page) {
    std::vector<Event> events;
    for (const std::string& key : keys_[page]) events.push_back(Event{EventKind::kRemoved, key, {}, {}, "cpu"});
    Apply(events);
  }

  // Both queries agree with `expected` (the hit pages, in order).
  void ExpectHits(const std::vector<int>& expected) {
    std::vector<uint8_t> hits(kPages);
    const PageQueryResult r = CheckPages(index_, *layout_, tokens_, kPageSize, hits);
    EXPECT_EQ(std::vector<int>(hits.begin(), hits.end()), expected) << "check_pages";
    size_t prefix = 0;
    while (prefix < expected.size() && expected[prefix] == 1) ++prefix;
    EXPECT_EQ(r.prefix_hits, prefix);
    EXPECT_EQ(CheckPrefix(index_, *layout_, tokens_, kPageSize).prefix_hits, prefix) << "check_prefix";
  }
  uint64_t Strays() const { return index_.GetStats().stray_keys; }
};

TEST_F(StrayKeys, KeysStoredUnderTheirPagesGroupAreNoStrays) {
  ASSERT_TRUE(layout_->groups_named_by_key_heads());
  StorePage(0, Group(0));
  StorePage(1, Group(1));
  EXPECT_EQ(Strays(), 0u);
  ExpectHits({1, 1, 0, 0});
}

// The case the counts exist for: its group unknown, the page is present all
// the same. Answered from its group alone, it would be a miss.
TEST_F(StrayKeys, APageStoredUnderAnotherPagesGroupIsStillFound) {
  StorePage(0, Group(0));
  StorePage(1, Group(3));  // a publisher's mislabel: page 3's group holds page 1's keys
  EXPECT_EQ(Strays(), keys_[1].size());
  ExpectHits({1, 1, 0, 0});
  // Stored again under its own group: no stray left.
  StorePage(1, Group(1));
  EXPECT_EQ(Strays(), 0u);
  ExpectHits({1, 1, 0, 0});
}

TEST_F(StrayKeys, APageStoredWithoutALabelIsStillFound) {
  StorePage(0, "");
  StorePage(1, "");
  EXPECT_EQ(Strays(), 2 * keys_[0].size());
  RemovePage(0);
  EXPECT_EQ(Strays(), keys_[1].size());
  ExpectHits({0, 1, 0, 0});
  // Proven key by key with its group unknown, page 1 was asked to be
  // adopted: the writer's next batch stores its keys under its group.
  Apply({});
  EXPECT_EQ(index_.GetStats().groups_adopted, 1u);
  EXPECT_EQ(Strays(), 0u);
  ExpectHits({0, 1, 0, 0});
  RemovePage(1);
  EXPECT_EQ(Strays(), 0u);
  ExpectHits({0, 0, 0, 0});
}

// A single stray key decides: the page is looked up, and a page with all
// but one key under its group and that one stray is a hit.
TEST_F(StrayKeys, OneStrayKeyOfAPageIsEnoughToLookItUp) {
  StorePage(2, Group(2));
  Apply({Event{EventKind::kStored, keys_[2][3], "", {}, "cpu"}});  // re-stored without its label
  EXPECT_EQ(Strays(), 1u);
  ExpectHits({0, 0, 1, 0});
  // Its group is still known (three keys): now only the stray holds page 2 in the counts.
  for (size_t k = 0; k < 3; ++k) Apply({Event{EventKind::kStored, keys_[2][k], Group(0), {}, "cpu"}});
  EXPECT_EQ(Strays(), 4u);
  ExpectHits({0, 0, 1, 0});
}

TEST_F(StrayKeys, SnapshotKeysAreStraysUntilTheirAdoption) {
  LoadSnapshotOf(0);
  LoadSnapshotOf(1);
  EXPECT_EQ(Strays(), 2 * keys_[0].size());
  ExpectHits({1, 1, 0, 0});  // proven key by key; adoption asked
  Apply({});                 // the writer's next batch adopts them
  EXPECT_EQ(index_.GetStats().groups_adopted, 2u);
  EXPECT_EQ(Strays(), 0u);
  ExpectHits({1, 1, 0, 0});
  RemovePage(0);
  ExpectHits({0, 1, 0, 0});
}

TEST_F(StrayKeys, AClearForgetsTheStrays) {
  LoadSnapshotOf(1);
  StorePage(2, Group(0));
  ASSERT_EQ(Strays(), 2 * keys_[0].size());
  index_.Clear();
  EXPECT_EQ(Strays(), 0u);
  ExpectHits({0, 0, 0, 0});
  // The counts start over: a stray stored after the clear is found again.
  StorePage(3, "");
  EXPECT_EQ(Strays(), keys_[3].size());
  ExpectHits({0, 0, 0, 1});
}

// Pools whose key prefix is not the tag: keys "p_<hash>__k" under
// "sglang-hicache:<hash>". Such groups are not named after their keys' head:
// every key is a stray, and the layout never answers from its group alone.
TEST_F(StrayKeys, ALayoutWhoseGroupsAreNotNamedAfterItsKeysIsAnsweredByItsKeys) {
  LayoutSpec spec;
  spec.page_size = kPageSize;
  spec.key_prefix = "p";
  spec.pools = {PoolSpec{{"__k", "__v"}, HitPolicy::kAllPages, 0}};
  UseLayoutForPrompt(spec);
  ASSERT_FALSE(layout_->groups_named_by_key_heads());
  StorePage(0, Group(0));
  StorePage(1, Group(3));
  EXPECT_EQ(Strays(), 4u);
  ExpectHits({1, 1, 0, 0});

  // With the tag as key prefix, the same pools name their groups after the head.
  spec.extra_backend_tag = "p";
  UseLayoutForPrompt(spec);
  EXPECT_TRUE(layout_->groups_named_by_key_heads());
  EXPECT_EQ(layout_->GroupId(hashes_[0]), "sglang-hicache:p_" + hashes_[0]);
  EXPECT_EQ(keys_[0][0], "p_" + hashes_[0] + "__k");
}

// A label that merely looks like a head's group ("sglang-hicache:" and a
// string a head cannot be) names no head: keys under it are strays.
TEST_F(StrayKeys, ALabelThatNamesNoHeadLeavesItsKeysStrays) {
  for (const std::string label : {std::string("sglang-hicache:"), "sglang-hicache:" + hashes_[1].substr(1),
                                   "sglang-hicache:" + hashes_[1] + "x", "other:" + hashes_[1]}) {
    SCOPED_TRACE(label);
    index_.Clear();
    StorePage(1, label);
    EXPECT_EQ(Strays(), keys_[1].size());
    ExpectHits({0, 1, 0, 0});
  }
}

// The group a stray is counted by is named after its key's head, whichever
// group it was created by: keys of page 1 under page 1's group created
// through a mislabelled key of page 3 are no strays.
TEST_F(StrayKeys, AGroupCreatedByAnotherPagesKeyIsStillNamedAfterItsHead) {
  Apply({Event{EventKind::kStored, keys_[3][0], Group(1), {}, "cpu"}});
  EXPECT_EQ(Strays(), 1u);
  StorePage(1, Group(1));
  EXPECT_EQ(Strays(), 1u);  // page 3's key only
  ExpectHits({0, 1, 0, 0});
  RemovePage(1);
  Apply({Event{EventKind::kRemoved, keys_[3][0], {}, {}, "cpu"}});
  EXPECT_EQ(Strays(), 0u);
}

TEST(StrayKeyCounts, CountsBySlotAndStickAtTheTop) {
  StrayKeyCounts counts;
  const Fingerprint a{1, uint64_t{5} << 44};
  const Fingerprint same_slot_as_a{2, (uint64_t{5} << 44) | 7};
  const Fingerprint b{1, uint64_t{6} << 44};
  EXPECT_FALSE(counts.MayHold(a));
  counts.Add(a, 0);
  EXPECT_TRUE(counts.MayHold(a));
  EXPECT_TRUE(counts.MayHold(same_slot_as_a)) << "a shared slot: a lookup, never a wrong answer";
  EXPECT_FALSE(counts.MayHold(b));
  counts.Remove(a, 0);
  EXPECT_FALSE(counts.MayHold(a));
  EXPECT_EQ(counts.strays(), 0u);

  // 300 strays in one slot: the count sticks at 255 and holds the slot until every stray is gone.
  for (int i = 0; i < 300; ++i) counts.Add(a, 0);
  counts.Add(b, 0);
  for (int i = 0; i < 300; ++i) counts.Remove(a, 0);
  EXPECT_TRUE(counts.MayHold(a)) << "stuck: not decremented";
  EXPECT_EQ(counts.strays(), 1u);
  counts.Remove(b, 0);
  EXPECT_EQ(counts.strays(), 0u);
  EXPECT_FALSE(counts.MayHold(a)) << "no stray left: the stuck slot is freed";
  EXPECT_FALSE(counts.MayHold(b));
}

}  // namespace
}  // namespace sci
