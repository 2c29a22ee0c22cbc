// SGLang HiCache page hashes: SHA-256 chained over whole pages of tokens
// (docs/sglang-hicache.md, "Page hashes").
//
//   digest_i = SHA-256(digest_{i-1} || little-endian bytes of page i's tokens)
//
// With `eagle` the hashed units are the token bigrams (t0,t1), (t1,t2), ...
// (8 bytes each, first then second), so a request of n tokens has n-1 units.
//
// The hot path hashes page by page through PageHasher and never stores more
// than the previous digest: nothing is allocated, whatever the request length
// (the per-thread digest memo is allocated once, on a thread's first query).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "query/digest.h"
#include "query/digest_memo.h"

namespace sci {

// Whole pages in a request of `n_tokens` tokens.
inline size_t WholePages(size_t n_tokens, uint32_t page_size, bool eagle) {
  if (page_size == 0) return 0;
  const size_t units = eagle ? (n_tokens == 0 ? 0 : n_tokens - 1) : n_tokens;
  return units / page_size;
}

// Walks the chained digests of one request, page after page. Cheap to
// construct (it holds only views, the previous digest and a few memo keys);
// not thread-safe, so each query owns one.
//
// With a memo, pages are looked up or not as MemoSighting says
// (query/digest_memo.h): a request is memoised on its second sight.
class PageHasher {
 public:
  PageHasher(std::span<const uint32_t> tokens, uint32_t page_size, bool eagle, PageDigestMemo* memo = nullptr)
      : tokens_(tokens),
        page_size_(page_size),
        eagle_(eagle),
        memo_(memo),
        sighting_(memo != nullptr) {}

  size_t pages() const { return WholePages(tokens_.size(), page_size_, eagle_); }

  // Digest of the next page. Call at most pages() times.
  const PageDigest& Next();
  // The first page's digest (call it first or not at all), hashed without
  // the memo, which is consulted only if the caller goes on to the second
  // page (the request's sighting, as above, is then recorded). For a
  // prefix query: its first page most often belongs to a request nobody
  // stored, which then costs one SHA-256 and nothing else.
  const PageDigest& NextHashingFirst();

  // With a memo: computes the memo keys of the next `pages` pages (at most
  // kMaxLookAhead) not computed yet and starts their entries on their way
  // into the cache, so that Next() finds them there: a cold entry costs a
  // memory round trip, which only a look-ahead of several pages (several
  // SHA-256 computations) hides. For callers that will ask for those pages
  // (CheckPages); one that may stop (CheckPrefix) does not, and reads no
  // unit past the pages it asked for.
  static constexpr size_t kMaxLookAhead = 31;
  void LookAhead(size_t pages);

 private:
  // Hands `sink(bytes, n)` page `page`'s units, as SHA-256 reads them after
  // the parent digest, in one or more pieces.
  template <typename Sink>
  void ForEachUnitChunk(size_t page, Sink sink) const;
  // digest_ = SHA-256(digest_ if page > 0, then page `page`'s units).
  void HashPage(size_t page);

  std::span<const uint32_t> tokens_;
  uint32_t page_size_;
  bool eagle_;
  PageDigestMemo* memo_;
  // The memo key of page `page`, whose parent page has key `parent` (null
  // for page 0): one XXH3 pass over its units (PageDigestMemo::KeyOf).
  PageDigestMemo::Key MemoKey(size_t page, const PageDigestMemo::Key* parent) const;

  // Looks the first page up, once it was hashed by NextHashingFirst; memoises it on a miss.
  void ResolveDeferredFirstPage();

  MemoSighting sighting_;
  size_t next_page_ = 0;
  PageDigest digest_{};
  // Memo keys of pages [keys_known_ - kKeyRing, keys_known_), by page modulo
  // kKeyRing: those looked ahead, and the last page's, the parent of the next.
  static constexpr size_t kKeyRing = kMaxLookAhead + 1;
  void ComputeNextKey();
  // Each written before it is read: left uninitialized, since zeroing 512
  // bytes is a measurable part of a prefix query that ends at its first page.
  union KeyRing {
    KeyRing() {}
    PageDigestMemo::Key at[kKeyRing];
  } keys_;
  size_t keys_known_ = 0;
};

// Every page hash of a request, as hex. For tests and tools, not the hot path.
std::vector<std::string> PageHashesHex(std::span<const uint32_t> tokens, uint32_t page_size, bool eagle);

}  // namespace sci
