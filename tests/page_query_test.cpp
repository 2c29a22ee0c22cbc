// The page query against the real index: one or more tests per rule of
// docs/sglang-hicache.md and the "Queries" part of
// docs/index-semantics.md. Pages are stored the way the Mooncake
// publisher reports them: one stored event per object key, labelled with
// the page's group id.
#include <gtest/gtest.h>

#include <cctype>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "index/index.h"
#include "query/query_plans.h"
#include "sglang/layout.h"
#include "sglang/page_hash.h"
#include "sglang/page_query.h"

namespace sci {
namespace {

constexpr uint32_t kPageSize = 4;

LayoutSpec Mha(uint32_t tp, uint32_t pp) {
  LayoutSpec spec;
  spec.page_size = kPageSize;
  spec.tp_size = tp;
  spec.pp_size = pp;
  return spec;
}

std::unique_ptr<const Layout> Make(const LayoutSpec& spec) {
  std::string error;
  std::unique_ptr<const Layout> layout = Layout::Create(spec, &error);
  EXPECT_NE(layout, nullptr) << error;
  return layout;
}

std::vector<uint32_t> Tokens(size_t pages, uint32_t first = 100, bool eagle = false) {
  std::vector<uint32_t> tokens(pages * kPageSize + (eagle ? 1 : 0));
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

class PageQuery : public ::testing::Test {
 protected:
  // One stored event per key of `page` (of a request of `hashes.size()`
  // pages), labelled with the page's group id, in its own batch.
  void StorePage(const Layout& layout, const std::vector<std::string>& hashes, size_t page,
                 std::string_view tenant = {}, size_t skip_key = SIZE_MAX) {
    const std::vector<std::string> keys = layout.KeysFor(hashes[page], page, hashes.size());
    const std::string group = layout.GroupId(hashes[page]);
    std::vector<Event> events;
    for (size_t k = 0; k < keys.size(); ++k) {
      if (k != skip_key) events.push_back(Event{EventKind::kStored, keys[k], group, tenant, "cpu"});
    }
    Apply(events);
  }
  void StoreAll(const Layout& layout, const std::vector<std::string>& hashes, std::string_view tenant = {}) {
    for (size_t page = 0; page < hashes.size(); ++page) StorePage(layout, hashes, page, tenant);
  }
  void Apply(const std::vector<Event>& events) { index_.ApplyBatch(next_sequence_++, events); }
  void Remove(std::string_view key, std::string_view group = {}) {
    Apply({Event{EventKind::kRemoved, key, group, {}, "cpu"}});
  }

  PageQueryResult Check(const Layout& layout, const std::vector<uint32_t>& tokens,
                        const PageQueryHooks* hooks = nullptr) {
    hits_.assign(PagesToCheck(layout, tokens.size(), layout.page_size()), 0xEE);
    return CheckPages(index_, layout, tokens, layout.page_size(), hits_, hooks);
  }
  std::vector<int> Hits() const { return std::vector<int>(hits_.begin(), hits_.end()); }

  Index index_{SGLangIndexOptions()};
  uint64_t next_sequence_ = 1;
  std::vector<uint8_t> hits_;
};

// ---- a page is one instant: keys seen in two lock holds prove nothing ----

// index-semantics.md, "Concurrency": a page is present only if all its keys
// were present at one moment. A tp1 page (keys k0, k1) has k0 stored; a query
// that found k0 in one hold is made to look the rest up after "remove k0,
// store k1": k1 is present then, k0 no longer, and the two never were
// together. Since 1.4 a page is one entry read in one hold; the test keeps
// the window open on every path that prepares a round before answering it.
TEST_F(PageQuery, KeysFoundInTwoLockHoldsNeverMakeAPageHit) {
  const auto layout = Make(Mha(1, 1));
  const std::vector<uint32_t> tokens = Tokens(1);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  const std::vector<std::string> keys = layout->KeysFor(hashes[0], 0, 1);
  ASSERT_EQ(keys.size(), 2u);
  const std::string group = layout->GroupId(hashes[0]);

  // Both tails once seen (a tail never stored would prove the page absent
  // before any lookup: tail_interner.h).
  Apply({Event{EventKind::kStored, keys[1], {}, {}, "cpu"}});
  enum class Entry { kCheckPages, kCheckPageHashes, kCheckPrefix };
  for (const Entry entry : {Entry::kCheckPages, Entry::kCheckPageHashes, Entry::kCheckPrefix}) {
    for (const bool labelled : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "entry " << static_cast<int>(entry) << ", labelled " << labelled);
      index_.Clear();
      const std::string_view label = labelled ? std::string_view(group) : std::string_view();
      Apply({Event{EventKind::kStored, keys[0], label, {}, "cpu"}});
      struct Turn {
        Index* index;
        uint64_t* sequence;
        const std::vector<std::string>* keys;
        std::string_view label;
        int calls = 0;
      } turn{&index_, &next_sequence_, &keys, label};
      PageQueryHooks hooks;
      hooks.user = &turn;
      hooks.before_page_keys = [](void* user, size_t) {
        auto* t = static_cast<Turn*>(user);
        ++t->calls;
        const Event removed{EventKind::kRemoved, (*t->keys)[0], t->label, {}, "cpu"};
        const Event stored{EventKind::kStored, (*t->keys)[1], t->label, {}, "cpu"};
        t->index->ApplyBatch((*t->sequence)++, std::span(&removed, 1));
        t->index->ApplyBatch((*t->sequence)++, std::span(&stored, 1));
      };
      size_t found = 0;
      switch (entry) {
        case Entry::kCheckPages: found = Check(*layout, tokens, &hooks).total_hits; break;
        case Entry::kCheckPageHashes:
          hits_.assign(1, 0xEE);
          found = CheckPageHashes(
                      index_, *layout, 1, [&](size_t) -> std::string_view { return hashes[0]; }, hits_, &hooks)
                      .total_hits;
          break;
        case Entry::kCheckPrefix: found = CheckPrefix(index_, *layout, tokens, kPageSize, &hooks).prefix_hits; break;
      }
      EXPECT_EQ(found, 0u);
      // The hook runs once, before the one hold that reads the page's entry.
      EXPECT_EQ(turn.calls, 1);
    }
  }
}

// ---- every key-derivation variant: exactly its keys hit, one fewer misses ----

struct Variant {
  const char* name;
  LayoutSpec spec;
};

LayoutSpec Tagged(LayoutSpec spec, std::string tag) {
  spec.extra_backend_tag = std::move(tag);
  return spec;
}
LayoutSpec Mla(uint32_t pp) {
  LayoutSpec spec = Mha(4, pp);
  spec.is_mla_model = true;
  return spec;
}
LayoutSpec SplitHeads(uint32_t tp, uint32_t lcm) {
  LayoutSpec spec = Mha(tp, 1);
  spec.should_split_heads = true;
  spec.tp_lcm_size = lcm;
  return spec;
}
LayoutSpec Pools(std::string key_prefix, std::string tag) {
  LayoutSpec spec = Mha(8, 1);
  spec.pools = {PoolSpec{{"__kv", "__idx"}, HitPolicy::kAllPages, 0},
                PoolSpec{{"__swa"}, HitPolicy::kTrailingPages, 2}};
  spec.key_prefix = std::move(key_prefix);
  spec.extra_backend_tag = std::move(tag);
  return spec;
}
LayoutSpec Eagle() {
  LayoutSpec spec = Mha(2, 1);
  spec.is_eagle = true;
  return spec;
}
LayoutSpec InTenant(LayoutSpec spec, std::string tenant) {
  spec.tenant_id = std::move(tenant);
  return spec;
}

class EveryVariant : public PageQuery, public ::testing::WithParamInterface<Variant> {};

TEST_P(EveryVariant, ExactlyTheDerivedKeysHitAndAnyOneMissingMisses) {
  const auto layout = Make(GetParam().spec);
  const std::vector<uint32_t> tokens = Tokens(4, 100, layout->is_eagle());
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, layout->is_eagle());
  ASSERT_EQ(hashes.size(), 4u);
  const std::string tenant = GetParam().spec.tenant_id;
  StoreAll(*layout, hashes, tenant);
  PageQueryResult r = Check(*layout, tokens);
  EXPECT_EQ(Hits(), (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(r.total_hits, 4u);

  // Remove each key of the last page in turn (labelled, as the publisher
  // does): the page misses, then hits again once the key is back.
  const std::vector<std::string> keys = layout->KeysFor(hashes[3], 3, 4);
  ASSERT_FALSE(keys.empty());
  for (const std::string& key : keys) {
    Apply({Event{EventKind::kRemoved, key, layout->GroupId(hashes[3]), tenant, "cpu"}});
    r = Check(*layout, tokens);
    EXPECT_EQ(Hits(), (std::vector<int>{1, 1, 1, 0})) << key;
    Apply({Event{EventKind::kStored, key, layout->GroupId(hashes[3]), tenant, "cpu"}});
  }
  r = Check(*layout, tokens);
  EXPECT_EQ(Hits(), (std::vector<int>{1, 1, 1, 1}));
}

TEST_P(EveryVariant, KeysOfAnotherTenantDoNotCount) {
  const auto layout = Make(GetParam().spec);
  const std::vector<uint32_t> tokens = Tokens(2, 100, layout->is_eagle());
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, layout->is_eagle());
  StoreAll(*layout, hashes, GetParam().spec.tenant_id.empty() ? "elsewhere" : "");
  EXPECT_EQ(Check(*layout, tokens).total_hits, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, EveryVariant,
    ::testing::Values(Variant{"MhaTp1", Mha(1, 1)}, Variant{"MhaTp8", Mha(8, 1)}, Variant{"MhaTp2Pp2", Mha(2, 2)},
                      Variant{"MhaTagged", Tagged(Mha(2, 1), "tag")}, Variant{"MlaPp1", Mla(1)},
                      Variant{"MlaPp2", Mla(2)}, Variant{"MlaTagged", Tagged(Mla(1), "tag")},
                      Variant{"SplitHeadsTpLcm", SplitHeads(2, 4)}, Variant{"PoolsBare", Pools("", "")},
                      Variant{"PoolsTag", Pools("", "tag")}, Variant{"PoolsKeyPrefixAndTag", Pools("kp", "tag")},
                      Variant{"Eagle", Eagle()}, Variant{"Tenant", InTenant(Mha(2, 1), "tenant-a")},
                      // Prefixes that move or keep the split of the key
                      // fingerprints (index/fingerprint.h): a tag of 64 hex
                      // digits splits keys and group ids inside the prefix
                      // (the query hashes whole keys then); one of 63 does not.
                      Variant{"HexTag64", Tagged(Mha(2, 1), std::string(64, 'a'))},
                      Variant{"HexTag63", Tagged(Mha(2, 1), std::string(63, 'F'))},
                      Variant{"PoolsHexKeyPrefix64", Pools(std::string(64, '7'), "")}),
    [](const ::testing::TestParamInfo<Variant>& info) { return std::string(info.param.name); });

// ---- page rules ----

TEST_F(PageQuery, HitsAfterAMissingPageAreReported) {
  const auto layout = Make(Mha(2, 1));
  const std::vector<uint32_t> tokens = Tokens(4);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StorePage(*layout, hashes, 0);
  StorePage(*layout, hashes, 2);
  StorePage(*layout, hashes, 3);
  const PageQueryResult r = Check(*layout, tokens);
  EXPECT_EQ(Hits(), (std::vector<int>{1, 0, 1, 1}));
  EXPECT_EQ(r.n_pages, 4u);
  EXPECT_EQ(r.total_hits, 3u);
  EXPECT_EQ(r.prefix_hits, 1u);
}

TEST_F(PageQuery, APartlyStoredPageMisses) {
  const auto layout = Make(Mha(8, 1));
  const std::vector<uint32_t> tokens = Tokens(2);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StorePage(*layout, hashes, 0);
  StorePage(*layout, hashes, 1, {}, /*skip_key=*/15);
  Check(*layout, tokens);
  EXPECT_EQ(Hits(), (std::vector<int>{1, 0}));
}

TEST_F(PageQuery, APageNeedingNoKeyIsAMiss) {
  LayoutSpec spec = Mha(1, 1);
  spec.pools = {PoolSpec{{"__swa"}, HitPolicy::kTrailingPages, 1}};
  const auto layout = Make(spec);
  const std::vector<uint32_t> tokens = Tokens(3);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StoreAll(*layout, hashes);
  const PageQueryResult r = Check(*layout, tokens);
  EXPECT_EQ(Hits(), (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(r.prefix_hits, 0u);
}

TEST_F(PageQuery, OnlyWholePagesAreAnswered) {
  const auto layout = Make(Mha(1, 1));
  std::vector<uint32_t> tokens = Tokens(2);
  StoreAll(*layout, PageHashesHex(tokens, kPageSize, false));
  tokens.push_back(7);  // a partial third page
  const PageQueryResult r = Check(*layout, tokens);
  EXPECT_EQ(r.n_pages, 2u);
  EXPECT_EQ(r.total_hits, 2u);
  EXPECT_EQ(Check(*layout, {1, 2, 3}).n_pages, 0u);
}

TEST_F(PageQuery, EagleLayoutHashesBigramsAndPlainTokensDoNotMatchIt) {
  const auto eagle = Make(Eagle());
  const auto plain = Make(Mha(2, 1));
  const std::vector<uint32_t> tokens = Tokens(2, 100, /*eagle=*/true);  // 9 tokens: 8 bigrams, 2 pages
  StoreAll(*eagle, PageHashesHex(tokens, kPageSize, true));
  const PageQueryResult r = Check(*eagle, tokens);
  EXPECT_EQ(r.n_pages, 2u);
  EXPECT_EQ(Hits(), (std::vector<int>{1, 1}));
  EXPECT_EQ(Check(*plain, tokens).total_hits, 0u);
}

TEST_F(PageQuery, BlockSizeMismatchAnswersNoPageAndCountsAQuery) {
  const auto layout = Make(Mha(1, 1));
  const std::vector<uint32_t> tokens = Tokens(4);
  StoreAll(*layout, PageHashesHex(tokens, kPageSize, false));
  EXPECT_EQ(PagesToCheck(*layout, tokens.size(), kPageSize * 2), 0u);
  std::vector<uint8_t> hits;
  const PageQueryResult r = CheckPages(index_, *layout, tokens, kPageSize * 2, hits);
  EXPECT_EQ(r.n_pages, 0u);
  EXPECT_EQ(r.total_hits, 0u);
  const Stats s = index_.GetStats();
  EXPECT_EQ(s.queries, 1u);
  EXPECT_EQ(s.pages_checked, 0u);
  EXPECT_EQ(s.page_hits, 0u);
}

TEST_F(PageQuery, TrailingPoolKeysAreNeededOnlyNearTheEnd) {
  LayoutSpec spec = Mha(1, 1);
  spec.pools = {PoolSpec{{"__kv"}, HitPolicy::kAllPages, 0}, PoolSpec{{"__swa"}, HitPolicy::kTrailingPages, 1}};
  const auto layout = Make(spec);
  const std::vector<uint32_t> tokens = Tokens(3);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  // Stored as a 3-page request: the sliding-window key exists for the last page only.
  StoreAll(*layout, hashes);
  Check(*layout, tokens);
  EXPECT_EQ(Hits(), (std::vector<int>{1, 1, 1}));
  // The first two pages as a request of their own: page 1 is now the last
  // page and needs its __swa key, which was never stored.
  const std::vector<uint32_t> shorter(tokens.begin(), tokens.begin() + 2 * kPageSize);
  Check(*layout, shorter);
  EXPECT_EQ(Hits(), (std::vector<int>{1, 0}));
}

TEST_F(PageQuery, ALastPageNeedsItsTrailingPoolKeyThoughAnEarlierQueryHitIt) {
  LayoutSpec spec = Mha(1, 1);
  spec.pools = {PoolSpec{{"__kv"}, HitPolicy::kAllPages, 0}, PoolSpec{{"__swa"}, HitPolicy::kTrailingPages, 1}};
  const auto layout = Make(spec);
  const std::vector<uint32_t> tokens = Tokens(3);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StoreAll(*layout, hashes);
  // Twice: 1.3 verified pages 0 and 1 here, without page 1's __swa key.
  Check(*layout, tokens);
  {
    const PageQueryResult answered = Check(*layout, tokens);
    EXPECT_EQ(answered.fast_path, answered.total_hits);  // 1.4: every hit reads its entry
  }
  // Page 1 has no __swa key: as the last page of a shorter request it
  // must miss, whatever an earlier query answered for it.
  const std::vector<uint32_t> shorter(tokens.begin(), tokens.begin() + 2 * kPageSize);
  const PageQueryResult r = Check(*layout, shorter);
  EXPECT_EQ(Hits(), (std::vector<int>{1, 0}));
  EXPECT_EQ(r.fast_path, r.total_hits);
}

// ---- one page entry per hit (the fast_path count) ----

TEST_F(PageQuery, EveryHitReadsOnePageEntryAndIsCounted) {
  const auto layout = Make(Mha(8, 1));
  const std::vector<uint32_t> tokens = Tokens(5);
  StoreAll(*layout, PageHashesHex(tokens, kPageSize, false));
  PageQueryResult r = Check(*layout, tokens);
  EXPECT_EQ(r.total_hits, 5u);
  EXPECT_EQ(r.fast_path, r.total_hits);
  r = Check(*layout, tokens);
  EXPECT_EQ(r.total_hits, 5u);
  EXPECT_EQ(r.prefix_hits, 5u);
  EXPECT_EQ(r.fast_path, r.total_hits);
  const Stats s = index_.GetStats();
  EXPECT_EQ(s.queries, 2u);
  EXPECT_EQ(s.pages_checked, 10u);
  EXPECT_EQ(s.page_hits, 10u);
  EXPECT_EQ(s.fast_path_hits, 10u);
  EXPECT_EQ(s.verified_groups, 0u);  // nothing to verify since 1.4
}

TEST_F(PageQuery, KeysStoredWithoutAGroupHitFromTheirPageEntry) {
  const auto layout = Make(Mha(2, 1));
  const std::vector<uint32_t> tokens = Tokens(2);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  std::vector<Event> events;
  std::vector<std::string> keys;
  for (size_t page = 0; page < 2; ++page) {
    for (const std::string& key : layout->KeysFor(hashes[page], page, 2)) keys.push_back(key);
  }
  for (const std::string& key : keys) events.push_back(Event{EventKind::kStored, key, {}, {}, "cpu"});
  Apply(events);
  EXPECT_EQ(Check(*layout, tokens).total_hits, 2u);
  const PageQueryResult r = Check(*layout, tokens);
  EXPECT_EQ(r.total_hits, 2u);
  EXPECT_EQ(r.fast_path, r.total_hits);
  EXPECT_EQ(index_.GetStats().verified_groups, 0u);
}

// A page one of whose keys was stored again under no group, or under another
// page's group: still a hit (1.3 proved such a page by its keys each time;
// since 1.4 group ids do not decide presence).
TEST_F(PageQuery, APageWithAKeyStoredUnderNoOrAnotherGroupIsStillAHit) {
  const auto layout = Make(Mha(2, 1));
  const std::vector<uint32_t> tokens = Tokens(3);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StoreAll(*layout, hashes);
  Apply({Event{EventKind::kStored, layout->KeysFor(hashes[0], 0, 3)[1], {}, {}, "cpu"},
         Event{EventKind::kStored, layout->KeysFor(hashes[1], 1, 3)[2], layout->GroupId(hashes[2]), {}, "cpu"}});
  for (int round = 0; round < 2; ++round) {
    const PageQueryResult r = Check(*layout, tokens);
    EXPECT_EQ(Hits(), (std::vector<int>{1, 1, 1})) << round;
    EXPECT_EQ(r.fast_path, r.total_hits) << round;  // 1.4: every hit reads its entry
  }
}

TEST_F(PageQuery, UnlabelledRemovalMissesOnlyItsOwnPage) {
  const auto layout = Make(Mha(2, 1));
  const std::vector<uint32_t> tokens = Tokens(3);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StoreAll(*layout, hashes);
  Check(*layout, tokens);
  {
    const PageQueryResult answered = Check(*layout, tokens);
    ASSERT_EQ(answered.fast_path, answered.total_hits);  // 1.4: every hit reads its entry
  }
  Remove(layout->KeysFor(hashes[1], 1, 3)[1]);  // no group label
  const PageQueryResult r = Check(*layout, tokens);
  EXPECT_EQ(Hits(), (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(r.fast_path, r.total_hits);
  // The key back, under its group: proven once by its keys, then fast again.
  StorePage(*layout, hashes, 1);
  {
    const PageQueryResult answered = Check(*layout, tokens);
    EXPECT_EQ(answered.fast_path, answered.total_hits);  // 1.4: every hit reads its entry
  }
  {
    const PageQueryResult answered = Check(*layout, tokens);
    EXPECT_EQ(answered.fast_path, answered.total_hits);  // 1.4: every hit reads its entry
  }
}

// The case: a pools layout whose key_prefix differs from its group
// ids' tag, so its keys never look like their group to anyone parsing them.
TEST_F(PageQuery, PoolsWithAKeyPrefixKeepHitsOfPagesNotRemoved) {
  LayoutSpec spec;
  spec.page_size = kPageSize;
  spec.key_prefix = "llama";
  spec.pools = {PoolSpec{{"__k", "__v"}, HitPolicy::kAllPages, 0}};
  const auto layout = Make(spec);
  const std::vector<uint32_t> tokens = Tokens(3);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StoreAll(*layout, hashes);
  Check(*layout, tokens);
  {
    const PageQueryResult answered = Check(*layout, tokens);
    ASSERT_EQ(answered.fast_path, answered.total_hits);  // 1.4: every hit reads its entry
  }
  Remove(layout->KeysFor(hashes[0], 0, 3)[0], layout->GroupId(hashes[0]));
  Remove(layout->KeysFor(hashes[1], 1, 3)[1]);
  const PageQueryResult r = Check(*layout, tokens);
  EXPECT_EQ(Hits(), (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(r.fast_path, r.total_hits);
}

TEST_F(PageQuery, MislabelledRemovalIsAMissForItsPageAndTouchesNoUnrelatedPage) {
  const auto layout = Make(Mha(2, 1));
  const std::vector<uint32_t> tokens = Tokens(4);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StoreAll(*layout, hashes);
  Check(*layout, tokens);
  {
    const PageQueryResult answered = Check(*layout, tokens);
    ASSERT_EQ(answered.fast_path, answered.total_hits);  // 1.4: every hit reads its entry
  }
  // A key of page 1 removed under page 2's group id (a publisher bug).
  Remove(layout->KeysFor(hashes[1], 1, 4)[0], layout->GroupId(hashes[2]));
  PageQueryResult r = Check(*layout, tokens);
  EXPECT_EQ(Hits(), (std::vector<int>{1, 0, 1, 1}));
  EXPECT_EQ(r.fast_path, r.total_hits);
  r = Check(*layout, tokens);
  EXPECT_EQ(r.fast_path, r.total_hits);
  EXPECT_EQ(Hits(), (std::vector<int>{1, 0, 1, 1}));
}

TEST_F(PageQuery, LabelledRemovalMissesOnlyItsOwnPage) {
  const auto layout = Make(Mha(2, 1));
  const std::vector<uint32_t> tokens = Tokens(3);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StoreAll(*layout, hashes);
  Check(*layout, tokens);
  Remove(layout->KeysFor(hashes[1], 1, 3)[0], layout->GroupId(hashes[1]));
  const PageQueryResult r = Check(*layout, tokens);
  EXPECT_EQ(Hits(), (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(r.fast_path, r.total_hits);
}

TEST_F(PageQuery, StoringAPagesObjectsAgainKeepsItAHit) {
  const auto layout = Make(Mha(2, 1));
  const std::vector<uint32_t> tokens = Tokens(2);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StoreAll(*layout, hashes);
  Check(*layout, tokens);
  StorePage(*layout, hashes, 1);  // the same objects again, e.g. a new replica
  {
    const PageQueryResult answered = Check(*layout, tokens);
    EXPECT_EQ(answered.fast_path, answered.total_hits);  // 1.4: every hit reads its entry
  }
  {
    const PageQueryResult answered = Check(*layout, tokens);
    EXPECT_EQ(answered.fast_path, answered.total_hits);  // 1.4: every hit reads its entry
  }
}

TEST_F(PageQuery, ALayoutNeedingMoreSlotsMissesUntilTheyAreStored) {
  const auto tp1 = Make(Mha(1, 1));  // needs _0_k, _0_v
  const auto tp2 = Make(Mha(2, 1));  // needs _0_k, _0_v, _1_k, _1_v
  const std::vector<uint32_t> tokens = Tokens(2);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  // Only the tp1 objects are stored; both layouts name the same groups.
  StoreAll(*tp1, hashes);
  Check(*tp1, tokens);
  {
    const PageQueryResult answered = Check(*tp1, tokens);
    ASSERT_EQ(answered.fast_path, answered.total_hits);  // 1.4: every hit reads its entry
  }
  // tp2 needs slots tp1's pages do not have: a miss.
  PageQueryResult r = Check(*tp2, tokens);
  EXPECT_EQ(r.total_hits, 0u);
  EXPECT_EQ(r.fast_path, r.total_hits);
  // Once tp2's objects are stored too, tp2 proves the pages by their keys.
  StoreAll(*tp2, hashes);
  r = Check(*tp2, tokens);
  EXPECT_EQ(r.total_hits, 2u);
  EXPECT_EQ(r.fast_path, r.total_hits);
  {
    const PageQueryResult answered = Check(*tp2, tokens);
    EXPECT_EQ(answered.fast_path, answered.total_hits);  // 1.4: every hit reads its entry
  }
}

// The thread keeps tp2's plan while tp1 is queried (QueryPlans keeps a set
// per layout): the slots numbered meanwhile make it stale, and tp2's next
// query makes it current again before it answers.
TEST_F(PageQuery, APlanKeptWhileAnotherLayoutIsQueriedSeesSlotsNumberedMeanwhile) {
  const auto tp1 = Make(Mha(1, 1));
  const auto tp2 = Make(Mha(2, 1));
  const std::vector<uint32_t> tokens = Tokens(2);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StoreAll(*tp1, hashes);
  EXPECT_EQ(Check(*tp2, tokens).total_hits, 0u);  // its plan: _1_k and _1_v never stored
  EXPECT_EQ(Check(*tp1, tokens).total_hits, 2u);
  StoreAll(*tp2, hashes);  // numbers _1_k and _1_v
  EXPECT_EQ(Check(*tp1, tokens).total_hits, 2u);
  const PageQueryResult r = Check(*tp2, tokens);
  EXPECT_EQ(r.total_hits, 2u);
  EXPECT_EQ(r.fast_path, r.total_hits);
}

// Queries nested in one on its thread (as from a log callback), between
// its rounds: one of its layout, then more layouts than the thread keeps
// plan sets for (the last replaces the least recently used set not in
// use). Each takes plans of its own, never the outer query's (I48): had
// tp1's plan replaced tp2's under the outer query, page 2, whose tp1
// objects alone are stored, would answer a hit for tp2.
TEST_F(PageQuery, QueriesNestedInAQueryNeverTakeItsPlans) {
  const auto tp2 = Make(Mha(2, 1));
  std::vector<std::unique_ptr<const Layout>> others;  // handles of tp1 (needs a subset of tp2's slots)
  for (size_t i = 0; i < QueryPlans::kSetsPerThread; ++i) others.push_back(Make(Mha(1, 1)));
  const std::vector<uint32_t> tokens = Tokens(3);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StoreAll(*others[0], hashes);
  StoreAll(*tp2, {hashes[0], hashes[1]});  // tp2: pages 0 and 1 only
  struct Nested {
    Index* index;
    std::vector<const Layout*> layouts;
    const std::vector<uint32_t>* tokens;
    std::vector<std::vector<uint8_t>> hits;
    int calls = 0;
    static void Run(void* user, size_t page) {
      auto* self = static_cast<Nested*>(user);
      if (page != 1 || self->calls++ > 0) return;
      for (const Layout* layout : self->layouts) {
        self->hits.emplace_back(3, 0xEE);
        CheckPages(*self->index, *layout, *self->tokens, kPageSize, self->hits.back());
      }
    }
  };
  Check(*tp2, tokens);  // the thread's plan for tp2, kept: the outer query starts with it made
  Nested nested{&index_, {tp2.get()}, &tokens};
  for (const auto& other : others) nested.layouts.push_back(other.get());
  PageQueryHooks hooks{&Nested::Run, &nested};
  const PageQueryResult outer = Check(*tp2, tokens, &hooks);
  ASSERT_EQ(nested.calls, 1);
  EXPECT_EQ(Hits(), (std::vector<int>{1, 1, 0}));
  EXPECT_EQ(outer.total_hits, 2u);
  ASSERT_EQ(nested.hits.size(), others.size() + 1);
  EXPECT_EQ(nested.hits[0], (std::vector<uint8_t>{1, 1, 0})) << "tp2, nested";
  for (size_t i = 1; i < nested.hits.size(); ++i) {
    EXPECT_EQ(nested.hits[i], (std::vector<uint8_t>{1, 1, 1})) << "tp1 handle " << i << ", nested";
  }
  EXPECT_EQ(Check(*tp2, tokens).total_hits, 2u) << "after the nesting";
}

TEST_F(PageQuery, AnotherHandleOfTheSameLayoutAnswersTheSame) {
  const auto first = Make(Mha(2, 1));
  const auto second = Make(Mha(2, 1));
  const std::vector<uint32_t> tokens = Tokens(2);
  StoreAll(*first, PageHashesHex(tokens, kPageSize, false));
  Check(*first, tokens);
  {
    const PageQueryResult answered = Check(*second, tokens);
    EXPECT_EQ(answered.fast_path, answered.total_hits);  // 1.4: every hit reads its entry
  }
}

// ---- writes between preparing a round and answering it ----

// Applies `events` as one batch once page `page`'s round is prepared (its
// page keys computed, before the hold that answers it), the first time
// only: the window between preparing and answering.
struct Interleave {
  Index* index;
  uint64_t* next_sequence;
  size_t page;
  std::vector<Event> events;
  int calls = 0;
  static void AfterProbe(void* user, size_t page) {
    auto* self = static_cast<Interleave*>(user);
    if (page != self->page || self->calls++ > 0) return;
    self->index->ApplyBatch((*self->next_sequence)++, self->events);
  }
};

TEST_F(PageQuery, StoredEventBetweenPreparingAndAnsweringKeepsTheHit) {
  const auto layout = Make(Mha(2, 1));
  const std::vector<uint32_t> tokens = Tokens(3);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StoreAll(*layout, hashes);
  const std::string group = layout->GroupId(hashes[1]);
  const std::string new_object = hashes[1] + "_extra";
  Interleave interleave{&index_, &next_sequence_, 1, {Event{EventKind::kStored, new_object, group, {}, "cpu"}}};
  PageQueryHooks hooks{&Interleave::AfterProbe, &interleave};
  const PageQueryResult r = Check(*layout, tokens, &hooks);
  EXPECT_EQ(interleave.calls, 1);
  // The page was proven by its keys: still a hit.
  EXPECT_EQ(Hits(), (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(r.total_hits, 3u);
  // Later queries read the page entry, the new object in it.
  {
    const PageQueryResult answered = Check(*layout, tokens);
    EXPECT_EQ(answered.fast_path, answered.total_hits);  // 1.4: every hit reads its entry
  }
  {
    const PageQueryResult answered = Check(*layout, tokens);
    EXPECT_EQ(answered.fast_path, answered.total_hits);  // 1.4: every hit reads its entry
  }
}

TEST_F(PageQuery, KeyStoredUnderAnotherGroupBetweenPreparingAndAnsweringKeepsTheHit) {
  const auto layout = Make(Mha(2, 1));
  const std::vector<uint32_t> tokens = Tokens(2);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StoreAll(*layout, hashes);
  const std::string key = layout->KeysFor(hashes[0], 0, 2)[2];
  Interleave interleave{&index_, &next_sequence_, 0, {Event{EventKind::kStored, key, "another-group", {}, "cpu"}}};
  PageQueryHooks hooks{&Interleave::AfterProbe, &interleave};
  Check(*layout, tokens, &hooks);
  EXPECT_EQ(Hits(), (std::vector<int>{1, 1}));
}

TEST_F(PageQuery, UnrelatedRemovalBetweenPreparingAndAnsweringTouchesNoPage) {
  const auto layout = Make(Mha(2, 1));
  // 17 pages: the query prepares pages 0-15 together (one round), and page
  // 16 in the next round, after the removal lands. The removed key is in no
  // page: every page stays a hit.
  constexpr size_t kPages = 17;
  const std::vector<uint32_t> tokens = Tokens(kPages);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StoreAll(*layout, hashes);
  Apply({Event{EventKind::kStored, "unrelated", {}, {}, "cpu"}});
  Interleave interleave{&index_, &next_sequence_, 0, {Event{EventKind::kRemoved, "unrelated", {}, {}, "cpu"}}};
  PageQueryHooks hooks{&Interleave::AfterProbe, &interleave};
  Check(*layout, tokens, &hooks);
  EXPECT_EQ(Hits(), std::vector<int>(kPages, 1));
}

TEST_F(PageQuery, RemovalBetweenPreparingAndAnsweringIsAMiss) {
  const auto layout = Make(Mha(2, 1));
  const std::vector<uint32_t> tokens = Tokens(2);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StoreAll(*layout, hashes);
  const std::string key = layout->KeysFor(hashes[1], 1, 2)[3];
  const std::string group = layout->GroupId(hashes[1]);
  Interleave interleave{&index_, &next_sequence_, 1, {Event{EventKind::kRemoved, key, group, {}, "cpu"}}};
  PageQueryHooks hooks{&Interleave::AfterProbe, &interleave};
  Check(*layout, tokens, &hooks);
  EXPECT_EQ(Hits(), (std::vector<int>{1, 0}));
}

// ---- the prefix query ----

TEST_F(PageQuery, PrefixIsTheLeadingRunOfCheckPagesForEveryPattern) {
  const auto layout = Make(Mha(2, 1));
  const std::vector<uint32_t> tokens = Tokens(5);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  // Stored pages as a bit mask over 5 pages: every pattern, including hits
  // after a miss (which the prefix must not count).
  for (uint32_t mask = 0; mask < 32; ++mask) {
    Index index(SGLangIndexOptions());
    uint64_t sequence = 1;
    for (size_t page = 0; page < 5; ++page) {
      if ((mask >> page & 1) == 0) continue;
      std::vector<Event> events;
      const std::vector<std::string> keys = layout->KeysFor(hashes[page], page, 5);
      const std::string group = layout->GroupId(hashes[page]);
      for (const std::string& key : keys) events.push_back(Event{EventKind::kStored, key, group, {}, "cpu"});
      index.ApplyBatch(sequence++, events);
    }
    size_t leading = 0;
    while (leading < 5 && (mask >> leading & 1) != 0) ++leading;
    for (int round = 0; round < 2; ++round) {  // exact path, then fast path
      const PageQueryResult r = CheckPrefix(index, *layout, tokens, kPageSize);
      EXPECT_EQ(r.prefix_hits, leading) << mask;
      EXPECT_EQ(r.total_hits, leading) << mask;
      EXPECT_EQ(r.n_pages, 5u);
      EXPECT_EQ(r.pages_examined, std::min<size_t>(leading + 1, 5)) << mask;
      EXPECT_EQ(r.fast_path, r.total_hits) << round;  // 1.4: every hit reads its entry
    }
    std::vector<uint8_t> hits(5);
    EXPECT_EQ(CheckPages(index, *layout, tokens, kPageSize, hits).prefix_hits, leading) << mask;
  }
}

TEST_F(PageQuery, PrefixStopsAtTheFirstMissHashingOnePageFurtherAndLookingUpNone) {
  const auto layout = Make(Mha(2, 1));
  const std::vector<uint32_t> tokens = Tokens(169);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  for (size_t page = 3; page < 169; ++page) StorePage(*layout, hashes, page);  // page 2 is missing
  StorePage(*layout, hashes, 0);
  StorePage(*layout, hashes, 1);
  PageDigestMemo& memo = *PageDigestMemo::ForThisThread();
  memo.Clear();
  const uint64_t hashed_before = memo.pages_hashed();
  const uint64_t pages_before = index_.GetStats().pages_checked;
  const PageQueryResult r = CheckPrefix(index_, *layout, tokens, kPageSize);
  EXPECT_EQ(r.prefix_hits, 2u);
  EXPECT_EQ(r.pages_examined, 3u);
  // Three pages were checked, none past the miss; four hashed: the page
  // after the miss was hashed while the miss's entry was on its way.
  EXPECT_EQ(memo.pages_hashed() - hashed_before, 4u);
  EXPECT_EQ(index_.GetStats().pages_checked - pages_before, 3u);
  EXPECT_EQ(index_.GetStats().page_hits, 2u);
}

// Wherever the first miss is, check_prefix looks up the pages up to it and
// hashes one page further (the next page is hashed while a page's entry is
// on its way), except past page 0, which is checked before anything else
// is hashed, and past the prompt's last page.
TEST_F(PageQuery, PrefixHashesAtMostOnePagePastTheMissAndNoneAfterAFirstPageMiss) {
  const auto layout = Make(Mha(2, 1));
  constexpr size_t kPagesInPrompt = 6;
  const std::vector<uint32_t> tokens = Tokens(kPagesInPrompt, 6000);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  PageDigestMemo& memo = *PageDigestMemo::ForThisThread();
  for (size_t miss = 0; miss <= kPagesInPrompt; ++miss) {  // kPagesInPrompt: no miss
    index_.Clear();
    for (size_t page = 0; page < kPagesInPrompt; ++page) {
      if (page != miss) StorePage(*layout, hashes, page);
    }
    memo.Clear();
    const uint64_t hashed_before = memo.pages_hashed();
    const uint64_t checked_before = index_.GetStats().pages_checked;
    const PageQueryResult r = CheckPrefix(index_, *layout, tokens, kPageSize);
    const size_t examined = std::min(miss + 1, kPagesInPrompt);
    EXPECT_EQ(r.prefix_hits, miss) << miss;
    EXPECT_EQ(r.pages_examined, examined) << miss;
    EXPECT_EQ(index_.GetStats().pages_checked - checked_before, examined) << miss;
    EXPECT_EQ(memo.pages_hashed() - hashed_before, miss == 0 ? 1 : std::min(miss + 2, kPagesInPrompt)) << miss;
  }
}

TEST_F(PageQuery, PrefixOfAnUnknownPromptHashesOnePage) {
  const auto layout = Make(Mha(8, 1));
  const std::vector<uint32_t> tokens = Tokens(169, 5000);
  PageDigestMemo& memo = *PageDigestMemo::ForThisThread();
  memo.Clear();
  const uint64_t hashed_before = memo.pages_hashed();
  const uint64_t lookups_before = memo.hits() + memo.misses();
  const PageQueryResult r = CheckPrefix(index_, *layout, tokens, kPageSize);
  EXPECT_EQ(r.prefix_hits, 0u);
  EXPECT_EQ(r.pages_examined, 1u);
  // One SHA-256, and no memo lookup: a request that ends at its first page
  // is not worth memoising.
  EXPECT_EQ(memo.pages_hashed() - hashed_before, 1u);
  EXPECT_EQ(memo.hits() + memo.misses() - lookups_before, 0u);
}

TEST_F(PageQuery, PrefixFindsKeysStoredWithoutAGroup) {
  // No group state (unlabelled stores): the page is still present, by its keys.
  const auto layout = Make(Mha(2, 1));
  const std::vector<uint32_t> tokens = Tokens(2);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  std::vector<std::string> keys = layout->KeysFor(hashes[0], 0, 2);
  for (const std::string& key : layout->KeysFor(hashes[1], 1, 2)) keys.push_back(key);
  std::vector<Event> events;
  for (const std::string& key : keys) events.push_back(Event{EventKind::kStored, key, {}, {}, "cpu"});
  Apply(events);
  EXPECT_EQ(CheckPrefix(index_, *layout, tokens, kPageSize).prefix_hits, 2u);
  Remove(layout->KeysFor(hashes[0], 0, 2)[1]);
  EXPECT_EQ(CheckPrefix(index_, *layout, tokens, kPageSize).prefix_hits, 0u);
}

// Keys stored again under no group or another page's group: the page entry
// holds slots, not groups, so the page is still whole.
TEST_F(PageQuery, PrefixHitsAPageWhateverGroupsItsKeysWereStoredUnder) {
  const auto layout = Make(Mha(2, 1));
  const std::vector<uint32_t> tokens = Tokens(3);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StoreAll(*layout, hashes);
  Apply({Event{EventKind::kStored, layout->KeysFor(hashes[0], 0, 3)[0], {}, {}, "cpu"},
         Event{EventKind::kStored, layout->KeysFor(hashes[1], 1, 3)[0], layout->GroupId(hashes[2]), {}, "cpu"}});
  for (int round = 0; round < 2; ++round) {
    const PageQueryResult r = CheckPrefix(index_, *layout, tokens, kPageSize);
    EXPECT_EQ(r.prefix_hits, 3u) << round;
    EXPECT_EQ(r.fast_path, r.total_hits) << round;  // 1.4: every hit reads its entry
  }
}

TEST_F(PageQuery, PrefixWithAMismatchedBlockSizeIsZeroAndCountedAsAQuery) {
  const auto layout = Make(Mha(2, 1));
  const std::vector<uint32_t> tokens = Tokens(2);
  StoreAll(*layout, PageHashesHex(tokens, kPageSize, false));
  const PageQueryResult r = CheckPrefix(index_, *layout, tokens, kPageSize * 2);
  EXPECT_EQ(r.prefix_hits, 0u);
  EXPECT_EQ(r.n_pages, 0u);
  EXPECT_EQ(index_.GetStats().queries, 1u);
  EXPECT_EQ(index_.GetStats().pages_checked, 0u);
}

// ---- page hashes supplied by the caller ----
// (Their shape is checked at the C boundary: capi_pages_test.)

TEST_F(PageQuery, PageHashesGiveTheSameAnswersAsTokens) {
  const auto layout = Make(Mha(2, 1));
  const std::vector<uint32_t> tokens = Tokens(4);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  StorePage(*layout, hashes, 0);
  StorePage(*layout, hashes, 2);
  std::vector<uint8_t> hits(4, 0xEE);
  const PageQueryResult r = CheckPageHashes(
      index_, *layout, hashes.size(), [&](size_t page) -> std::string_view { return hashes[page]; }, hits);
  EXPECT_EQ(std::vector<int>(hits.begin(), hits.end()), (std::vector<int>{1, 0, 1, 0}));
  EXPECT_EQ(r.total_hits, 2u);
  EXPECT_EQ(r.prefix_hits, 1u);
  Check(*layout, tokens);
  EXPECT_EQ(Hits(), (std::vector<int>{1, 0, 1, 0}));
}

}  // namespace
}  // namespace sci

namespace sci {
namespace {

// An index made without SGLang's options (IndexOptions::head_group_prefix
// empty, which 1.3 needed to count stray keys) answers SGLang queries the
// same: pages loaded from a snapshot (keys under no group) are hits.
TEST(PageQueryOnAPlainIndex, PagesWithoutAGroupAreFoundByTheirKeys) {
  Index index;  // no head_group_prefix
  const auto layout = Make(Mha(8, 1));
  const std::vector<uint32_t> tokens = Tokens(3);
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  std::vector<std::string> keys;
  for (size_t page = 0; page < hashes.size(); ++page) {
    for (std::string& key : layout->KeysFor(hashes[page], page, hashes.size())) keys.push_back(std::move(key));
  }
  const std::vector<std::string_view> views(keys.begin(), keys.end());
  index.LoadKeys(views);
  std::vector<uint8_t> hits(3, 9);
  const PageQueryResult result = CheckPages(index, *layout, tokens, kPageSize, hits);
  EXPECT_EQ(result.total_hits, 3u);
  EXPECT_EQ(CheckPrefix(index, *layout, tokens, kPageSize).prefix_hits, 3u);
  EXPECT_EQ(index.GetStats().stray_keys, 0u) << "no convention, no stray";
}

}  // namespace
}  // namespace sci
