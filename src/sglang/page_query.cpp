#include "sglang/page_query.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "index/fingerprint.h"
#include "index/object_store.h"
#include "query/query_accounting.h"
#include "query/query_plans.h"
#include "query/round_pipeline.h"
#include "sglang/page_hash.h"

namespace sci {
namespace {

// Pages per round. CheckPages runs the shared pipeline's two steps
// (query/round_pipeline.h, PageRounds below): each hashes round r (SHA-256,
// the bulk of the work), computes its pages' entry fingerprints and
// prefetches their lines, and answers round r-1, whose lines arrived while
// r was hashed. So the DRAM round trips hide behind hashing instead of
// adding to it, and each round costs one short reader-lock hold.
constexpr size_t kPagesPerRound = 16;

// Entries a page's plan reads, prefetched a round ahead: a layout's slots,
// met together, nearly always lie in one bank (slot_names.h); a plan of
// more banks has the rest computed in the hold that reads them.
constexpr size_t kPrefetchedBanks = 2;

// A page between its hash and its answer.
struct PendingPage {
  size_t page = 0;
  const Layout::Level* level = nullptr;
  bool checkable = false;  // the page needs at least one key
  PageDigest digest;
  // ObjectStore::PageKeys of its level's plan, for its first banks
  // (n_page_keys of them: 0 when the plan has more banks than fit, or was
  // not resolved when the page was prepared).
  uint32_t n_page_keys = 0;
  Fingerprint page_keys[kPrefetchedBanks];
  uint32_t plan_version = 0;  // QueryPlans::version of the plan they came from
};

// A round of pages in the pipeline (PageRounds).
struct PageRound {
  size_t n = 0;  // pages in the round (0: none, as the pipeline fills or drains)
  PendingPage pages[kPagesPerRound];
  uint8_t tier[kPagesPerRound];  // from Check to Answer: the page's tier, kAbsent for a miss
};

// One query's state and steps, whatever the source of the page digests.
// `write_digest(page, out)` writes page `page`'s digest to `out` (pages come
// in order). kTiers: a tier query's, which writes each page's tier instead
// of its hit.
template <typename WriteDigest, bool kTiers = false>
class PageQuery {
 public:
  // `tiers`: a tier query's, one byte a page.
  PageQuery(Index& index, const Layout& layout, size_t n_pages, WriteDigest& write_digest,
            const PageQueryHooks* hooks, std::span<uint8_t> tiers = {})
      : index_(index),
        tiers_(tiers),
        layout_(layout),
        n_pages_(n_pages),
        write_digest_(write_digest),
        hooks_(hooks),
        plans_(index, layout.serial(), layout.levels().size()) {}

  // Every page, through the shared pipeline of rounds (check_pages).
  PageQueryResult AllPages(std::span<uint8_t> hits) {
    PageQueryResult result;
    result.n_pages = n_pages_;
    PageRounds rounds(*this, hits, result);
    RunRounds(index_, rounds);
    return result;
  }

  // The leading run of hit pages (check_prefix). Page 0 is hashed and
  // checked before anything else is hashed: most prompts a router asks
  // about share no first page with the pool, and cost one page's hash and
  // one entry read. From page 1 on, a page's entry line is prefetched and
  // the next page hashed before the page is checked, so the line travels
  // while SHA-256 runs instead of after it: the hold that answers page p
  // prefetches page p+1's line (page 1's has a hold of its own). The page
  // hashed past the first miss is never looked up, nor counted in
  // pages_examined. Each page is answered in one hold that reads its entry.
  PageQueryResult Prefix() {
    PageQueryResult result;
    result.n_pages = n_pages_;
    PendingPage pending[2];
    if (n_pages_ > 0) Prepare(0, pending[0]);
    for (size_t page = 0; page < n_pages_; ++page) {
      PendingPage& current = pending[page % 2];
      PendingPage& next = pending[(page + 1) % 2];
      const bool has_next = page + 1 < n_pages_;
      ++result.pages_examined;
      if (!current.checkable) break;
      if (page == 1 && has_next && current.n_page_keys > 0) {
        // Page 1's line, once a query: page 1 was hashed after page 0's
        // hold. Every later page's line was prefetched by the hold before.
        const Index::Reader reader(index_);
        Prefetch(reader, current);
      }
      if (page > 0 && has_next) Prepare(page + 1, next);
      RunHooks(current);
      uint8_t tier;
      {
        const Index::Reader reader(index_);
        tier = Check(reader, current);
        // The next page's line, in the hold that answered this one: it
        // travels while the page after it is hashed.
        if (tier != MediumTiers::kAbsent && page > 0 && has_next) Prefetch(reader, next);
      }
      if (tier == MediumTiers::kAbsent) break;
      if (answered_by_entries_) ++result.fast_path;
      ++result.total_hits;
      ++result.prefix_hits;
      if (page == 0 && has_next) Prepare(1, next);
    }
    return result;
  }

 private:
  // Hashes page `page` and, if its level's plan is known, computes the
  // fingerprints of the entries it reads. No lock held.
  void Prepare(size_t page, PendingPage& pending) {
    pending.page = page;
    pending.level = &layout_.LevelFor(page, n_pages_);
    pending.checkable = pending.level->n_suffixes > 0;
    pending.n_page_keys = 0;
    write_digest_(page, &pending.digest);
    if (!pending.checkable) return;
    const size_t level = layout_.LevelIndex(*pending.level);
    const SlotPlan& plan = plans_->Last(level);
    pending.plan_version = plans_->version(level);
    if (pending.plan_version != 0 && plan.banks().size() <= kPrefetchedBanks) {
      ObjectStore::PageKeys(layout_.tenant_seed(), pending.digest, plan, pending.page_keys);
      pending.n_page_keys = static_cast<uint32_t>(plan.banks().size());
    }
  }

  void Prefetch(const Index::Reader& reader, const PendingPage& pending) const {
    if (pending.n_page_keys > 0) reader.PrefetchPage(std::span<const Fingerprint>(pending.page_keys, pending.n_page_keys));
  }

  // The page's tier (MediumTiers::kAbsent: not every key it needs is
  // present), all read in `reader`'s hold: a page is present only if all
  // its keys were at one instant (index-semantics.md, "Concurrency").
  uint8_t Check(const Index::Reader& reader, const PendingPage& pending) {
    if (!pending.checkable) return MediumTiers::kAbsent;
    const size_t level = layout_.LevelIndex(*pending.level);
    const SlotPlan& plan = plans_->Current(reader, level, layout_.Slots(*pending.level));
    // The entries computed in Prepare are this plan's unless it was
    // resolved since (a slot numbered meanwhile), or had more banks than
    // were computed: then PageTier computes them.
    std::span<const Fingerprint> page_keys;
    if (pending.plan_version == plans_->version(level) && pending.n_page_keys == plan.banks().size()) {
      page_keys = std::span<const Fingerprint>(pending.page_keys, pending.n_page_keys);
    }
    answered_by_entries_ = plan.whole().empty() && plan.by_key().empty();
    return reader.PageTier(layout_.tenant_seed(), pending.digest, plan, page_keys);
  }

  // Test seams, with no lock held, before the hold that answers the page.
  void RunHooks(const PendingPage& pending) {
    if (hooks_ == nullptr) return;
    if (hooks_->after_group_probe != nullptr) hooks_->after_group_probe(hooks_->user, pending.page);
    if (hooks_->before_page_keys != nullptr) hooks_->before_page_keys(hooks_->user, pending.page);
  }

  // AllPages' steps in the shared pipeline (query/round_pipeline.h): a
  // round of pages is hashed and its entries' lines prefetched; checked
  // and answered a round later.
  class PageRounds {
   public:
    static constexpr bool kProbes = false;
    using Round = PageRound;

    PageRounds(PageQuery& query, std::span<uint8_t> hits, PageQueryResult& result)
        : query_(query), hits_(hits), result_(result) {}

    void Init(Round&, size_t) {}
    bool empty(const Round& round) const { return round.n == 0; }
    size_t Prepare(Round& round) {
      round.n = std::min(kPagesPerRound, query_.n_pages_ - next_page_);
      for (size_t i = 0; i < round.n; ++i) query_.Prepare(next_page_ + i, round.pages[i]);
      next_page_ += round.n;
      return round.n;
    }
    void BeforeCheck(const Round& round) {
      for (size_t i = 0; i < round.n; ++i) {
        if (round.pages[i].checkable) query_.RunHooks(round.pages[i]);
      }
    }
    void Prefetch(const Index::Reader& reader, const Round& round) {
      for (size_t i = 0; i < round.n; ++i) query_.Prefetch(reader, round.pages[i]);
    }
    void Check(const Index::Reader& reader, Round& round) {
      for (size_t i = 0; i < round.n; ++i) {
        round.tier[i] = query_.Check(reader, round.pages[i]);
        if (round.tier[i] != MediumTiers::kAbsent && query_.answered_by_entries_) ++result_.fast_path;
      }
    }
    bool Answer(Round& round) {
      for (size_t i = 0; i < round.n; ++i) {
        const PendingPage& page = round.pages[i];
        const bool hit = round.tier[i] != MediumTiers::kAbsent;
        if constexpr (kTiers) {
          query_.tiers_[page.page] = round.tier[i];
        } else {
          hits_[page.page] = hit ? 1 : 0;
        }
        tally_.Add(hit, result_);
      }
      return true;
    }

   private:
    PageQuery& query_;
    std::span<uint8_t> hits_;
    PageQueryResult& result_;
    HitTally tally_;
    size_t next_page_ = 0;
  };

  Index& index_;
  const std::span<uint8_t> tiers_;
  const Layout& layout_;
  const size_t n_pages_;
  WriteDigest& write_digest_;
  const PageQueryHooks* hooks_;
  // Each level's slot plan, kept by the thread from its last query of this
  // layout (query/query_plans.h), resolved again whenever a slot was
  // numbered since.
  QueryPlans::Lease plans_;
  // The last page checked was answered by its entries alone (its plan has
  // no slot kept whole or key by key): counted in fast_path.
  bool answered_by_entries_ = false;
};

// The tokens SGLang will load for a leading run of `pages` hit pages of a
// request of `n_tokens`: whole pages, and never the request's last token
// (its scheduler matches at most n - 1 tokens, schedule_batch.py's
// max_prefix_len, then whole pages of them): a request of exactly k pages
// loads at most k - 1 of them.
size_t TokensOf(const Layout& layout, size_t pages, size_t n_tokens) {
  const size_t loadable_pages = n_tokens == 0 ? 0 : (n_tokens - 1) / layout.page_size();
  return std::min(pages, loadable_pages) * layout.page_size();
}

template <typename WriteDigest, bool kTiers = false>
PageQueryResult RunAllPages(Index& index, const Layout& layout, size_t n_pages, WriteDigest write_digest,
                            std::span<uint8_t> hits, const PageQueryHooks* hooks, std::span<uint8_t> tiers = {}) {
  if (hits.size() < n_pages) throw std::length_error("page query: hits buffer shorter than the page count");
  PageQuery<WriteDigest, kTiers> query(index, layout, n_pages, write_digest, hooks, tiers);
  PageQueryResult result = query.AllPages(hits);
  result.pages_examined = n_pages;
  CountQuery(index, result, n_pages);
  return result;
}

bool BlockSizeMatches(Index& index, const Layout& layout, uint32_t block_size) {
  return sci::BlockSizeMatches(index, block_size, layout.page_size(), layout.block_size_warning(), "page query",
                              "page size");
}

// Page hashes of a request of tokens, from the thread's digest memo: a
// prefix this thread has hashed before is not hashed again (page_hash.h).
// With `look_ahead` (every page will be asked for), each page's memo entry
// is prefetched a round of pages before it is hashed.
class TokenHashes {
 public:
  TokenHashes(const Layout& layout, std::span<const uint32_t> tokens, bool look_ahead)
      : hasher_(tokens, layout.page_size(), layout.is_eagle(), PageDigestMemo::ForThisThread()),
        look_ahead_(look_ahead) {}
  size_t pages() const { return hasher_.pages(); }
  void operator()(size_t page, PageDigest* out) {
    // A prefix query looks nothing ahead; its first page most often belongs
    // to a prompt nobody stored (or this thread never hashed).
    *out = !look_ahead_ && page == 0 ? hasher_.NextHashingFirst() : hasher_.Next();
    if (look_ahead_) hasher_.LookAhead(kPagesPerRound);
  }

 private:
  PageHasher hasher_;
  const bool look_ahead_;
};

}  // namespace

size_t PagesToCheck(const Layout& layout, size_t n_tokens, uint32_t block_size) {
  if (block_size != layout.page_size()) return 0;
  return WholePages(n_tokens, layout.page_size(), layout.is_eagle());
}

PageQueryResult CheckPages(Index& index, const Layout& layout, std::span<const uint32_t> tokens,
                           uint32_t block_size, std::span<uint8_t> hits, const PageQueryHooks* hooks) {
  if (!BlockSizeMatches(index, layout, block_size)) return PageQueryResult{};
  TokenHashes hashes(layout, tokens, /*look_ahead=*/true);
  PageQueryResult result = RunAllPages(index, layout, hashes.pages(), std::ref(hashes), hits, hooks);
  result.prefix_tokens = TokensOf(layout, result.prefix_hits, tokens.size());
  return result;
}

PageQueryResult CheckTiers(Index& index, const Layout& layout, std::span<const uint32_t> tokens, uint32_t block_size,
                           std::span<uint8_t> tiers, TierAnswer* answer, const PageQueryHooks* hooks) {
  answer->n_tiers = index.tiers().n_tiers();
  if (!BlockSizeMatches(index, layout, block_size)) {
    SummariseTiers({}, MediumTiers::kAbsent, true, answer);
    return PageQueryResult{};
  }
  TokenHashes hashes(layout, tokens, /*look_ahead=*/true);
  const size_t n_pages = hashes.pages();
  if (tiers.size() < n_pages) throw std::length_error("tier query: tiers buffer shorter than the page count");
  // A tier query writes each page's tier instead of its hit (the hits'
  // span only sizes the answer).
  PageQueryResult result =
      RunAllPages<decltype(std::ref(hashes)), /*kTiers=*/true>(index, layout, n_pages, std::ref(hashes), tiers, hooks, tiers);
  result.prefix_tokens = TokensOf(layout, result.prefix_hits, tokens.size());
  SummariseTiers(tiers.first(n_pages), MediumTiers::kAbsent, /*leading_run=*/true, answer);
  for (int t = 0; t < answer->n_tiers; ++t) {
    const size_t tier = static_cast<size_t>(t);
    answer->prefix_tokens[tier] = TokensOf(layout, answer->prefix_pages[tier], tokens.size());
  }
  return result;
}

PageQueryResult CheckPrefix(Index& index, const Layout& layout, std::span<const uint32_t> tokens,
                            uint32_t block_size, const PageQueryHooks* hooks) {
  if (!BlockSizeMatches(index, layout, block_size)) return PageQueryResult{};
  TokenHashes hashes(layout, tokens, /*look_ahead=*/false);
  auto write_hash = std::ref(hashes);
  PageQuery<decltype(write_hash)> query(index, layout, hashes.pages(), write_hash, hooks);
  PageQueryResult result = query.Prefix();
  result.prefix_tokens = TokensOf(layout, result.prefix_hits, tokens.size());
  CountQuery(index, result, result.pages_examined);
  return result;
}

PageQueryResult CheckPageHashes(Index& index, const Layout& layout, size_t n_pages,
                                absl::FunctionRef<std::string_view(size_t page)> page_hash,
                                std::span<uint8_t> hits, const PageQueryHooks* hooks) {
  PageQueryResult result = RunAllPages(
      index, layout, n_pages,
      [page_hash](size_t page, PageDigest* out) {
        const std::string_view hash = page_hash(page);
        // Validated at the boundary (see the header): 64 lowercase hex digits.
        const bool valid = hash.size() == kPageHashHexLength && LowercaseHexBytes(hash.data(), out->data());
        assert(valid);
        (void)valid;
      },
      hits, hooks);
  // The request's length is not given: as if it ended with its last page
  // (whose last token is then not loaded), never more.
  result.prefix_tokens = TokensOf(layout, result.prefix_hits, n_pages * layout.page_size());
  return result;
}

}  // namespace sci
