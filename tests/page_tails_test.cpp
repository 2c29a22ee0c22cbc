// The page summary (index/page_tails.h, index/tail_interner.h): a page not
// verified by its group is checked by one line of present tails instead of
// key by key. These tests pin what makes that exact: an entry made late
// still finds every key of its page, tail numbers never change meaning,
// tails beyond the 64 numbers and pages without an entry fall back to
// key-by-key checks, and a tail never stored answers a miss without a
// lookup. (The page-level model test, index_model_test, compares every
// answer with a model over random histories, summary included.)
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "index/index.h"
#include "index/tail_interner.h"
#include "sglang/layout.h"
#include "sglang/page_hash.h"
#include "sglang/page_query.h"
#include "log_capture.h"

namespace sci {
namespace {

constexpr uint32_t kPageSize = 4;

std::unique_ptr<const Layout> PoolsLayout(std::vector<std::string> suffixes) {
  LayoutSpec spec;
  spec.page_size = kPageSize;
  spec.tp_size = 1;
  spec.pp_size = 1;
  spec.pools = {PoolSpec{std::move(suffixes), HitPolicy::kAllPages, 0}};
  std::string error;
  std::unique_ptr<const Layout> layout = Layout::Create(spec, &error);
  EXPECT_NE(layout, nullptr) << error;
  return layout;
}

std::vector<uint32_t> Tokens(size_t pages, uint32_t first = 100) {
  std::vector<uint32_t> tokens(pages * kPageSize);
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

TEST(TailInterner, NumbersTailsInOrderOfFirstSightAndStopsAt64) {
  TailInterner tails;
  EXPECT_EQ(tails.Find(TailId("_0_k")), TailInterner::kNone);
  EXPECT_EQ(tails.Intern(TailId("_0_k"), "_0_k"), 0);
  EXPECT_EQ(tails.Intern(TailId("_0_v"), "_0_v"), 1);
  EXPECT_EQ(tails.Intern(TailId("_0_k"), "_0_k"), 0);
  EXPECT_EQ(tails.Find(TailId("_0_v")), 1);
  for (int i = 2; i < 64; ++i) EXPECT_EQ(tails.Intern(TailId("_t" + std::to_string(i)), "_t" + std::to_string(i)), i);
  EXPECT_TRUE(tails.full());
  EXPECT_EQ(tails.Intern(TailId("_one_too_many"), "_one_too_many"), TailInterner::kNone);
  EXPECT_EQ(tails.Find(TailId("_one_too_many")), TailInterner::kNone);
  for (int i = 2; i < 64; ++i) EXPECT_EQ(tails.Find(TailId("_t" + std::to_string(i))), i);
  EXPECT_EQ(tails.Tail(1), "_0_v");
  EXPECT_EQ(tails.Tail(63), "_t63");
}

class PageTailsQuery : public ::testing::Test {
 public:
  void Apply(const std::vector<Event>& events) { index_.ApplyBatch(next_sequence_++, events); }
  void StorePages(const Layout& layout, const std::vector<std::string>& hashes) {
    // Events view their strings: these hold them.
    std::vector<std::string> keys, groups;
    std::vector<size_t> page_of_key;
    for (size_t page = 0; page < hashes.size(); ++page) {
      groups.push_back(layout.GroupId(hashes[page]));
      for (std::string& key : layout.KeysFor(hashes[page], page, hashes.size())) {
        keys.push_back(std::move(key));
        page_of_key.push_back(page);
      }
    }
    std::vector<Event> events;
    for (size_t k = 0; k < keys.size(); ++k) {
      events.push_back(Event{EventKind::kStored, keys[k], groups[page_of_key[k]], {}, "cpu"});
    }
    Apply(events);
  }
  // Loads the keys of `hashes`' pages as a snapshot does (no group); returns them.
  std::vector<std::string> LoadSnapshot(const Layout& layout, const std::vector<std::string>& hashes) {
    std::vector<std::string> keys;
    for (size_t page = 0; page < hashes.size(); ++page) {
      for (std::string& key : layout.KeysFor(hashes[page], page, hashes.size())) keys.push_back(std::move(key));
    }
    const std::vector<std::string_view> views(keys.begin(), keys.end());
    index_.LoadKeys(views);
    return keys;
  }
  std::vector<int> Hits(const Layout& layout, const std::vector<uint32_t>& tokens,
                        const PageQueryHooks* hooks = nullptr, PageQueryResult* result = nullptr) {
    std::vector<uint8_t> hits(tokens.size() / kPageSize, 0xEE);
    const PageQueryResult r = CheckPages(index_, layout, tokens, kPageSize, hits, hooks);
    if (result != nullptr) *result = r;
    return std::vector<int>(hits.begin(), hits.end());
  }

  Index index_{SGLangIndexOptions()};
  uint64_t next_sequence_ = 1;
};

// Fills the 64 tail numbers with tails no layout here uses.
void UseEveryTailNumber(Index& index, uint64_t* sequence) {
  std::vector<std::string> keys;
  for (int i = 0; i < 64; ++i) keys.push_back(std::string(64, 'f') + "__other" + std::to_string(i));
  std::vector<Event> events;
  for (const std::string& key : keys) events.push_back(Event{EventKind::kStored, key, {}, {}, "cpu"});
  index.ApplyBatch((*sequence)++, events);
}

// A page gets an entry once three of its keys are stored under its group,
// found then by looking its head up with every numbered tail (keys stored
// before, under any group or none, included); pages of fewer keys, and keys
// under no group, get none and are checked key by key.
TEST_F(PageTailsQuery, PagesOfThreeKeysUnderTheirGroupGetAnEntryThatFindsEveryKey) {
  const auto one_key = PoolsLayout({"__a"});
  const auto two_keys = PoolsLayout({"__a", "__b"});
  const auto four_keys = PoolsLayout({"__a", "__b", "__c", "__d"});
  const std::vector<uint32_t> tokens = Tokens(3);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StorePages(*one_key, {hashes[0]});
  StorePages(*two_keys, {hashes[1]});
  EXPECT_EQ(index_.GetStats().summarised_pages, 0u);
  // Page 2: "__d" first, under no group; then the rest under the page's group.
  const std::vector<std::string> keys = four_keys->KeysFor(hashes[2], 2, 3);
  const std::string group = four_keys->GroupId(hashes[2]);
  Apply({Event{EventKind::kStored, keys[3], {}, {}, "cpu"}});
  Apply({Event{EventKind::kStored, keys[0], group, {}, "cpu"}, Event{EventKind::kStored, keys[1], group, {}, "cpu"}});
  EXPECT_EQ(index_.GetStats().summarised_pages, 0u);
  Apply({Event{EventKind::kStored, keys[2], group, {}, "cpu"}});
  EXPECT_EQ(index_.GetStats().summarised_pages, 1u);
  PageQueryResult r;
  EXPECT_EQ(Hits(*four_keys, tokens, nullptr, &r), (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(Hits(*four_keys, tokens, nullptr, &r), (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(r.fast_path, 0u);  // "__d" is under no group: never verified
  Apply({Event{EventKind::kRemoved, keys[3], {}, {}, "cpu"}});
  EXPECT_EQ(Hits(*four_keys, tokens), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(Hits(*PoolsLayout({"__a", "__b", "__c"}), tokens), (std::vector<int>{0, 0, 1}));
  // The entry goes with the page's last key.
  Apply({Event{EventKind::kRemoved, keys[0], {}, {}, "cpu"}, Event{EventKind::kRemoved, keys[1], {}, {}, "cpu"},
         Event{EventKind::kRemoved, keys[2], {}, {}, "cpu"}});
  EXPECT_EQ(index_.GetStats().summarised_pages, 0u);
}

// The gauge counts numbers taken, and a clear gives none back; taking the
// last one is logged once, as a warning, for the life of the index.
TEST_F(PageTailsQuery, TailNumbersAreAGaugeAndRunningOutIsLoggedOnce) {
  testing::LogCapture log;
  const auto layout = PoolsLayout({"__a", "__b", "__c"});
  StorePages(*layout, PageHashesHex(Tokens(2), kPageSize, false));
  EXPECT_EQ(index_.GetStats().tail_numbers, 3u);
  EXPECT_EQ(index_.GetStats().summarised_pages, 2u);
  index_.Clear();
  EXPECT_EQ(index_.GetStats().tail_numbers, 3u);
  EXPECT_EQ(index_.GetStats().summarised_pages, 0u);
  EXPECT_TRUE(log.At(LogLevel::kWarn).empty());
  UseEveryTailNumber(index_, &next_sequence_);  // 61 of its 64 tails get a number
  EXPECT_EQ(index_.GetStats().tail_numbers, 64u);
  UseEveryTailNumber(index_, &next_sequence_);
  Apply({Event{EventKind::kStored, std::string(64, 'e') + "__yet_another", {}, {}, "cpu"}});
  const std::vector<std::string> warnings = log.At(LogLevel::kWarn);
  EXPECT_EQ(index_.GetStats().tail_numbers, 64u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("all 64 key tail numbers are taken"), std::string::npos) << warnings[0];
}

// Tails that got no number are checked key by key: hits, misses and
// verification as before the summary.
TEST_F(PageTailsQuery, TailsBeyondTheNumbersAreCheckedKeyByKey) {
  UseEveryTailNumber(index_, &next_sequence_);
  const auto layout = PoolsLayout({"__a", "__b", "__c"});
  const std::vector<uint32_t> tokens = Tokens(3);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StorePages(*layout, hashes);
  EXPECT_EQ(index_.GetStats().summarised_pages, 0u);
  Apply({Event{EventKind::kRemoved, layout->KeysFor(hashes[1], 1, 3)[1], {}, {}, "cpu"}});
  PageQueryResult r;
  EXPECT_EQ(Hits(*layout, tokens, nullptr, &r), (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(r.fast_path, 0u);
  EXPECT_EQ(Hits(*layout, tokens, nullptr, &r), (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(r.fast_path, 2u);  // proven key by key, then verified
}

// A layout needing a tail nobody stored misses every page, even where
// every tail it shares with a stored layout is present.
TEST_F(PageTailsQuery, ATailNeverStoredMissesEveryPageThatNeedsIt) {
  const auto stored = PoolsLayout({"__a", "__b", "__c"});
  const auto needs_more = PoolsLayout({"__a", "__b", "__c", "__never"});
  const std::vector<uint32_t> tokens = Tokens(2);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StorePages(*stored, hashes);
  EXPECT_EQ(index_.GetStats().summarised_pages, 2u);
  EXPECT_EQ(Hits(*stored, tokens), (std::vector<int>{1, 1}));
  EXPECT_EQ(Hits(*needs_more, tokens), (std::vector<int>{0, 0}));
  EXPECT_EQ(CheckPrefix(index_, *needs_more, tokens, kPageSize).prefix_hits, 0u);
}

// A query learns the tails' numbers before it reads any page's entry. A
// clear and a store of other tails between the two must not make them pass
// for the ones asked: numbers outlive clears.
TEST_F(PageTailsQuery, TailNumbersKeepTheirMeaningAcrossAClear) {
  const auto asks_abc = PoolsLayout({"__a", "__b", "__c"});
  const auto stores_xyz = PoolsLayout({"__x", "__y", "__z"});
  const std::vector<uint32_t> tokens = Tokens(1);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  // Stored, not verified yet: the first query checks the page by its entry.
  StorePages(*asks_abc, hashes);
  ASSERT_EQ(index_.GetStats().summarised_pages, 1u);

  struct ClearThenStoreXyz {
    PageTailsQuery* test;
    const Layout* layout;
    std::vector<std::string> hashes;
    int calls = 0;
    static void AfterProbe(void* user, size_t) {
      auto* self = static_cast<ClearThenStoreXyz*>(user);
      ++self->calls;
      self->test->index_.Clear();
      // The same page and group id: x, y and z take numbers now.
      self->test->StorePages(*self->layout, self->hashes);
    }
  } interleave{this, stores_xyz.get(), hashes};
  PageQueryHooks hooks{&ClearThenStoreXyz::AfterProbe, &interleave};
  EXPECT_EQ(Hits(*asks_abc, tokens, &hooks), (std::vector<int>{0}));
  EXPECT_EQ(interleave.calls, 1);
  EXPECT_EQ(index_.GetStats().summarised_pages, 1u);
  EXPECT_EQ(Hits(*stores_xyz, tokens), (std::vector<int>{1}));
  EXPECT_EQ(Hits(*asks_abc, tokens), (std::vector<int>{0}));
}

// Keys of one page stored under different groups: present, so a hit, but
// the summary never marks the page's group verified.
TEST_F(PageTailsQuery, MixedGroupsHitButAreNeverVerifiedBySummary) {
  const auto layout = PoolsLayout({"__a", "__b", "__c"});
  const std::vector<uint32_t> tokens = Tokens(1);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StorePages(*layout, hashes);
  const std::vector<std::string> keys = layout->KeysFor(hashes[0], 0, 1);
  Apply({Event{EventKind::kStored, keys[2], "another-group", {}, "cpu"}});
  ASSERT_EQ(index_.GetStats().summarised_pages, 1u);
  PageQueryResult r;
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(Hits(*layout, tokens, nullptr, &r), (std::vector<int>{1})) << round;
    EXPECT_EQ(r.fast_path, 0u) << round;
  }
  // "Mixed" lasts until the page's last key goes; stored again, all under
  // its group, the page is verified by its next check.
  Apply({Event{EventKind::kRemoved, keys[0], {}, {}, "cpu"}, Event{EventKind::kRemoved, keys[1], {}, {}, "cpu"},
         Event{EventKind::kRemoved, keys[2], {}, {}, "cpu"}});
  EXPECT_EQ(Hits(*layout, tokens), (std::vector<int>{0}));
  StorePages(*layout, hashes);
  EXPECT_EQ(Hits(*layout, tokens, nullptr, &r), (std::vector<int>{1}));
  EXPECT_EQ(r.fast_path, 0u);
  EXPECT_EQ(Hits(*layout, tokens, nullptr, &r), (std::vector<int>{1}));
  EXPECT_EQ(r.fast_path, 1u);
}

// Snapshot keys (resync) carry no group, so their pages get no entry: they
// are checked key by key, and removals reach them.
TEST_F(PageTailsQuery, SnapshotKeysAreCheckedKeyByKey) {
  const auto layout = PoolsLayout({"__a", "__b", "__c"});
  const std::vector<uint32_t> tokens = Tokens(4);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  const std::vector<std::string> keys = LoadSnapshot(*layout, hashes);
  EXPECT_EQ(index_.GetStats().summarised_pages, 0u);
  EXPECT_EQ(Hits(*layout, tokens), (std::vector<int>{1, 1, 1, 1}));
  Apply({Event{EventKind::kRemoved, keys[7], {}, {}, "cpu"}});  // page 2's "__b"
  EXPECT_EQ(Hits(*layout, tokens), (std::vector<int>{1, 1, 0, 1}));
  EXPECT_EQ(CheckPrefix(index_, *layout, tokens, kPageSize).prefix_hits, 2u);
}

// A resync loads a page's keys under no group while the buffered stream
// stores them again under their group: the entry made on the third store
// is mixed then, and a mixed entry never verifies its page. Once the group
// holds all the head's keys, the entry is worked out again: the page is
// verified by its summary line, then takes the fast path.
TEST_F(PageTailsQuery, SnapshotKeysStoredAgainUnderTheirGroupAreVerifiedAgain) {
  const auto layout = PoolsLayout({"__a", "__b", "__c", "__d"});
  const std::vector<uint32_t> tokens = Tokens(2);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  const std::vector<std::string> keys = LoadSnapshot(*layout, hashes);
  StorePages(*layout, hashes);
  EXPECT_EQ(index_.GetStats().summarised_pages, 2u);
  PageQueryResult r;
  EXPECT_EQ(Hits(*layout, tokens, nullptr, &r), (std::vector<int>{1, 1}));
  EXPECT_EQ(r.fast_path, 0u);
  EXPECT_EQ(Hits(*layout, tokens, nullptr, &r), (std::vector<int>{1, 1}));
  EXPECT_EQ(r.fast_path, 2u);
  // Still exact: a key gone is a miss, by the summary as by the fast path.
  Apply({Event{EventKind::kRemoved, keys[5], {}, {}, "cpu"}});
  EXPECT_EQ(Hits(*layout, tokens, nullptr, &r), (std::vector<int>{1, 0}));
}

}  // namespace
}  // namespace sci
