// What a page query answers, whichever family's layout it ran on. A vLLM
// layout's "pages" are the router's blocks (vllm/chunk_query.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace sci {

struct PageQueryResult {
  size_t n_pages = 0;      // whole pages in the request
  size_t total_hits = 0;   // pages fully present
  size_t prefix_hits = 0;  // leading run of hit pages
  size_t fast_path = 0;    // pages answered by an already-verified group
  size_t pages_examined = 0;  // pages hashed and looked up (CheckPrefix stops early)
  // The leading prompt tokens the engine will load from the pool: SGLang
  // prefix_hits x page_size; vLLM the prefix at the layout's own
  // granularity (vllm/chunk_query.h), at least prefix_hits x block size.
  size_t prefix_tokens = 0;
};

// Adds per-item answers, in item order, to a result's hit counts: all of
// them, and the leading run.
class HitTally {
 public:
  void Add(bool hit, PageQueryResult& result) {
    result.total_hits += hit ? 1 : 0;
    leading_run_ = leading_run_ && hit;
    result.prefix_hits += leading_run_ ? 1 : 0;
  }

 private:
  bool leading_run_ = true;
};

// What a tier query answers beside its per-page tiers (docs/index-semantics.md,
// "Tiers"): for every tier t of the index's map, L[t], the prefix answer
// with "present" read as "present at tier <= t", and how many pages have
// their best tier at t.
struct TierAnswer {
  static constexpr int kMaxTiers = 4;
  int n_tiers = 0;
  std::array<size_t, kMaxTiers> prefix_pages{};
  std::array<size_t, kMaxTiers> pages_at{};
  std::array<size_t, kMaxTiers> prefix_tokens{};  // PageQueryResult::prefix_tokens at tier <= t
};

// pages_at from per-page tiers (`absent`: a page at no tier), and L[t] for
// a family whose prefix is the leading run of pages (SGLang).
inline void SummariseTiers(std::span<const uint8_t> tiers, uint8_t absent, bool leading_run, TierAnswer* answer) {
  answer->prefix_pages.fill(0);
  answer->pages_at.fill(0);
  answer->prefix_tokens.fill(0);
  uint8_t run_tier = 0;  // the slowest tier of the leading run so far
  bool in_run = leading_run;
  for (const uint8_t tier : tiers) {
    if (tier == absent || tier >= answer->n_tiers) {
      in_run = false;
      continue;
    }
    ++answer->pages_at[tier];
    if (!in_run) continue;
    if (tier > run_tier) run_tier = tier;
    // The run so far is present at every tier from run_tier up.
    for (int t = run_tier; t < answer->n_tiers; ++t) ++answer->prefix_pages[static_cast<size_t>(t)];
  }
}

}  // namespace sci
