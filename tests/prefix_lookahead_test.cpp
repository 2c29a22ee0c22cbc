// check_prefix's one-page look-ahead (page_query.cpp, PageQuery::Prefix):
// from page 1 on, a page's entry line is prefetched and the next page
// hashed before the page is answered. What it must keep: the answer of
// check_pages' leading run, every counter, at most one page hashed past
// the miss (none past a first page that misses), each page answered in one
// hold after its hooks, and the memo's rule. Written by an outside review
// of the change (its mutants: the look-ahead starting at page 0, a page
// answered in the prefetch hold with its hooks after, the wrong slot).
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "index/index.h"
#include "query/digest_memo.h"
#include "sglang/layout.h"
#include "sglang/page_hash.h"
#include "sglang/page_query.h"

namespace sci {
namespace {

constexpr uint32_t kPageSize = 4;

LayoutSpec Mha(uint32_t tp) {
  LayoutSpec spec;
  spec.page_size = kPageSize;
  spec.tp_size = tp;
  return spec;
}
std::unique_ptr<const Layout> Make(const LayoutSpec& spec) {
  std::string error;
  auto layout = Layout::Create(spec, &error);
  EXPECT_NE(layout, nullptr) << error;
  return layout;
}
std::vector<uint32_t> Tokens(size_t pages, uint32_t first, bool eagle) {
  std::vector<uint32_t> t(pages * kPageSize + (eagle ? 1 : 0));
  std::iota(t.begin(), t.end(), first);
  return t;
}

struct V {
  const char* name;
  LayoutSpec spec;
};
std::vector<V> Variants() {
  std::vector<V> v;
  v.push_back({"tp2", Mha(2)});
  v.push_back({"tp8", Mha(8)});
  LayoutSpec pools = Mha(8);
  pools.pools = {PoolSpec{{"__kv", "__idx"}, HitPolicy::kAllPages, 0},
                 PoolSpec{{"__swa"}, HitPolicy::kTrailingPages, 2}};
  v.push_back({"pools_trailing2", pools});
  LayoutSpec only_trailing = Mha(1);
  only_trailing.pools = {PoolSpec{{"__swa"}, HitPolicy::kTrailingPages, 2}};
  v.push_back({"only_trailing2", only_trailing});
  LayoutSpec eagle = Mha(2);
  eagle.is_eagle = true;
  v.push_back({"eagle", eagle});
  LayoutSpec mla = Mha(4);
  mla.is_mla_model = true;
  v.push_back({"mla", mla});
  return v;
}

void StorePage(Index& index, uint64_t& seq, const Layout& layout, const std::vector<std::string>& hashes,
               size_t page, bool labelled) {
  const auto keys = layout.KeysFor(hashes[page], page, hashes.size());
  const std::string group = labelled ? layout.GroupId(hashes[page]) : std::string();
  std::vector<Event> events;
  for (const auto& k : keys) events.push_back(Event{EventKind::kStored, k, group, {}, "cpu"});
  if (!events.empty()) index.ApplyBatch(seq++, events);
}

// Against CheckPages: every layout, prompts of 0..7 pages, every stored mask,
// memo cold / warm: CheckPrefix == leading run of CheckPages, with the
// counters and the hashing budget.
TEST(PrefixLookAhead, PrefixMatchesCheckPagesEverywhere) {
  PageDigestMemo& memo = *PageDigestMemo::ForThisThread();
  for (const V& v : Variants()) {
    const auto layout = Make(v.spec);
    for (size_t n = 0; n <= 7; ++n) {
      const auto tokens = Tokens(n, 1000 + 37 * n, layout->is_eagle());
      const auto hashes = PageHashesHex(tokens, kPageSize, layout->is_eagle());
      ASSERT_EQ(hashes.size(), n);
      for (uint32_t mask = 0; mask < (1u << n); ++mask) {
        Index index(SGLangIndexOptions());
        uint64_t seq = 1;
        for (size_t p = 0; p < n; ++p)
          if (mask >> p & 1) StorePage(index, seq, *layout, hashes, p, (mask >> 1) & 1);
        std::vector<uint8_t> hits(n + 1, 0xEE);
        const PageQueryResult all = CheckPages(index, *layout, tokens, kPageSize, hits);
        size_t lead = 0;
        while (lead < n && hits[lead]) ++lead;
        ASSERT_EQ(all.prefix_hits, lead);
        for (int round = 0; round < 4; ++round) {  // 0: memo cleared; 1..3: memo warming up
          if (round == 0) memo.Clear();
          const uint64_t hashed = memo.pages_hashed();
          const uint64_t checked = index.GetStats().pages_checked;
          const PageQueryResult r = CheckPrefix(index, *layout, tokens, kPageSize);
          SCOPED_TRACE(::testing::Message() << v.name << " n=" << n << " mask=" << mask << " round=" << round);
          EXPECT_EQ(r.n_pages, n);
          EXPECT_EQ(r.prefix_hits, lead);
          EXPECT_EQ(r.total_hits, lead);
          EXPECT_EQ(r.fast_path, r.total_hits);
          EXPECT_EQ(r.pages_examined, std::min(lead + 1, n));
          EXPECT_EQ(r.prefix_tokens, all.prefix_tokens);
          EXPECT_EQ(index.GetStats().pages_checked - checked, std::min(lead + 1, n));
          if (round == 0) {
            const size_t want = n == 0 ? 0 : lead == 0 ? 1 : std::min(lead + 2, n);
            EXPECT_EQ(memo.pages_hashed() - hashed, want);
          }
        }
      }
    }
  }
}

// The hook of page p runs after page p+1 was hashed and page p's entry
// prefetched in an earlier hold: the page is still answered in one hold.
// KeysFoundInTwoLockHoldsNeverMakeAPageHit, on pages 1..3 of a 5-page
// prompt (the project's test only uses a 1-page prompt, which never
// reaches the look-ahead).
TEST(PrefixLookAhead, TwoInstantsOnLookAheadPagesNeverHit) {
  const auto layout = Make(Mha(1));
  const auto tokens = Tokens(5, 77, false);
  const auto hashes = PageHashesHex(tokens, kPageSize, false);
  for (size_t target = 1; target < 4; ++target) {
    for (bool labelled : {false, true}) {
      Index index(SGLangIndexOptions());
      uint64_t seq = 1;
      for (size_t p = 0; p < 5; ++p)
        if (p != target) StorePage(index, seq, *layout, hashes, p, labelled);
      const auto keys = layout->KeysFor(hashes[target], target, 5);
      ASSERT_EQ(keys.size(), 2u);
      const std::string label = labelled ? layout->GroupId(hashes[target]) : std::string();
      index.ApplyBatch(seq++, std::vector<Event>{Event{EventKind::kStored, keys[1], {}, {}, "cpu"}});
      index.ApplyBatch(seq++, std::vector<Event>{Event{EventKind::kRemoved, keys[1], {}, {}, "cpu"}});
      index.ApplyBatch(seq++, std::vector<Event>{Event{EventKind::kStored, keys[0], label, {}, "cpu"}});
      struct Turn {
        Index* index;
        uint64_t* seq;
        const std::vector<std::string>* keys;
        std::string label;
        size_t target;
        int calls = 0;
        std::vector<size_t> pages;
      } turn{&index, &seq, &keys, label, target};
      PageQueryHooks hooks;
      hooks.user = &turn;
      hooks.before_page_keys = [](void* user, size_t page) {
        auto* t = static_cast<Turn*>(user);
        t->pages.push_back(page);
        if (page != t->target) return;
        ++t->calls;
        const Event removed{EventKind::kRemoved, (*t->keys)[0], t->label, {}, "cpu"};
        const Event stored{EventKind::kStored, (*t->keys)[1], t->label, {}, "cpu"};
        t->index->ApplyBatch((*t->seq)++, std::span(&removed, 1));
        t->index->ApplyBatch((*t->seq)++, std::span(&stored, 1));
      };
      const PageQueryResult r = CheckPrefix(index, *layout, tokens, kPageSize, &hooks);
      EXPECT_EQ(r.prefix_hits, target) << target << " " << labelled;
      EXPECT_EQ(turn.calls, 1);
      std::vector<size_t> want(target + 1);
      std::iota(want.begin(), want.end(), 0);
      EXPECT_EQ(turn.pages, want) << "hooks once per page, in order, none past the miss";
    }
  }
}

// A slot numbered between page p+1's Prepare (hashed ahead) and its Check:
// the hook of page p stores a key of a brand-new slot, so page p's Check
// re-resolves the plan; page p+1's precomputed entries belong to the old
// plan version. Also: the slot numbered is one the layout needs (a
// trailing pool whose slot was never stored), so the next level's plan
// goes from never_present to numbered mid-query.
TEST(PrefixLookAhead, SlotNumberedBetweenLookAheadAndCheck) {
  LayoutSpec spec = Mha(1);
  spec.pools = {PoolSpec{{"__kv"}, HitPolicy::kAllPages, 0}, PoolSpec{{"__swa"}, HitPolicy::kTrailingPages, 1}};
  const auto layout = Make(spec);
  const auto tokens = Tokens(4, 9, false);
  const auto hashes = PageHashesHex(tokens, kPageSize, false);
  Index index(SGLangIndexOptions());
  uint64_t seq = 1;
  // Pages 0..2 (the __kv level) stored; page 3 (last: __kv + __swa) has
  // only __kv, and __swa was never stored anywhere.
  for (size_t p = 0; p < 4; ++p) {
    const auto keys = layout->KeysFor(hashes[p], p, 4);
    for (const auto& k : keys) {
      if (k.find("__swa") != std::string::npos) continue;
      index.ApplyBatch(seq++, std::vector<Event>{Event{EventKind::kStored, k, {}, {}, "cpu"}});
    }
  }
  // Warm the thread's plans (both levels resolved, the last one never_present).
  EXPECT_EQ(CheckPrefix(index, *layout, tokens, kPageSize).prefix_hits, 3u);
  EXPECT_EQ(CheckPrefix(index, *layout, tokens, kPageSize).prefix_hits, 3u);
  struct Ctx {
    Index* index;
    uint64_t* seq;
    std::string swa_key;
    int calls = 0;
  } ctx{&index, &seq, {}};
  for (const auto& k : layout->KeysFor(hashes[3], 3, 4))
    if (k.find("__swa") != std::string::npos) ctx.swa_key = k;
  ASSERT_FALSE(ctx.swa_key.empty());
  PageQueryHooks hooks;
  hooks.user = &ctx;
  hooks.after_group_probe = [](void* user, size_t page) {
    auto* c = static_cast<Ctx*>(user);
    if (page != 2 || c->calls++) return;  // page 3 already hashed ahead
    c->index->ApplyBatch((*c->seq)++, std::vector<Event>{Event{EventKind::kStored, c->swa_key, {}, {}, "cpu"},
                                                           Event{EventKind::kStored, "zz_unrelated_new_slot", {}, {}, "cpu"}});
  };
  const PageQueryResult r = CheckPrefix(index, *layout, tokens, kPageSize, &hooks);
  EXPECT_EQ(ctx.calls, 1);
  EXPECT_EQ(r.prefix_hits, 4u) << "page 3 completed before its check";
  // And the other way: remove page 3's __swa key while page 3 is hashed ahead.
  ctx.calls = 0;
  hooks.after_group_probe = [](void* user, size_t page) {
    auto* c = static_cast<Ctx*>(user);
    if (page != 2 || c->calls++) return;
    c->index->ApplyBatch((*c->seq)++, std::vector<Event>{Event{EventKind::kRemoved, c->swa_key, {}, {}, "cpu"}});
  };
  EXPECT_EQ(CheckPrefix(index, *layout, tokens, kPageSize, &hooks).prefix_hits, 3u);
}

// Memo: the page hashed ahead is memoised on a repeat (the documented
// rule: a request seen before has every page it hashes looked up and
// memoised). Prompts B sharing A's first pages and differing after the
// miss get their own digests.
TEST(PrefixLookAhead, MemoWithLookAheadGivesRightDigests) {
  const auto layout = Make(Mha(2));
  auto a = Tokens(6, 500, false);
  auto b = a;
  for (size_t i = 3 * kPageSize; i < b.size(); ++i) b[i] += 100000;  // B differs from page 3 on
  const auto ha = PageHashesHex(a, kPageSize, false);
  const auto hb = PageHashesHex(b, kPageSize, false);
  Index index(SGLangIndexOptions());
  uint64_t seq = 1;
  for (size_t p = 0; p < 6; ++p)
    if (p != 3) StorePage(index, seq, *layout, ha, p, true);  // A: 0,1,2,_,4,5
  for (size_t p = 3; p < 6; ++p) StorePage(index, seq, *layout, hb, p, true);  // B's 3,4,5
  PageDigestMemo& memo = *PageDigestMemo::ForThisThread();
  memo.Clear();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(CheckPrefix(index, *layout, a, kPageSize).prefix_hits, 3u) << i;  // A's page 4 hashed ahead
    EXPECT_EQ(CheckPrefix(index, *layout, b, kPageSize).prefix_hits, 6u) << i;
  }
  const uint64_t hashed = memo.pages_hashed();
  EXPECT_EQ(CheckPrefix(index, *layout, a, kPageSize).prefix_hits, 3u);
  EXPECT_EQ(memo.pages_hashed() - hashed, 1u) << "page 0 always SHA-256 (NextHashingFirst); 1..4 from the memo";
}

// The hook of page p removes one of page p's keys: page p must miss (the
// hook runs before the hold that answers it), on the look-ahead path too.
// The project's Interleave tests run this on CheckPages only.
TEST(PrefixLookAhead, RemovalInPageHookIsAMissOnEveryPrefixPage) {
  const auto layout = Make(Mha(2));
  const auto tokens = Tokens(5, 4242, false);
  const auto hashes = PageHashesHex(tokens, kPageSize, false);
  for (size_t target = 0; target < 5; ++target) {
    Index index(SGLangIndexOptions());
    uint64_t seq = 1;
    for (size_t p = 0; p < 5; ++p) StorePage(index, seq, *layout, hashes, p, true);
    struct Ctx { Index* index; uint64_t* seq; size_t target; std::string key, group; int calls = 0; } ctx{
        &index, &seq, target, layout->KeysFor(hashes[target], target, 5)[1], layout->GroupId(hashes[target])};
    PageQueryHooks hooks;
    hooks.user = &ctx;
    hooks.after_group_probe = [](void* user, size_t page) {
      auto* c = static_cast<Ctx*>(user);
      if (page != c->target) return;
      ++c->calls;
      c->index->ApplyBatch((*c->seq)++, std::vector<Event>{Event{EventKind::kRemoved, c->key, c->group, {}, "cpu"}});
    };
    EXPECT_EQ(CheckPrefix(index, *layout, tokens, kPageSize, &hooks).prefix_hits, target);
    EXPECT_EQ(ctx.calls, 1);
  }
}

}  // namespace
}  // namespace sci
