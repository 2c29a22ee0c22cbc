// The per-thread memo of chained digests every family's query consults
// before hashing (SGLang pages, vLLM blocks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/prefetch.h"
#include "query/digest.h"

namespace sci {

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
// What else a digest depends on (vLLM's layout and a request's extras: a
// LoRA name, a cache salt) enters as page 0's parent key, 128 bits a client
// cannot aim at (vllm/memo_domain.h: SHA-256 keyed per process); SGLang's
// page 0 has the memo's root, 128 bits of the process's secret, as its
// parent. Without it page 0's key would be the XXH3-128 of its tokens under
// seed 0, which a client can aim: XXH3 with public seeds is not collision
// resistant, and two crafted pages sharing a key would be served one
// digest (a false hit for the other; tests/adversarial_hash_test.cpp).
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
  // thread exits; null once the thread's exit has freed it (a query then
  // goes without: common/thread_owned.h). Throws bad_alloc.
  static PageDigestMemo* ForThisThread();

  // The key of a page whose parent page has key `parent` (null for page 0),
  // from `units_hash`, the XXH3-128 of its units seeded with SeedOf(parent).
  // Two parents with the same seed differ in their high half, so the keys
  // differ too; two with different seeds give unrelated hashes.
  // A null parent stands for the root (Root()).
  static uint64_t SeedOf(const Key* parent) { return (parent == nullptr ? Root() : *parent).low; }
  static Key KeyOf(const Key* parent, const Key& units_hash) {
    return Key{units_hash.low ^ (parent == nullptr ? Root() : *parent).high, units_hash.high};
  }
  // The parent of a chain with none (SGLang's page 0): 128 bits of the
  // process's secret, so that no client can aim page 0's key.
  static const Key& Root();

  // Starts the entry of `key` on its way into the cache, for a Find and an
  // Insert soon after.
  void Prefetch(const Key& key) const { PrefetchForWrite(&entries_[key.low & mask_]); }

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

// When a request's digests consult the memo: the rule both families'
// hashers follow (SGLang's PageHasher, vLLM's block chain). A request is
// memoised on its second sight. Its first page is always looked up: if the
// memo holds it, the request (or a prefix of it) was seen before, and every
// page is looked up, served from the memo if there, else hashed and
// memoised; if not, only the first page is memoised, as the request's
// sighting, and the rest is hashed without the memo. Why: most requests a
// router sees are new, and memoising a page costs an XXH3 pass over its
// units and a memo line (about a sixth of its SHA-256), which only a repeat
// pays back; a repeated prefix is memoised in full on its second query and
// served from the memo from its third on.
//
// A prefix query may hash its first page without the memo (DeferFirst) and
// look it up only if it goes on to the second page: most prefix queries are
// of prompts nobody stored, which then cost one SHA-256 and nothing else.
class MemoSighting {
 public:
  explicit MemoSighting(bool has_memo) : use_(has_memo ? Use::kUndecided : Use::kBypass) {}

  // Whether the next page looks the memo up (and memoises what it hashes).
  bool consults() const { return use_ == Use::kUndecided || use_ == Use::kLookUp; }
  // Whether the request was seen before (every page is looked up).
  bool seen_before() const { return use_ == Use::kLookUp; }
  // The first page was hashed without the memo: Resolve() is due before the second.
  bool first_deferred() const { return use_ == Use::kDeferred; }

  void DeferFirst() {
    if (use_ == Use::kUndecided) use_ = Use::kDeferred;
  }
  // The first page's lookup found it or not (as a page looked up, or the
  // deferred one looked up late): decides the rest of the request.
  void Resolve(bool first_found) {
    if (use_ == Use::kUndecided || use_ == Use::kDeferred) use_ = first_found ? Use::kLookUp : Use::kBypass;
  }

 private:
  enum class Use {
    kUndecided,  // the first page is not looked up yet
    kDeferred,   // the first page was hashed without the memo
    kLookUp,     // seen before: every page is looked up
    kBypass,     // no memo, or first sight: every later page hashed without it
  };
  Use use_;
};

}  // namespace sci
