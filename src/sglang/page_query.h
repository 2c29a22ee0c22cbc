// The router's hot path: which pages of a request are fully present in the
// pool (docs/sglang-hicache.md, docs/index-semantics.md
// "Queries").
//
// Per page: hash it, probe its group; a group verified under the page's
// layout id answers with that one lookup (the fast path). Otherwise every
// key the page needs is fingerprinted and looked up; all present is a hit.
// If every key was also stored under the page's group, the group is marked
// verified -- which the index refuses if anything invalidated the group
// since the probe, while the page still reports the hit it proved. Keys
// present under no group or another group make a hit on this exact path
// only (their removal would not reach this group). A page needing no key
// is a miss.
//
// Hashing-bound (measured: bench/README.md). CheckPages hashes pages a round
// (16 pages) ahead of their lookups: the round's group lines are prefetched
// once it is hashed and probed after the next round is, so on a prompt whose
// table lines are cold the DRAM round trips overlap SHA-256 instead of
// following it, and one reader-lock hold serves a round, not a page.
// CheckPrefix looks one page ahead, from page 1 on: a page's entry line is
// prefetched and the next page hashed before the page is checked, so at
// most one page past the first miss is hashed (never looked up), and a
// prompt whose first page misses costs that page's hash alone.
//
// Page digests come from the querying thread's PageDigestMemo when it has
// hashed the same page input before (a shared prompt prefix), from SHA-256
// otherwise (page_hash.h): same digests, without rehashing repeated prefixes.
//
// Once warm a query allocates nothing and builds no std::string: keys are
// assembled in stack buffers (KeyBuffer) and fingerprinted in place, digests
// are chained page by page on the stack, the thread's memo is allocated on
// its first query only, and counters are bumped once per query with totals.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "index/index.h"
#include "query/query_result.h"
#include "sglang/layout.h"

namespace sci {

// Test seams, so a test can land an event in exactly these windows. Plain
// function pointers: each costs one predictable branch when unset.
struct PageQueryHooks {
  // After a page's group has been probed, before its keys are looked up.
  void (*after_group_probe)(void* user, size_t page) = nullptr;
  void* user = nullptr;  // passed to both
  // Before the lock hold in which a page not answered by its group or the
  // summary has all its keys looked up (after any earlier look-up of some
  // of them: what that saw must not count).
  void (*before_page_keys)(void* user, size_t page) = nullptr;
};

// Pages a query will answer: the whole pages of the request, or 0 when
// `block_size` is not the layout's page size (the router's blocks then do not
// line up with SGLang's pages, so nothing can be looked up).
size_t PagesToCheck(const Layout& layout, size_t n_tokens, uint32_t block_size);

// Answers a request of token ids. `hits` must hold PagesToCheck(...) bytes;
// hits[i] becomes 1 or 0. A block size mismatch answers zero pages and is
// counted as a query with no page checked.
PageQueryResult CheckPages(Index& index, const Layout& layout, std::span<const uint32_t> tokens,
                           uint32_t block_size, std::span<uint8_t> hits, const PageQueryHooks* hooks = nullptr);

// The router's prefix query: the leading run of fully present pages
// (prefix_hits, equal to total_hits), stopping at the first page that is
// not. No page after it is looked up, and only the next one is hashed (when
// the miss is not page 0): an unrelated prompt costs one page hash and one
// lookup, whatever its length. n_pages is the request's whole pages;
// pages_examined those looked up (the run, plus the miss that ended it).
// Counted as one query of pages_examined pages.
PageQueryResult CheckPrefix(Index& index, const Layout& layout, std::span<const uint32_t> tokens,
                            uint32_t block_size, const PageQueryHooks* hooks = nullptr);

// The tier query (docs/index-semantics.md, "Tiers"): CheckPages' pages, with
// tiers[i] = the best tier at which page i is fully present
// (MediumTiers::kAbsent: not present), and `answer` from them (L[t]: the
// leading run of pages at tier <= t). A page's tier is read in the same hold
// as its presence: the group's on the fast path and by the summary, the
// keys' otherwise. `tiers` must hold PagesToCheck(...) bytes. Counted as
// one query, as CheckPages.
PageQueryResult CheckTiers(Index& index, const Layout& layout, std::span<const uint32_t> tokens, uint32_t block_size,
                           std::span<uint8_t> tiers, TierAnswer* answer, const PageQueryHooks* hooks = nullptr);

// Answers a request whose page hashes the caller already holds, in page
// order. Their shape is checked once, where they enter the library (the C
// API rejects the call, naming the hash): every page_hash(page) here must
// already pass IsPageHashHex (64 lowercase hex characters). `hits` must hold
// n_pages bytes.
PageQueryResult CheckPageHashes(Index& index, const Layout& layout, size_t n_pages,
                                absl::FunctionRef<std::string_view(size_t page)> page_hash,
                                std::span<uint8_t> hits, const PageQueryHooks* hooks = nullptr);

}  // namespace sci
