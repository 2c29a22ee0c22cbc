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

namespace sci {

using PageDigest = std::array<uint8_t, 32>;

inline constexpr size_t kPageHashHexLength = 64;

// Whole pages in a request of `n_tokens` tokens.
inline size_t WholePages(size_t n_tokens, uint32_t page_size, bool eagle) {
  if (page_size == 0) return 0;
  const size_t units = eagle ? (n_tokens == 0 ? 0 : n_tokens - 1) : n_tokens;
  return units / page_size;
}

// A memo of page digests: (parent digest, page units) -> digest.
//
// Why: SHA-256 of every page is the floor of a query's cost (~200 ns a page
// even with SHA extensions), and a router sees the same prompt prefixes over
// and over (system prompts, few-shot examples, multi-turn chats). XXH3-128 of
// the same bytes costs a tenth of that, so a digest computed before is looked
// up instead of recomputed: a repeated prefix is not rehashed.
//
// Exact: an entry is keyed by a 128-bit XXH3 key of everything SHA-256 has
// read up to the end of the page: page 0's key is the XXH3-128 of its units,
// page i's the XXH3-128 of its units seeded with the low half of page i-1's
// key, its low half XORed with that key's high half (KeyOf). A key thus stands
// for the whole run of units from the start of the request, which is what
// the page's digest is a function of, and it holds that digest. A hit can
// only be wrong if two different runs have the same 128-bit key: the odds the
// index already accepts for its key fingerprints (about 2^-128 per pair).
//
// Why chain keys, not digests: a page's key is known before its parent's
// digest is, so the next page's entry is prefetched while this page hashes,
// and a cold prompt's lookups and inserts hit lines already on their way.
//
// Bounded: direct-mapped, a fixed number of one-cache-line entries allocated
// once by the constructor; a page overwrites whatever shared its slot.
// Not thread-safe: each thread uses its own (ForThisThread), so no lock or
// atomic is on the query's path.
class PageDigestMemo {
 public:
  // 8192 entries of 64 bytes = 512 KiB per querying thread: the pages of ~48
  // distinct 169-page prompts.
  static constexpr size_t kDefaultEntries = size_t{1} << 13;

  struct Key {
    uint64_t low = 0;
    uint64_t high = 0;
  };

  // `entries` is rounded up to a power of two (at least 1).
  explicit PageDigestMemo(size_t entries = kDefaultEntries);
  PageDigestMemo(const PageDigestMemo&) = delete;
  PageDigestMemo& operator=(const PageDigestMemo&) = delete;

  // The calling thread's memo, allocated on its first call, freed when the
  // thread exits.
  static PageDigestMemo& ForThisThread();

  // The key of a page whose parent page has key `parent` (null for page 0),
  // from `units_hash`, the XXH3-128 of its units seeded with SeedOf(parent).
  // Two parents with the same seed differ in their high half, so the keys
  // differ too; two with different seeds give unrelated hashes.
  static uint64_t SeedOf(const Key* parent) { return parent == nullptr ? 0 : parent->low; }
  static Key KeyOf(const Key* parent, const Key& units_hash) {
    return parent == nullptr ? units_hash : Key{units_hash.low ^ parent->high, units_hash.high};
  }

  // Starts the entry of `key` on its way into the cache, for a Find and an
  // Insert soon after.
  void Prefetch(const Key& key) const { __builtin_prefetch(&entries_[key.low & mask_], 1); }

  // Copies the digest memoised under `key` to *digest; false if there is none.
  bool Find(const Key& key, PageDigest* digest) {
    const Entry& entry = entries_[key.low & mask_];
    if (entry.epoch != epoch_ || entry.key_low != key.low || entry.key_high != key.high) {
      ++misses_;
      return false;
    }
    *digest = entry.digest;
    ++hits_;
    return true;
  }

  void Insert(const Key& key, const PageDigest& digest) {
    Entry& entry = entries_[key.low & mask_];
    entry.key_low = key.low;
    entry.key_high = key.high;
    entry.epoch = epoch_;
    entry.digest = digest;
  }

  // Forgets every entry, in constant time (benchmarks use it to measure
  // prompts the memo has never seen).
  void Clear();

  size_t capacity() const { return mask_ + 1; }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }
  // Pages SHA-256 hashed by the hashers using this memo.
  uint64_t pages_hashed() const { return pages_hashed_; }
  void CountHashed() { ++pages_hashed_; }

 private:
  // One cache line: a lookup touches one line whether it hits or misses.
  struct alignas(64) Entry {
    uint64_t key_low = 0;
    uint64_t key_high = 0;
    uint32_t epoch = 0;  // valid only when equal to the memo's epoch_
    PageDigest digest{};
  };
  static_assert(sizeof(Entry) == 64);

  std::unique_ptr<Entry[]> entries_;
  size_t mask_ = 0;
  uint32_t epoch_ = 1;  // entries start at 0: empty
  uint64_t hits_ = 0;
  uint64_t misses_ = 0;
  uint64_t pages_hashed_ = 0;
};

// Walks the chained digests of one request, page after page. Cheap to
// construct (it holds only views, the previous digest and a few memo keys);
// not thread-safe, so each query owns one.
//
// With a memo, a request is memoised on its second sight. Its first page is
// always looked up. If the memo holds it, the request (or a prefix of it)
// was seen before: every page is looked up, served from the memo if there,
// else hashed and memoised. If not, only the first page is memoised, as the
// request's sighting, and the rest is hashed without the memo. Why: most
// requests a router sees are new, and memoising a page costs an XXH3 pass
// over its units and a memo line (about a sixth of its SHA-256), which only
// a repeat pays back; a repeated prefix is memoised in full on its second
// query and served from the memo from its third on.
class PageHasher {
 public:
  PageHasher(std::span<const uint32_t> tokens, uint32_t page_size, bool eagle, PageDigestMemo* memo = nullptr)
      : tokens_(tokens),
        page_size_(page_size),
        eagle_(eagle),
        memo_(memo),
        memo_use_(memo == nullptr ? MemoUse::kBypass : MemoUse::kUndecided) {}

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

  // How the memo serves this request (see the class comment).
  enum class MemoUse {
    kUndecided,  // the first page is not looked up yet
    kDeferred,   // the first page was hashed without the memo (NextHashingFirst)
    kLookUp,     // seen before: every page is looked up
    kBypass,     // no memo, or first sight: hash every (later) page without it
  };
  // Looks the first page up, once it was hashed by NextHashingFirst; memoises it on a miss.
  void ResolveDeferredFirstPage();

  MemoUse memo_use_;
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

// Writes the 64 lowercase hex characters of `digest` to `out` (no NUL).
void ToHex(const PageDigest& digest, char* out);

// Whether `s` could be a page hash: exactly 64 lowercase hex characters.
bool IsPageHashHex(std::string_view s);

// Every page hash of a request, as hex. For tests and tools, not the hot path.
std::vector<std::string> PageHashesHex(std::span<const uint32_t> tokens, uint32_t page_size, bool eagle);

}  // namespace sci
