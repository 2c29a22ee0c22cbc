// A hash map from 128-bit fingerprints to small values, laid out so that a
// lookup reads one cache line (or one aligned pair of lines), and that line's
// address is known from the fingerprint alone.
//
// Why not absl::flat_hash_map: its prefetch() can only fetch the first slot
// of the 16-slot probe group, while the key sits anywhere in that group (20-
// to 48-byte slots: 5 to 12 lines). A query that prefetches the lines of a
// page's keys before looking them up then still misses on 4 keys out of 5,
// one DRAM round trip each: the exact path of a page query on a prompt the
// router has never seen spent most of its time there. Here the whole probe
// starts at one bucket whose address prefetch() computes exactly, so the
// misses of many keys overlap.
//
// Layout: open addressing over buckets of kEntries entries, each bucket one
// cache line (kEntries = 3 fingerprints of 16 bytes with 4-byte values) or a
// 128-byte pair (larger values, whose line is fetched with the keys'). A key
// lives in its home bucket (a multiply-shift of its fingerprint's low half)
// or, when that was full on insertion, in the next bucket with room
// (linear probing over buckets). Each bucket counts how many keys passed it
// on their way to a later bucket (F14's "outbound overflow"), and keeps a
// byte of filter bits: each key that passed it set one bit, picked by three
// bits of its fingerprint (PassBit). A lookup stops at the first bucket
// that does not hold the key and whose filter lacks the key's bit: so an
// absent key costs its home bucket alone unless a passing key shared its
// bit, with no tombstones: an erase frees its entry and decrements the
// counts it incremented, and a count back at 0 clears its filter (bits
// cannot be taken back one key at a time: they are a superset until then).
//
// Not thread-safe: the index guards every table with its table lock.
// Pointers to values stay valid until the next insertion (which may grow the
// table) or clear; an erase moves nothing.
#pragma once

#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

#include <sys/mman.h>

#include "common/prefetch.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "index/fingerprint.h"

namespace sci {

template <typename Value, uint32_t Entries>
class SplitTable;

// A fingerprint as four 32-bit words: 4-byte aligned, so a 4-byte value
// packs beside it with no padding.
struct PackedFingerprint {
  uint32_t words[4] = {};
  PackedFingerprint() = default;
  explicit PackedFingerprint(const Fingerprint& f) {
    if constexpr (std::endian::native == std::endian::little) {
      // The same bytes in the same order: one 16-byte copy. Built word by
      // word, the compiler stored the two halves apart and SameKey's
      // 16-byte load of them waited for both stores to retire (a failed
      // store-to-load forward): a quarter of a warm page lookup's time.
      static_assert(sizeof(Fingerprint) == sizeof(words));
      std::memcpy(words, &f, sizeof(words));
    } else {
      words[0] = static_cast<uint32_t>(f.low);
      words[1] = static_cast<uint32_t>(f.low >> 32);
      words[2] = static_cast<uint32_t>(f.high);
      words[3] = static_cast<uint32_t>(f.high >> 32);
    }
  }
  Fingerprint Unpack() const {
    return Fingerprint{(uint64_t{words[1]} << 32) | words[0], (uint64_t{words[3]} << 32) | words[2]};
  }
  // The half the table places a key by (the index shards by the other).
  uint64_t low() const { return (uint64_t{words[1]} << 32) | words[0]; }
  friend bool operator==(const PackedFingerprint&, const PackedFingerprint&) = default;
};

// `Entries` per bucket: three fingerprints and their values fill a 64-byte
// line with 4-byte values, a 128-byte pair with values up to 24 bytes; two
// fill a line with values up to 12 bytes.
template <typename Value, uint32_t Entries = 3>
class FingerprintTable {
 public:
  static constexpr uint32_t kEntries = Entries;

  FingerprintTable() = default;
  FingerprintTable(const FingerprintTable&) = delete;
  FingerprintTable& operator=(const FingerprintTable&) = delete;
  FingerprintTable(FingerprintTable&& other) noexcept { swap(other); }
  FingerprintTable& operator=(FingerprintTable&& other) noexcept {
    FingerprintTable(std::move(other)).swap(*this);
    return *this;
  }
  void swap(FingerprintTable& other) noexcept {
    std::swap(buckets_, other.buckets_);
    std::swap(n_buckets_, other.n_buckets_);
    std::swap(size_, other.size_);
    std::swap(erased_, other.erased_);
    std::swap(part_of_split_, other.part_of_split_);
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t bucket_count() const { return n_buckets_; }
  // Bytes held by the table (its bucket array).
  size_t allocated_bytes() const { return n_buckets_ * sizeof(Bucket); }

  // Starts the load of `key`'s home bucket (the only one it needs, but for
  // the rare key displaced past it).
  void prefetch(const PackedFingerprint& key) const {
    if (n_buckets_ == 0) return;
    const Bucket* bucket = &buckets_[Home(key)];
    PrefetchForRead(bucket);
    if constexpr (sizeof(Bucket) > 64) PrefetchForRead(reinterpret_cast<const char*>(bucket) + 64);
  }

  const Value* find(const PackedFingerprint& key) const {
    return const_cast<FingerprintTable*>(this)->find(key);
  }
  Value* find(const PackedFingerprint& key) {
    if (n_buckets_ == 0) return nullptr;
    size_t b = Home(key);
    for (size_t probed = 0; probed < n_buckets_; ++probed) {
      Bucket& bucket = buckets_[b];
      if (const uint32_t matches = bucket.Matches(key); matches != 0) {
        return &bucket.values[std::countr_zero(matches)];
      }
      // An absent key's bit is set in a bucket with overflow (in a fresh
      // table at load 0.55 to 0.8, 16% to 49% of 2-entry buckets) only if
      // a key that passed shares it (1 in 8 each): without the filter, its
      // walk to the next bucket, whose line nobody prefetched, made prompts
      // nobody stored cost more than stored ones (bench/README.md). Stale
      // bits and drift under churn are undone by renewal (worn()).
      if ((bucket.passed & PassBit(key)) == 0) return nullptr;
      b = Next(b);
    }
    return nullptr;
  }
  bool contains(const PackedFingerprint& key) const { return find(key) != nullptr; }

  // Whether inserting one more key would rebuild the table.
  bool full() const { return size_ + 1 > MaxSize(); }

  // A copy with room to grow: what the next insertion would rebuild this
  // table into, built without changing it. The index builds it outside its
  // table lock (only its writer changes tables, so it may read this one
  // meanwhile), then swaps it in under the lock: readers never wait for a
  // rebuild, only for the swap.
  FingerprintTable Grown() const { return Rebuilt(BucketsToGrowTo(size_ + 1)); }
  // The bytes Grown() would allocate.
  size_t GrownBytes() const { return Buckets(BucketsToGrowTo(size_ + 1)) * sizeof(Bucket); }

  // Whether `entries` fit without a rebuild.
  bool holds(size_t entries) const { return entries <= MaxSize(); }

  // Whether erases have worn the table: more keys erased since its array
  // was built than half the keys it holds and than kWornErases, and either
  // more than half its buckets or so many that it is sparse(). An erase
  // moves nothing back, so under steady churn (a pool at its size, each
  // eviction an erase and each store an insertion) keys drift away from
  // their homes and filters keep the bits of keys long gone; an outside
  // review measured, at load 0.75, 1.46 buckets read per absent lookup in a
  // fresh table and 12 after ten tables' worth of churn (30 before the
  // filters). Renewed() undoes both, and shrinks a sparse table; the index
  // renews a worn table before a store (ObjectStore::MakeRoom), as it grows
  // a full one. A renewal reads every bucket: the bucket count in the rule
  // keeps a large table from being read whole every kWornErases erases (the
  // second review: 20-140 µs a store), unless it is sparse, which its
  // renewal shrinks, once. Sparse alone suffices: a table emptied in two
  // steps (two tenants' clears, the first renewal between them at its size)
  // erases fewer than half its buckets after that renewal (the third
  // review: 18 times the memory it needed, kept until churn wore it).
  bool worn() const {
    return erased_ >= kWornErases && erased_ > size_ / 2 && (erased_ > n_buckets_ / 2 || sparse());
  }
  size_t erased_since_built() const { return erased_; }

  // A copy with every key placed afresh, built like Grown() without
  // changing this table: of the same size, or, if it holds fewer keys than
  // kShrinkLoad of its entries, of the size a growth would give them. A
  // table erases left sparse (a tenant's clear) is worn, so its renewal at
  // the next store gives the memory back.
  FingerprintTable Renewed() const { return Rebuilt(sparse() ? BucketsToGrowTo(size_ + 1) : n_buckets_); }
  // Whether the table holds fewer keys than kShrinkLoad of its entries.
  bool sparse() const { return static_cast<double>(size_) < static_cast<double>(n_buckets_ * kEntries) * kShrinkLoad; }

  // The buckets a find of `key` reads (what a lookup costs in lines; for
  // tests and benchmarks).
  size_t buckets_read(const PackedFingerprint& key) const {
    if (n_buckets_ == 0) return 0;
    size_t b = Home(key), read = 1;
    while (buckets_[b].Matches(key) == 0 && (buckets_[b].passed & PassBit(key)) != 0 && read < n_buckets_) {
      b = Next(b);
      ++read;
    }
    return read;
  }

  // A copy sized for `entries` (at least its own), filled to kReservedLoad
  // when they are all in: built like Grown(), for a count known ahead (a
  // snapshot about to be loaded), so that reaching it rebuilds nothing.
  FingerprintTable Reserved(size_t entries) const {
    return Rebuilt(BucketsFor(entries > size_ ? entries : size_ + 1, kReservedLoad));
  }

  // Inserts `key` (which must be absent) with `value`; the stored value.
  // Throws std::bad_alloc if the table must grow and cannot: unchanged then.
  Value* insert_absent(const PackedFingerprint& key, const Value& value) {
    if (full()) {
      FingerprintTable grown = Grown();  // the index grows tables ahead (MakeRoom); this is the fallback
      swap(grown);
    }
    Value* stored = Place(key, value);
    ++size_;
    return stored;
  }

 private:
  static size_t BucketsFor(size_t entries, double load) {
    return static_cast<size_t>(static_cast<double>(entries) / (kEntries * load)) + 1;
  }
  // The buckets a growth gives `entries`: at kGrowLoad, or kLargeGrowLoad
  // once that many would weigh kLargeTableBytes, or in a part of a split
  // table (split_table.h: a part of a table that was larger still).
  size_t BucketsToGrowTo(size_t entries) const {
    const size_t n = BucketsFor(entries, kGrowLoad);
    return part_of_split_ || n * sizeof(Bucket) >= kLargeTableBytes ? BucketsFor(entries, kLargeGrowLoad) : n;
  }

  // This table's entries in a new array of n buckets; throws bad_alloc
  // before any change.
  FingerprintTable Rebuilt(size_t n) const {
    FingerprintTable grown = Empty(n, part_of_split_);
    grown.size_ = size_;
    for (size_t b = 0; b < n_buckets_; ++b) {
      const Bucket& bucket = buckets_[b];
      for (uint32_t i = 0; i < kEntries; ++i) {
        if (bucket.Occupied(i)) grown.Place(bucket.keys[i], bucket.values[i]);
      }
    }
    return grown;
  }

 public:
  // Frees the entry holding `value` (a pointer find() returned).
  void erase(Value* value) {
    // The bucket and entry the value sits in.
    const auto offset = reinterpret_cast<char*>(value) - reinterpret_cast<char*>(buckets_.get());
    const size_t b = static_cast<size_t>(offset) / sizeof(Bucket);
    Bucket& bucket = buckets_[b];
    const uint32_t i = static_cast<uint32_t>(value - bucket.values);
    // Undo the overflow counts its insertion made on the way from its home.
    for (size_t p = Home(bucket.keys[i]); p != b; p = Next(p)) {
      Bucket& passed = buckets_[p];
      if (passed.overflow != kSaturated && --passed.overflow == 0) passed.passed = 0;
    }
    bucket.occupied &= static_cast<uint8_t>(~(1u << i));
    bucket.keys[i] = PackedFingerprint{};
    bucket.values[i] = Value{};
    --size_;
    ++erased_;
  }

  // Calls f(key, value) for every entry of buckets [first, last) (bucket
  // numbers below bucket_count()), erasing those it returns true for. An
  // erase moves nothing, so a walk may go on bucket range by bucket range,
  // with other erases between them (but no insertion: it may rebuild).
  template <typename F>
  void erase_if(size_t first, size_t last, F&& f) {
    for (size_t b = first; b < last && b < n_buckets_; ++b) {
      Bucket& bucket = buckets_[b];
      for (uint32_t i = 0; i < kEntries; ++i) {
        if (bucket.Occupied(i) && f(bucket.keys[i], bucket.values[i])) erase(&bucket.values[i]);
      }
    }
  }

  // What breaks the table's invariant (docs/architecture.md, I57), or ""
  // when nothing does: each bucket's overflow count is the number of keys
  // stored past it from a home at or before it (or saturated), and its
  // filter has the PassBit of each of them (and is empty at a count of 0);
  // the occupancy bits count size(). A walk of the whole table: for tests.
  std::string Inconsistency() const {
    std::unique_ptr<size_t[]> passes(new size_t[n_buckets_]());
    std::unique_ptr<uint8_t[]> bits(new uint8_t[n_buckets_]());
    size_t entries = 0;
    for (size_t b = 0; b < n_buckets_; ++b) {
      for (uint32_t i = 0; i < kEntries; ++i) {
        if (!buckets_[b].Occupied(i)) continue;
        ++entries;
        const PackedFingerprint& key = buckets_[b].keys[i];
        for (size_t p = Home(key); p != b; p = Next(p)) {
          ++passes[p];
          bits[p] |= PassBit(key);
        }
      }
    }
    if (entries != size_) return "the occupied entries are not the table's size";
    for (size_t b = 0; b < n_buckets_; ++b) {
      const Bucket& bucket = buckets_[b];
      if (bucket.overflow != kSaturated && bucket.overflow != passes[b]) return "an overflow count that is not the keys past it";
      if ((bucket.passed & bits[b]) != bits[b]) return "a key past a bucket whose filter lacks its bit";
      if (bucket.overflow == 0 && bucket.passed != 0) return "filter bits in a bucket nothing passed";
      // A real saturation leaves bits (each pass set one, and a saturated
      // filter is never emptied); without them the count wrapped below 0.
      if (bucket.overflow == kSaturated && bucket.passed == 0) return "an overflow count below 0";
    }
    return "";
  }

  // Forgets every entry and frees the bucket array (and is no part of a
  // split table any more: SplitTable::clear joins its parts).
  void clear() {
    buckets_.reset();
    n_buckets_ = 0;
    size_ = 0;
    erased_ = 0;
    part_of_split_ = false;
  }

  // Calls f(key, value) for every entry.
  template <typename F>
  void for_each(F&& f) const {
    for (size_t b = 0; b < n_buckets_; ++b) {
      const Bucket& bucket = buckets_[b];
      for (uint32_t i = 0; i < kEntries; ++i) {
        if (bucket.Occupied(i)) f(bucket.keys[i], bucket.values[i]);
      }
    }
  }
  template <typename F>
  void for_each(F&& f) {
    for (size_t b = 0; b < n_buckets_; ++b) {
      Bucket& bucket = buckets_[b];
      for (uint32_t i = 0; i < kEntries; ++i) {
        if (bucket.Occupied(i)) f(bucket.keys[i], bucket.values[i]);
      }
    }
  }

 private:
  // Overflow counts saturate (then they are never decremented, nor their
  // filter cleared: a lookup walks on past the bucket as often as before,
  // until the next rebuild; still correct). It takes 65,535 keys displaced
  // past one bucket: a run of 32,768 full 2-entry buckets.
  static constexpr uint32_t kSaturated = 0xFFFF;

  // The filter bit a key sets in each bucket it passes (Place) and a lookup
  // tests: three bits of the fingerprint's low half that placing it barely
  // uses (Home multiplies by the bucket count and keeps the top bits), and
  // not the high half, whose low byte is the tenant tag (the same for a
  // tenant's keys).
  static uint8_t PassBit(const PackedFingerprint& key) { return static_cast<uint8_t>(1u << (key.words[0] & 7)); }

  static bool SameKey(const PackedFingerprint& a, const PackedFingerprint& b) {
#if defined(__SSE2__)
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.words));
    const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.words));
    return _mm_movemask_epi8(_mm_cmpeq_epi8(x, y)) == 0xFFFF;
#else
    return a == b;
#endif
  }

  struct alignas(64) Bucket {
    uint8_t occupied = 0;   // bit i: entry i holds a key
    uint8_t passed = 0;     // PassBit of every key counted in `overflow` (and maybe of keys erased since)
    uint16_t overflow = 0;  // keys stored past this bucket from a home at or before it
    PackedFingerprint keys[kEntries];
    Value values[kEntries];
    bool Occupied(uint32_t i) const { return (occupied >> i) & 1u; }
    // Bit i: entry i holds `key`. Every entry is compared and the results
    // combined without a branch: which entry of its bucket a key sits in is
    // random, so a loop that stopped at the match mispredicted on most
    // lookups (paired, a cold query's key checks cost a third less without
    // it: bench/README.md).
    uint32_t Matches(const PackedFingerprint& key) const {
      uint32_t equal = 0;
      for (uint32_t i = 0; i < kEntries; ++i) equal |= static_cast<uint32_t>(SameKey(keys[i], key)) << i;
      return equal & occupied;
    }
  };
  static_assert(sizeof(Value) * kEntries + sizeof(PackedFingerprint) * kEntries + 4 > 64 || sizeof(Bucket) == 64,
                "entries that fit a cache line take one");
  static_assert(kEntries >= 1 && kEntries <= 8, "occupancy is a byte of bits");
  static_assert(std::is_trivially_destructible_v<Bucket>,
                "a mapped array of zero bytes is an array of empty buckets (AllocateBuckets)");
  static_assert(sizeof(Bucket) <= 128, "a bucket is at most an aligned pair of cache lines");

  // Load bounds: grow past kMaxLoad of the entries, to kGrowLoad of them
  // (1.45x), or to kLargeGrowLoad (1.23x) once the table would be
  // kLargeTableBytes or more. A small table favours its writer: each key is
  // moved 2.2 times over the table's growth, not 4.3 times, and at the lower
  // load fewer inserts and erases walk past a full bucket (apply alone, 1M
  // keys: 10% more events/s). A large one favours memory, which is what
  // limits a pool: its load stays between 65% and 80%, about 28 bytes of key
  // table a key instead of 32 (100M tp8 keys with their groups: 36 bytes a
  // key all in, 40.5 with the small tables' rule), and a rebuild's old and
  // new arrays together weigh 2.23 tables, not 2.45. Lookups barely notice
  // (the large tables' rule on every table, paired at 1M keys: the cold
  // exact path +1%, apply alone -10%).
  static constexpr double kMaxLoad = 0.8;
  static constexpr double kGrowLoad = 0.55;
  static constexpr double kLargeGrowLoad = 0.65;
  // A renewal below this load shrinks the table to the grow load. Far below
  // it, so that only a table that lost most of its keys shrinks, and one
  // that shrank grows again only once its keys are 45% more (23% for a
  // table of kLargeTableBytes or more: kLargeGrowLoad).
  static constexpr double kShrinkLoad = 0.2;
  // A reserved table (Reserved) holding all it was sized for: room for 6%
  // more before its next growth, and no lower load than growth would leave.
  static constexpr double kReservedLoad = 0.75;
  static constexpr size_t kLargeTableBytes = size_t{32} << 20;
  static constexpr size_t kMinBuckets = 4;
  // A small table is not renewed for a handful of erases.
  static constexpr size_t kWornErases = 1024;

  size_t MaxSize() const { return static_cast<size_t>(static_cast<double>(n_buckets_ * kEntries) * kMaxLoad); }

  size_t Home(const PackedFingerprint& key) const {
    // Multiply-shift onto [0, n_buckets_): any bucket count, no modulo.
    __extension__ using Wide = unsigned __int128;
    return static_cast<size_t>((static_cast<Wide>(key.low()) * n_buckets_) >> 64);
  }
  size_t Next(size_t b) const { return b + 1 == n_buckets_ ? 0 : b + 1; }

  // Places an absent key, knowing there is room.
  Value* Place(const PackedFingerprint& key, const Value& value) {
    size_t b = Home(key);
    for (;;) {
      Bucket& bucket = buckets_[b];
      if (bucket.occupied != (1u << kEntries) - 1) {
        const uint32_t i = static_cast<uint32_t>(__builtin_ctz(~static_cast<uint32_t>(bucket.occupied)));
        bucket.occupied |= static_cast<uint8_t>(1u << i);
        bucket.keys[i] = key;
        bucket.values[i] = value;
        return &bucket.values[i];
      }
      if (bucket.overflow != kSaturated) ++bucket.overflow;
      bucket.passed |= PassBit(key);
      b = Next(b);
    }
  }

  // Bucket arrays of kMapBytes or more are mapped from the kernel and
  // unmapped when freed: a table's growth frees its old array, and from the
  // malloc heap that memory would stay resident (stranded between smaller
  // allocations). One of kHugePage or more is aligned to it and asks for
  // transparent huge pages before it is first touched: a query touches
  // lines all over the array, and with 4 KiB pages nearly every one of them
  // would also be a TLB miss.
  static constexpr size_t kMapBytes = size_t{64} << 10;
  static constexpr size_t kHugePage = size_t{2} << 20;

  static size_t MappedLength(size_t bytes) {
    const size_t unit = bytes >= kHugePage ? kHugePage : size_t{4096};
    return (bytes + unit - 1) / unit * unit;
  }

  struct FreeBuckets {
    size_t n = 0;
    void operator()(Bucket* buckets) const {
      std::destroy_n(buckets, n);
      const size_t bytes = n * sizeof(Bucket);
      if (bytes >= kMapBytes) {
        ::munmap(buckets, MappedLength(bytes));
      } else {
        ::operator delete(buckets, std::align_val_t{alignof(Bucket)});
      }
    }
  };
  using BucketArray = std::unique_ptr<Bucket[], FreeBuckets>;

  // An array of n empty buckets.
  static BucketArray AllocateBuckets(size_t n) {
    const size_t bytes = n * sizeof(Bucket);
    // Small arrays from operator new (so a test that fails allocations
    // reaches table growth too), large ones mapped.
    const bool mapped = bytes >= kMapBytes;
    void* memory = mapped ? Map(bytes) : ::operator new(bytes, std::align_val_t{alignof(Bucket)}, std::nothrow);
    if (memory == nullptr) throw std::bad_alloc();
    Bucket* buckets = static_cast<Bucket*>(memory);
    // A fresh anonymous mapping reads as zeros, which is every empty
    // bucket's representation (all its members start at 0): writing them
    // again would fault the whole array in before its first entry (a
    // snapshot's reserved tables: a gigabyte at 30M keys, seconds with the
    // download stalled behind it). Its pages come in as entries land.
    if (!mapped) std::uninitialized_value_construct_n(buckets, n);
    assert(EmptyBucketIsZeroBytes());
    return BucketArray(buckets, FreeBuckets{n});
  }

 public:
  // What mapped arrays rely on (AllocateBuckets): an empty bucket, values
  // included, is all zero bytes. Checked in debug builds on every mapping,
  // and by fingerprint_table_test for the index's value types.
  static bool EmptyBucketIsZeroBytes() {
    alignas(Bucket) unsigned char bytes[sizeof(Bucket)];
    std::memset(bytes, 0xA5, sizeof bytes);
    Bucket* empty = ::new (static_cast<void*>(bytes)) Bucket();
    static constexpr unsigned char kZeros[sizeof(Bucket)] = {};
    // Padding may keep the 0xA5 of before: only the members are compared.
    bool zero = std::memcmp(&empty->keys, kZeros, sizeof empty->keys) == 0 &&
                std::memcmp(&empty->values, kZeros, sizeof empty->values) == 0 && empty->occupied == 0 &&
                empty->passed == 0 && empty->overflow == 0;
    empty->~Bucket();
    return zero;
  }

 private:

  // MappedLength(bytes) of fresh zeroed memory, huge-page aligned when that
  // long; null if the kernel refuses.
  static void* Map(size_t bytes) {
    const size_t length = MappedLength(bytes);
    const size_t slack = length >= kHugePage ? kHugePage : 0;
    void* mapped = ::mmap(nullptr, length + slack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) return nullptr;
    if (slack == 0) return mapped;
    // Trim the mapping to a huge-page-aligned run of `length` bytes.
    const auto start = reinterpret_cast<uintptr_t>(mapped);
    const uintptr_t aligned = (start + kHugePage - 1) & ~(kHugePage - 1);
    if (aligned > start) ::munmap(mapped, aligned - start);
    const uintptr_t tail = start + length + slack - (aligned + length);
    if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + length), tail);
    (void)::madvise(reinterpret_cast<void*>(aligned), length, MADV_HUGEPAGE);  // a hint: 4 KiB pages if refused
    return reinterpret_cast<void*>(aligned);
  }

  // The buckets an array of at least n buckets has: all its memory holds.
  // A mapped array is rounded up to whole pages (huge pages from 2 MiB,
  // which it asks for: the kernel makes each resident whole as entries
  // land in it), bought anyway, so they may as well hold buckets; the
  // load is lower by as much (at most 2 MiB of buckets more).
  static size_t Buckets(size_t n) {
    if (n < kMinBuckets) n = kMinBuckets;
    if (n * sizeof(Bucket) >= kMapBytes) n = MappedLength(n * sizeof(Bucket)) / sizeof(Bucket);
    return n;
  }
  // An empty table of Buckets(n) buckets. Throws bad_alloc.
  static FingerprintTable Empty(size_t n, bool part_of_split) {
    n = Buckets(n);
    FingerprintTable table;
    table.buckets_ = AllocateBuckets(n);
    table.n_buckets_ = n;
    table.part_of_split_ = part_of_split;
    return table;
  }

  // For SplitTable::Split: an empty part with the room a growth of a part
  // would give `entries` (at kLargeGrowLoad), and a key placed in it,
  // knowing there is room. A part of 2 MiB or more takes the whole huge
  // pages nearest its size, fewer rather than more while they leave it at
  // most kSplitPartLoad full: the parts of a split are all about the same
  // size, so rounding each up could add 2 MiB 64 times (an outside review
  // measured 890 MiB of parts where a growth would have built 772).
  friend class SplitTable<Value, Entries>;
  static FingerprintTable PartOfSplit(size_t entries) {
    size_t n = BucketsFor(entries, kLargeGrowLoad);
    const size_t per_huge_page = kHugePage / sizeof(Bucket);
    const size_t fewer = n / per_huge_page * per_huge_page;
    if (fewer > 0 && static_cast<double>(entries) <= static_cast<double>(fewer * kEntries) * kSplitPartLoad) n = fewer;
    return Empty(n, true);
  }
  static constexpr double kSplitPartLoad = 0.75;
  void PlaceAbsent(const PackedFingerprint& key, const Value& value) {
    Place(key, value);
    ++size_;
  }

  BucketArray buckets_;
  size_t n_buckets_ = 0;
  size_t size_ = 0;
  size_t erased_ = 0;  // erases since buckets_ was built (worn())
  // A part of a split table (split_table.h): grows at kLargeGrowLoad
  // whatever its bytes, as the table it is a part of would.
  bool part_of_split_ = false;
};

}  // namespace sci
