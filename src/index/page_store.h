// The page store: one entry per page, for every object key that decomposes
// into a page digest and a slot (key_shape.h). The entry says which of the
// page's slots are present and on which media; a page query reads one entry
// and answers from it exactly: the page is present when every slot its
// layout needs is.
//
// Why: stored one entry per object, a page of 16 objects (8 ranks' K and
// V) is 16 entries of a 16-byte fingerprint each (about 590 bytes a page
// with the groups that made its lookup fast), and a query reads up to 16
// scattered lines for it. Here it is one 12-byte entry beside its
// fingerprint, half a cache line (2.5 to 3 bytes an object for 16-object
// pages with the table's slack), read in one line.
//
// Keyed by the page's fingerprint (PageKey): its digest, its tenant's seed
// (the tenant's tag in the fingerprint, as for keys: fingerprint.h) and the
// bank of its slots (slot_names.h: slots are numbered in banks of 64; a page
// whose slots span two banks has two entries).
//
// Media. Under the per-medium residency rule each present slot has a set of
// media (key_entry.h's MediaSet; 0: unknown, which any removal drops). A
// page's slots nearly always share theirs (a worker stores a page's objects
// on one medium), so the entry holds one set for all of them; a page whose
// slots come to differ moves its sets to a side table (mixed_) until they
// agree again (FoldIfUniform). Under the object rule every set is 0. The
// rule of what a store or removal leaves: key_entry.h, MediaAfterStore and
// MediaLeftAfterRemoval.
//
// Not thread-safe: the index guards it with its table lock, as its other
// tables. Pointers into the table stay valid until the next insertion.
// Its invariants: docs/architecture.md, I2.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <unordered_map>

#include "common/check.h"
#include "common/format.h"
#include "common/process_secret.h"
#include "index/fingerprint.h"
#include "index/fingerprint_table.h"
#include "index/key_entry.h"
#include "index/key_shape.h"
#include "index/slot_names.h"
#include "index/split_table.h"

namespace sci {

struct PageEntry {
  // Bit n: slot (bank * 64 + n) is present. Two halves: 4-byte alignment
  // packs two entries and their fingerprints into one cache line.
  uint32_t slots_low = 0;
  uint32_t slots_high = 0;
  // Bits 0-7: the media every present slot is on (while not mixed);
  // kMixed: the slots' media differ, each slot's in PageStore::mixed_.
  uint32_t media = 0;

  static constexpr uint32_t kMixed = 1u << 8;

  uint64_t slots() const { return (uint64_t{slots_high} << 32) | slots_low; }
  void set_slots(uint64_t slots) {
    slots_low = static_cast<uint32_t>(slots);
    slots_high = static_cast<uint32_t>(slots >> 32);
  }
  bool mixed() const { return (media & kMixed) != 0; }
  MediaSet uniform_media() const { return static_cast<MediaSet>(media); }
};
static_assert(sizeof(PageEntry) == 12, "two entries and their fingerprints fill one cache line");

// What a store or removal did to one slot (or one whole key): present
// before and after, and its media before and after (0 when absent).
struct SlotChange {
  bool was_present = false;
  bool present = false;
  MediaSet was_media = 0;
  MediaSet media = 0;
};

class PageStore {
 public:
  using Table = SplitTable<PageEntry, 2>;

  // `split_bytes`: when the page table splits into parts (split_table.h;
  // 0: its default).
  explicit PageStore(size_t split_bytes = 0) : table_(split_bytes) {}

  // The fingerprint of a page's entry for slot bank `bank`: XXH3-128 of
  // all 32 bytes of the digest, seeded by the tenant, the bank and the
  // process's secret (common/process_secret.h), with the tenant's tag in
  // place of 8 bits. The secret keeps digests someone chose (a worker's
  // keys, a router's digests) from being aimed at one fingerprint or one
  // bucket: with a known seed, XXH3's products over a 24-byte input can be
  // zeroed by choosing 16 of its bytes (a review reproduced 2^64 digests
  // sharing a fingerprint, and pages sharing a home bucket by the
  // thousand). So a false hit needs a 120-bit collision, as for keys.
  static Fingerprint PageKey(uint64_t tenant_seed, const PageDigest& digest, uint32_t bank) {
    const XXH128_hash_t h = XXH3_128bits_withSeed(digest.data(), digest.size(), BankSeed(tenant_seed, bank));
    return Fingerprint{h.low64, WithTenantTag(h.high64, tenant_seed)};
  }

  // ---- writer ----

  // Slot `slot` of `page` is stored on `medium` (0: unknown). A known medium
  // is added to a present slot's known media; an unknown one makes them
  // unknown (key_entry.h, MediaAfterStore). Returns what changed. Throws
  // bad_alloc, changing nothing, if it cannot allocate.
  SlotChange StoreSlot(const Fingerprint& page, uint32_t slot, MediaSet medium) {
    const PackedFingerprint key(page);
    PageEntry* entry = table_.find(key);
    const bool new_page = entry == nullptr;
    if (new_page) entry = table_.insert_absent(key, PageEntry{});  // may throw: nothing changed
    const uint64_t bit = SlotNames::BitOf(slot);
    SlotChange change;
    change.was_present = (entry->slots() & bit) != 0;
    change.was_media = change.was_present ? MediaOf(page, *entry, slot) : 0;
    change.present = true;
    change.media = change.was_present ? MediaAfterStore(change.was_media, medium) : medium;
    try {
      SetMedia(page, *entry, slot, change.media);
    } catch (const std::bad_alloc&) {
      if (new_page) table_.erase(key, entry);
      throw;
    }
    entry->set_slots(entry->slots() | bit);
    if (!change.was_present) ++slots_present_;
    return change;
  }
  // Whether the slot is new.
  bool Store(const Fingerprint& page, uint32_t slot, MediaSet medium) {
    return !StoreSlot(page, slot, medium).was_present;
  }

  // Slot `slot` of `page` is removed from `medium`. With `medium` 0, or
  // media unknown, the slot goes whatever media held it; else it stays
  // while another medium holds it. Returns what changed. Never throws: a
  // slot whose smaller media set cannot be recorded (no memory) goes (a
  // miss, never a false hit; counted in removals_dropped_for_memory).
  SlotChange RemoveSlot(const Fingerprint& page, uint32_t slot, MediaSet medium) {
    const PackedFingerprint key(page);
    PageEntry* entry = table_.find(key);
    const uint64_t bit = SlotNames::BitOf(slot);
    SlotChange change;
    if (entry == nullptr || (entry->slots() & bit) == 0) return change;
    change.was_present = true;
    change.was_media = MediaOf(page, *entry, slot);
    const MediaSet left = MediaLeftAfterRemoval(change.was_media, medium);
    if (left != 0) {
      try {
        SetMedia(page, *entry, slot, left);
        change.present = true;
        change.media = left;
        return change;
      } catch (const std::bad_alloc&) {
        ++removals_dropped_for_memory_;  // dropped below instead
      }
    }
    const uint64_t slots = entry->slots() & ~bit;
    entry->set_slots(slots);
    SCI_DCHECK(slots_present_ > 0, "a present slot is counted");
    --slots_present_;
    if (entry->mixed()) {
      auto row = mixed_.find(page);
      SCI_DCHECK(row != mixed_.end(), "a mixed page has its row of media");
      if (slots == 0) {
        mixed_.erase(row);
      } else {
        row->second[slot % SlotNames::kBankSlots] = 0;
        FoldIfUniform(page, *entry, slots);
      }
    }
    if (slots == 0) table_.erase(key, entry);
    return change;
  }
  // Whether the slot went (false when absent, or kept on another medium).
  bool Remove(const Fingerprint& page, uint32_t slot, MediaSet medium) {
    const SlotChange change = RemoveSlot(page, slot, medium);
    return change.was_present && !change.present;
  }

  // Drops the pages of the tenant whose tag is `tag` (fingerprint.h), and
  // of any tenant sharing it (a miss, never a false hit), in the next
  // `buckets` buckets of the table from `cursor` on; `gone(media, slots)`
  // hears of each page's present slots as they go (a page of mixed media
  // once per slot). Returns whether buckets are left. Never allocates. A
  // bounded run, so that the caller can release its lock between runs.
  template <typename Gone>
  bool ClearTenantRun(uint32_t tag, Table::Cursor* cursor, size_t buckets, Gone&& gone) {
    return table_.erase_if_run(cursor, buckets, [&](const PackedFingerprint& key, const PageEntry& entry) {
      const Fingerprint page = key.Unpack();
      if (TenantTagOf(page) != tag) return false;
      slots_present_ -= static_cast<uint64_t>(std::popcount(entry.slots()));
      if (!entry.mixed()) {
        gone(entry.uniform_media(), static_cast<uint64_t>(std::popcount(entry.slots())));
        return true;
      }
      const auto row = mixed_.find(page);
      SCI_DCHECK(row != mixed_.end(), "a mixed page has its row of media");
      for (uint64_t left = entry.slots(); left != 0; left &= left - 1) gone(row->second[std::countr_zero(left)], 1);
      mixed_.erase(row);
      return true;
    });
  }

  // Exchanges contents (entries, media rows, count) with `other`; the
  // count of dropped removals stays (it is the store's history). For a
  // clear that frees the old arrays after the caller's lock is released.
  void SwapContents(PageStore& other) noexcept {
    table_.swap(other.table_);
    mixed_.swap(other.mixed_);
    std::swap(slots_present_, other.slots_present_);
  }
  // Makes room for a store into `page`'s entry (null: a page not known
  // yet) without a pause for readers: SplitTable::MakeRoom.
  template <typename Lock>
  void MakeRoom(const Fingerprint* page, Lock& lock, TableRenewals* renewals) {
    if (page == nullptr) return table_.MakeRoom(nullptr, lock, renewals);
    const PackedFingerprint key(*page);
    table_.MakeRoom(&key, lock, renewals);
  }

  // Drops every page of the tenant whose tag is `tag` (fingerprint.h), and
  // of any tenant sharing it (a miss, never a false hit).
  void ClearTenant(uint32_t tag) {
    Table::Cursor all;
    ClearTenantRun(tag, &all, SIZE_MAX, [](MediaSet, uint64_t) {});
  }

  void Clear() {
    table_.clear();
    mixed_.clear();
    slots_present_ = 0;
  }

  // ---- readers ----

  void Prefetch(const Fingerprint& page) const { table_.prefetch(PackedFingerprint(page)); }

  // The page's slot word (0: no entry): which of its bank's slots are present.
  uint64_t Slots(const Fingerprint& page) const {
    const PageEntry* entry = table_.find(PackedFingerprint(page));
    return entry == nullptr ? 0 : entry->slots();
  }
  bool Has(const Fingerprint& page, uint32_t slot) const { return (Slots(page) & SlotNames::BitOf(slot)) != 0; }

  // Whether every slot of `required` (bits of one bank) is present, and if
  // so the slowest of their tiers: tier_of(media) for each slot's media,
  // the largest wins. `absent` when not every slot is present.
  template <typename TierOf>
  uint8_t SlowestTier(const Fingerprint& page, uint64_t required, TierOf&& tier_of, uint8_t absent) const {
    const PageEntry* entry = table_.find(PackedFingerprint(page));
    if (entry == nullptr || (entry->slots() & required) != required) return absent;
    if (!entry->mixed()) return tier_of(entry->uniform_media());
    const auto found = mixed_.find(page);
    SCI_DCHECK(found != mixed_.end(), "a mixed page has its row of media");
    const auto& row = found->second;
    uint8_t slowest = 0;
    for (uint64_t left = required; left != 0; left &= left - 1) {
      const uint8_t tier = tier_of(row[std::countr_zero(left)]);
      if (tier > slowest) slowest = tier;
    }
    return slowest;
  }

  // The media of present slot `slot` (0: unknown, or absent).
  MediaSet Media(const Fingerprint& page, uint32_t slot) const {
    const PageEntry* entry = table_.find(PackedFingerprint(page));
    if (entry == nullptr || (entry->slots() & SlotNames::BitOf(slot)) == 0) return 0;
    return MediaOf(page, *entry, slot);
  }

  // What breaks the store's invariants (docs/architecture.md, "The page
  // store"), or "" when nothing does: its table's (I57); every entry has a
  // slot; the count of present slots is theirs; an entry is mixed exactly
  // when it has a row, and a row gives no media to a slot that is absent.
  // A walk of the whole store: for tests, after every step.
  std::string Inconsistency() const {
    std::string what = table_.Inconsistency();
    if (!what.empty()) return "page table: " + what;
    uint64_t slots = 0;
    size_t mixed = 0;
    table_.for_each([&](const PackedFingerprint& key, const PageEntry& entry) {
      if (!what.empty()) return;
      const Fingerprint page = key.Unpack();
      if (entry.slots() == 0) what = "an entry without a present slot";
      slots += static_cast<uint64_t>(std::popcount(entry.slots()));
      const auto row = mixed_.find(page);
      if (entry.mixed() != (row != mixed_.end())) {
        what = entry.mixed() ? "a mixed entry without its row" : "a row for an entry that is not mixed";
        return;
      }
      if ((entry.media & ~(PageEntry::kMixed | 0xFFu)) != 0) what = "media bits beyond a byte and the flag";
      if (!entry.mixed()) return;
      ++mixed;
      for (uint32_t n = 0; n < SlotNames::kBankSlots; ++n) {
        if ((entry.slots() >> n & 1) == 0 && row->second[n] != 0) what = "media for an absent slot";
      }
    });
    if (!what.empty()) return what;
    if (slots != slots_present_) {
      return sci::StrFormat("%d present slots counted, %d in the entries", slots_present_, slots);
    }
    if (mixed != mixed_.size()) return sci::StrFormat("%d rows of media for %d mixed entries", mixed_.size(), mixed);
    return "";
  }

  // ---- sizes ----

  size_t entries() const { return table_.size(); }
  uint64_t slots_present() const { return slots_present_; }
  // Removals from one medium that dropped the whole slot because the media
  // left could not be recorded (Remove): a miss the store chose.
  uint64_t removals_dropped_for_memory() const { return removals_dropped_for_memory_; }
  size_t mixed_pages() const { return mixed_.size(); }
  size_t allocated_bytes() const {
    return table_.allocated_bytes() + mixed_.size() * (sizeof(MixedRow) + 2 * sizeof(void*)) + mixed_.bucket_count() * sizeof(void*);
  }
  const Table& table() const { return table_; }

 private:
  using MixedRow = std::pair<const Fingerprint, std::array<MediaSet, SlotNames::kBankSlots>>;
  struct IdHash {
    size_t operator()(const Fingerprint& f) const { return static_cast<size_t>(f.low); }
  };

  static uint64_t BankSeed(uint64_t tenant_seed, uint32_t bank) {
    constexpr uint64_t kBankStride = 0x9E3779B97F4A7C15ull;
    return DomainSeed(tenant_seed, kBankStride * (uint64_t{bank} + 1));
  }

  MediaSet MediaOf(const Fingerprint& page, const PageEntry& entry, uint32_t slot) const {
    if (!entry.mixed()) return entry.uniform_media();
    const auto row = mixed_.find(page);
    SCI_DCHECK(row != mixed_.end(), "a mixed page has its row of media");
    return row->second[slot % SlotNames::kBankSlots];
  }

  // Records `media` as present slot `slot`'s (or the slot about to be).
  // Throws bad_alloc, changing nothing, when a page's slots come to differ
  // and their row cannot be made.
  void SetMedia(const Fingerprint& page, PageEntry& entry, uint32_t slot, MediaSet media) {
    const uint32_t n = slot % SlotNames::kBankSlots;
    if (entry.mixed()) {
      const auto row = mixed_.find(page);
      SCI_DCHECK(row != mixed_.end(), "a mixed page has its row of media");
      row->second[n] = media;
      // (The caller sets the slot's bit after this: count it present.)
      FoldIfUniform(page, entry, entry.slots() | SlotNames::BitOf(slot));
      return;
    }
    const uint64_t others = entry.slots() & ~SlotNames::BitOf(slot);
    if (others == 0) {
      entry.media = media;  // the only slot: its media are the page's
      return;
    }
    if (media == entry.uniform_media()) return;
    std::array<MediaSet, SlotNames::kBankSlots> row{};
    for (uint64_t left = others; left != 0; left &= left - 1) row[std::countr_zero(left)] = entry.uniform_media();
    row[n] = media;
    mixed_.emplace(page, row);  // may throw: the entry is as it was
    entry.media = PageEntry::kMixed;
  }

  // A mixed page whose `present` slots are all on the same media again
  // goes back to one set in its entry, and its row goes (an erase: no
  // allocation). Without it, a tiered pool's pages stayed mixed for good:
  // an offload stores each key on the new medium in turn, so every page
  // passes through "differ" (10 B an object instead of 3.2, reviewed).
  void FoldIfUniform(const Fingerprint& page, PageEntry& entry, uint64_t present) {
    const auto row = mixed_.find(page);
    const MediaSet first = row->second[std::countr_zero(present)];
    for (uint64_t left = present; left != 0; left &= left - 1) {
      if (row->second[std::countr_zero(left)] != first) return;
    }
    mixed_.erase(row);
    entry.media = first;
  }

  Table table_;
  // Per-slot media of the pages whose slots' media differ. A standard map:
  // a failed insertion changes nothing (see SlotNames).
  std::unordered_map<Fingerprint, std::array<MediaSet, SlotNames::kBankSlots>, IdHash> mixed_;
  uint64_t slots_present_ = 0;
  uint64_t removals_dropped_for_memory_ = 0;
};

}  // namespace sci
