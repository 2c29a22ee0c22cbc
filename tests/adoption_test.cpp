// Adoption (index/adoption_queue.h; index.h, "Adoption"): a page a query
// proved present key by key while its group was unknown -- a page loaded
// from a snapshot, whose keys carry no group -- gets its group from the
// writer before the writer's next batch, and takes the fast path from then
// on; and does not when anything about it changed in between. The page-level
// model test (index_model_test) compares every adoption with a reference
// model over random histories with snapshot loads; resync_test shows it end
// to end, after a real resync.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "prompt_fixture.h"
#include "sglang/page_query.h"

namespace sci {
namespace {

class Adoption : public PromptFixture {
 public:
  void SetUp() override { UseLayout(TpSpec(8)); }  // 16 keys a page

  PageQueryResult Query() {
    std::vector<uint8_t> hits(hashes_.size());
    const PageQueryResult r = CheckPages(index_, *layout_, tokens_, kPageSize, hits);
    hits_.assign(hits.begin(), hits.end());
    return r;
  }

  std::vector<int> hits_;
};

TEST_F(Adoption, SnapshotPagesTakeTheFastPathAfterTheWritersNextBatch) {
  MakePrompt(5);
  LoadSnapshot();
  PageQueryResult r = Query();
  EXPECT_EQ(r.total_hits, 5u);
  EXPECT_EQ(r.fast_path, 0u);  // proven key by key: the groups are unknown
  r = Query();
  EXPECT_EQ(r.fast_path, 0u) << "adopted only by the writer, at its next batch";
  EXPECT_EQ(index_.GetStats().groups, 0u);

  Tick();
  Stats s = index_.GetStats();
  EXPECT_EQ(s.groups_adopted, 5u);
  EXPECT_EQ(s.groups, 5u);
  EXPECT_EQ(s.verified_groups, 5u);
  r = Query();
  EXPECT_EQ(r.total_hits, 5u);
  EXPECT_EQ(r.fast_path, 5u);
  Tick();  // nothing more to adopt
  EXPECT_EQ(index_.GetStats().groups_adopted, 5u);
}

TEST_F(Adoption, AnAdoptedPagesRemovalWithoutAGroupReachesItsGroup) {
  MakePrompt(3);
  LoadSnapshot();
  Query();
  Tick();
  ASSERT_EQ(Query().fast_path, 3u);
  // Mooncake's removals often carry no group: the key remembers the one it was adopted into.
  Apply({Event{EventKind::kRemoved, keys_[1][9], {}, {}, "cpu"}});
  const PageQueryResult r = Query();
  EXPECT_EQ(hits_, (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(r.fast_path, 2u);
  // Stored again by SGLang, under its group: proven again, then fast again.
  const std::string group = layout_->GroupId(hashes_[1]);
  Apply({Event{EventKind::kStored, keys_[1][9], group, {}, "cpu"}});
  EXPECT_EQ(Query().total_hits, 3u);
  EXPECT_EQ(Query().fast_path, 3u);
  EXPECT_EQ(index_.GetStats().groups_adopted, 3u);
}

// The writer adopts what is true when it runs, not what a query saw: a
// request is checked again against the tables as they are.
TEST_F(Adoption, TheWriterAdoptsOnlyAnUnknownGroupWhoseKeysArePresentUnderNone) {
  MakePrompt(4);
  LoadSnapshot();
  const std::string group0 = layout_->GroupId(hashes_[0]);
  Apply({
      Event{EventKind::kStored, keys_[0][0], group0, {}, "cpu"},         // page 0: its group is known
      Event{EventKind::kRemoved, keys_[1][5], {}, {}, "cpu"},            // page 1: a key is gone
      Event{EventKind::kStored, keys_[2][3], "some-other-group", {}, "cpu"},  // page 2: a key is another group's
  });
  // Ask as a query would for every page (a query would not ask for 0 and 1:
  // its group is known, its keys not all present).
  const uint64_t seed = layout_->tenant_seed();
  for (size_t page = 0; page < 4; ++page) {
    std::vector<Fingerprint> keys;
    for (const std::string& key : keys_[page]) keys.push_back(FingerprintOf(seed, key));
    const Layout::Level& level = layout_->LevelFor(page, 4);
    index_.RequestAdoption(FingerprintOf(seed, layout_->GroupId(hashes_[page])), level.id, keys, nullptr, seed, false);
  }
  index_.AdoptRequestedGroups();
  const Stats s = index_.GetStats();
  EXPECT_EQ(s.groups_adopted, 1u);  // page 3 only
  EXPECT_EQ(s.groups, 3u);          // page 0's, the other one, page 3's
  const PageQueryResult r = Query();
  EXPECT_EQ(hits_, (std::vector<int>{1, 0, 1, 1}));
  EXPECT_EQ(r.fast_path, 1u);  // page 3
}

// A clear between the request and the writer's batch: the keys are gone, nothing is adopted.
TEST_F(Adoption, NothingIsAdoptedAfterAClear) {
  MakePrompt(3);
  LoadSnapshot();
  Query();
  index_.Clear();
  Tick();
  EXPECT_EQ(index_.GetStats().groups_adopted, 0u);
  EXPECT_EQ(index_.GetStats().groups, 0u);
  EXPECT_EQ(Query().total_hits, 0u);
}

// The queue holds 512 pages between two turns of the writer; the pages it
// could not take are asked for again by their next query.
TEST_F(Adoption, PagesBeyondTheQueuesBoundAreAdoptedByALaterRound) {
  static_assert(AdoptionQueue::kMaxRequests == 512 && AdoptionQueue::kMaxKeys == 512 * 16);
  MakePrompt(600);
  LoadSnapshot();
  EXPECT_EQ(Query().total_hits, 600u);
  Tick();
  EXPECT_EQ(index_.GetStats().groups_adopted, 512u);
  PageQueryResult r = Query();
  EXPECT_EQ(r.fast_path, 512u);
  Tick();
  EXPECT_EQ(index_.GetStats().groups_adopted, 600u);
  r = Query();
  EXPECT_EQ(r.total_hits, 600u);
  EXPECT_EQ(r.fast_path, 600u);
}

// Asked twice before the writer's turn, a page is adopted once.
TEST_F(Adoption, APageAskedForTwiceWaitsOnce) {
  MakePrompt(3);
  LoadSnapshot();
  Query();
  Query();
  Tick();
  EXPECT_EQ(index_.GetStats().groups_adopted, 3u);
  EXPECT_EQ(index_.GetStats().groups, 3u);
}

// The listener (a subscriber's wake-up) hears the first request into an
// empty queue, and nothing once removed.
TEST_F(Adoption, TheListenerHearsTheFirstRequestOfEachTurn) {
  int woken = 0;
  index_.SetAdoptionListener([&woken] { ++woken; });
  MakePrompt(4);
  LoadSnapshot();
  Query();
  EXPECT_EQ(woken, 1);  // four requests, one wake-up
  index_.AdoptRequestedGroups();
  EXPECT_EQ(index_.GetStats().groups_adopted, 4u);
  MakePrompt(2, 5000);
  LoadSnapshot();
  Query();
  EXPECT_EQ(woken, 2);
  index_.SetAdoptionListener(nullptr);
  index_.AdoptRequestedGroups();
  MakePrompt(2, 9000);
  LoadSnapshot();
  Query();
  EXPECT_EQ(woken, 2);
}

// A prefix query asks too.
TEST_F(Adoption, PrefixQueriesAskForThePagesTheyProve) {
  MakePrompt(6);
  LoadSnapshot();
  EXPECT_EQ(CheckPrefix(index_, *layout_, tokens_, kPageSize).prefix_hits, 6u);
  Tick();
  EXPECT_EQ(index_.GetStats().groups_adopted, 6u);
  EXPECT_EQ(Query().fast_path, 6u);
}

}  // namespace
}  // namespace sci
