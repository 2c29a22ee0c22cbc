// One FingerprintTable while it is small, 64 of them (parts, each holding
// the keys whose fingerprint's bits 3-8 name it) once it is large: so
// that a large table grows a part at a time.
//
// Why: a table grows by building its new array beside the old one, which
// readers go on reading until the swap (I38). A table growing whole
// therefore holds its old array and a new one 1.23 times larger at once:
// a page store of 1 billion tp8 objects, 3.0 GB at rest, needed 5.4 GB at
// the peak of a growth (bench/README.md, "Page store"). A part's growth
// holds one part twice: the peak is the table plus the new part, 1.23/64
// of it (2%).
//
// Why not parts from the start: every lookup of a split table reads its
// part's header first, and parts of a small table are smaller than a huge
// page, so their lookups lose the transparent huge pages a whole table
// gets (a first try, parts for every table, cost cold lookups 15-23%).
// A table stays whole while its growths stay under kSplitBytes (512 MiB:
// the page table of about 210M tp8 objects), a peak under 1 GB; the
// growth that would reach it splits it instead (Split): the same peak as
// that growth, once. Past it, lookups cost 7% more (page_store_bench,
// page_store/split: 16M pages, present and absent). A split table never
// joins again (a clear empties it whole).
//
// Keys pick their part by bits 3-8 of the fingerprint's low half
// (SplitPartOf says why those).
//
// Not thread-safe: the index guards it with its table lock, readers
// shared; MakeRoom takes the lock exclusively for a swap only.
// Invariant: docs/architecture.md, I58.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

#include "common/check.h"
#include "common/format.h"
#include "index/fingerprint_table.h"

namespace sci {

// Renewals of worn tables (FingerprintTable::worn) that MakeRoom made, and
// those it skipped because it could not allocate.
struct TableRenewals {
  uint64_t done = 0;
  uint64_t skipped = 0;
};

// Where a bounded walk of a split table (erase_if_run) is: a part and a
// bucket in it.
struct SplitTableCursor {
  uint32_t part = 0;
  size_t bucket = 0;
};

template <typename Value, uint32_t Entries>
class SplitTable {
 public:
  using Part = FingerprintTable<Value, Entries>;
  static constexpr uint32_t kParts = 64;
  static constexpr uint32_t kPartBits = 6;
  static_assert(kParts == 1u << kPartBits);
  static constexpr size_t kSplitBytes = size_t{512} << 20;

  // `split_bytes`: a growth of the one table to this many bytes or more
  // splits it instead (0: kSplitBytes). Tests pass a few KiB (or 1: split
  // at the first store), to run every path on a split table.
  explicit SplitTable(size_t split_bytes = 0) : split_bytes_(split_bytes == 0 ? kSplitBytes : split_bytes) {}
  SplitTable(const SplitTable&) = delete;
  SplitTable& operator=(const SplitTable&) = delete;

  // Exchanges contents (parts and whether split), keeping each its split
  // threshold.
  void swap(SplitTable& other) noexcept {
    std::swap(split_, other.split_);
    std::swap(size_, other.size_);
    for (uint32_t p = 0; p < kParts; ++p) parts_[p].swap(other.parts_[p]);
  }

  bool split() const { return split_; }
  uint32_t parts_in_use() const { return split_ ? kParts : 1; }
  const Part& part(uint32_t p) const { return parts_[p]; }
  // The part that holds `key`, or would.
  uint32_t PartOf(const PackedFingerprint& key) const { return split() ? SplitPartOf(key) : 0; }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t bucket_count() const { return SumOverParts([](const Part& p) { return p.bucket_count(); }); }
  size_t allocated_bytes() const { return SumOverParts([](const Part& p) { return p.allocated_bytes(); }); }
  size_t erased_since_built() const { return SumOverParts([](const Part& p) { return p.erased_since_built(); }); }
  // Whether a part is worn (FingerprintTable::worn); MakeRoom renews it at
  // the next store into it.
  bool worn() const {
    for (uint32_t p = 0; p < parts_in_use(); ++p) {
      if (parts_[p].worn()) return true;
    }
    return false;
  }

  // ---- readers ----
  // An unsplit table's lookups take a branch, predicted, to part 0, rather
  // than index the parts by a masked part number: so they start loading
  // the table's header without waiting for the key (paired, a mask cost
  // lookups of present pages 5 ns, 8%, at 1M objects).
  void prefetch(const PackedFingerprint& key) const {
    if (!split()) return parts_[0].prefetch(key);
    parts_[SplitPartOf(key)].prefetch(key);
  }
  const Value* find(const PackedFingerprint& key) const { return const_cast<SplitTable*>(this)->find(key); }
  Value* find(const PackedFingerprint& key) {
    if (!split()) return parts_[0].find(key);
    return parts_[SplitPartOf(key)].find(key);
  }
  bool contains(const PackedFingerprint& key) const { return find(key) != nullptr; }
  size_t buckets_read(const PackedFingerprint& key) const { return parts_[PartOf(key)].buckets_read(key); }

  template <typename F>
  void for_each(F&& f) const {
    for (uint32_t p = 0; p < parts_in_use(); ++p) parts_[p].for_each(f);
  }

  // ---- writer ----

  // Inserts `key` (absent) with `value`; the stored value. Grows its part
  // under the caller's lock if MakeRoom did not (the fallback). Throws
  // bad_alloc, changing nothing, if it must grow and cannot.
  Value* insert_absent(const PackedFingerprint& key, const Value& value) {
    Value* stored = parts_[PartOf(key)].insert_absent(key, value);
    ++size_;
    return stored;
  }
  // Frees the entry of `key` holding `value` (a pointer find(key) returned).
  void erase(const PackedFingerprint& key, Value* value) {
    parts_[PartOf(key)].erase(value);
    --size_;
  }

  using Cursor = SplitTableCursor;
  // Calls f(key, value) for every entry of the next `buckets` buckets from
  // `cursor` on (across parts), erasing those it returns true for, and
  // returns whether buckets are left. Between runs, erases but no
  // insertion (an insertion may rebuild a part; a split renumbers all).
  template <typename F>
  bool erase_if_run(Cursor* cursor, size_t buckets, F&& f) {
    while (buckets > 0 && cursor->part < parts_in_use()) {
      Part& part = parts_[cursor->part];
      const size_t last = cursor->bucket + std::min(buckets, part.bucket_count() - cursor->bucket);
      const size_t before = part.size();
      part.erase_if(cursor->bucket, last, f);
      size_ -= before - part.size();
      buckets -= last - cursor->bucket;
      cursor->bucket = last;
      if (last == part.bucket_count()) *cursor = Cursor{cursor->part + 1, 0};
    }
    return cursor->part < parts_in_use();
  }
  template <typename F>
  void erase_if(F&& f) {
    Cursor all;
    while (erase_if_run(&all, SIZE_MAX, f)) {
    }
  }

  // Growth without a pause for readers, ahead of a store of `key` (null:
  // of a key whose part is not known yet, a slot about to be numbered):
  // grows the part it goes to if that is full, or renews it if erases have
  // worn it (FingerprintTable::worn), or splits the one table if it is
  // full and its growth would reach split_bytes; with no key, grows every
  // full part. Each new array is built with no lock held (only the writer
  // changes tables, so it may read them unlocked) and swapped in under
  // `lock` (held exclusively for the swap); old arrays are freed after it
  // is released. A store then never rebuilds under the lock. A growth or split that cannot allocate throws
  // bad_alloc before any change, as the store itself would; a renewal that
  // cannot is skipped (the worn part still answers exactly, only slower).
  template <typename Lock>
  void MakeRoom(const PackedFingerprint* key, Lock& lock, TableRenewals* renewals) {
    if (!split()) {
      const Part& one = parts_[0];
      // The growth that would take the table to split_bytes or more splits it
      // instead: the split holds the table and its parts, as that growth would
      // have held the table and its new array.
      if (one.full() && one.GrownBytes() >= split_bytes_) {
        Split(lock);
        return;
      }
      RebuildIfDue(0, lock, renewals);
      return;
    }
    if (key != nullptr) {
      RebuildIfDue(PartOf(*key), lock, renewals);
      return;
    }
    for (uint32_t p = 0; p < kParts; ++p) {
      if (parts_[p].full()) RebuildIfDue(p, lock, renewals);
    }
  }

  // Forgets every entry, frees every array, and joins the parts again.
  void clear() {
    for (Part& part : parts_) part.clear();
    split_ = false;
    size_ = 0;
  }

  // What breaks the table's invariants, or "": each part's (I57); every
  // key sits in the part PartOf names (I58); the parts' sizes sum to
  // size(); an unsplit table uses part 0 alone. For tests.
  std::string Inconsistency() const {
    size_t total = 0;
    for (uint32_t p = 0; p < kParts; ++p) {
      const Part& part = parts_[p];
      if (p >= parts_in_use() && part.bucket_count() != 0) return "an array in a part of an unsplit table";
      std::string what = part.Inconsistency();
      if (!what.empty()) return sci::StrFormat("part %d: %s", p, what);
      part.for_each([&](const PackedFingerprint& key, const Value&) {
        if (what.empty() && PartOf(key) != p) what = sci::StrFormat("a key of part %d in part %d", PartOf(key), p);
      });
      if (!what.empty()) return what;
      total += part.size();
    }
    if (total != size_) return sci::StrFormat("parts holding %d keys, %d counted", total, size_);
    return "";
  }

  static bool EmptyBucketIsZeroBytes() { return Part::EmptyBucketIsZeroBytes(); }

 private:
  template <typename F>
  size_t SumOverParts(F&& f) const {
    size_t sum = 0;
    for (uint32_t p = 0; p < parts_in_use(); ++p) sum += f(parts_[p]);
    return sum;
  }

  template <typename Lock>
  void RebuildIfDue(uint32_t p, Lock& lock, TableRenewals* renewals) {
    const Part& part = parts_[p];
    Part rebuilt;
    if (part.full()) {
      rebuilt = part.Grown();
    } else if (part.worn()) {
      try {
        rebuilt = part.Renewed();
      } catch (const std::bad_alloc&) {
        ++renewals->skipped;
        return;
      }
      ++renewals->done;
    } else {
      return;
    }
    lock.Lock();
    parts_[p].swap(rebuilt);
    lock.Unlock();
  }

  // The one table into kParts parts, each sized as a growth would size its
  // keys (at the large tables' load: they are parts of one): counted
  // first, so that no part can be filled past its room whatever the keys.
  template <typename Lock>
  void Split(Lock& lock) {
    const Part& one = parts_[0];
    std::array<size_t, kParts> counts{};
    one.for_each([&](const PackedFingerprint& key, const Value&) { ++counts[SplitPartOf(key)]; });
    std::array<Part, kParts> parts;
    for (uint32_t p = 0; p < kParts; ++p) parts[p] = Part::PartOfSplit(counts[p] + 1);  // may throw: nothing changed
    one.for_each([&](const PackedFingerprint& key, const Value& value) { parts[SplitPartOf(key)].PlaceAbsent(key, value); });
    lock.Lock();
    for (uint32_t p = 0; p < kParts; ++p) parts_[p].swap(parts[p]);
    split_ = true;
    lock.Unlock();
    // `parts` now holds the old table, freed here, after the lock.
  }
  // Bits 3-8 of the fingerprint's low half: not the bits a key's filter
  // bit comes from (0-2, FingerprintTable::PassBit), and all but free of
  // its home within the part (Home multiplies the low half by the bucket
  // count and keeps the top bits). The low half, not the high: a lookup
  // loads it anyway, and the high half of a fingerprint just stored whole
  // may reach the load later (a store forwarded in part).
  static uint32_t SplitPartOf(const PackedFingerprint& key) { return (key.words[0] >> 3) & (kParts - 1); }

  bool split_ = false;  // whether the parts are in use (else part 0 alone)
  size_t size_ = 0;
  size_t split_bytes_;
  std::array<Part, kParts> parts_;
};

}  // namespace sci
