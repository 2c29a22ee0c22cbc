// Where present object keys are kept: decomposing keys (key_shape.h) as
// slots of page entries (page_store.h), every other key whole, by its
// fingerprint, in a per-object table answered exactly as the index's key
// table always was. It knows no layout family: any key carrying a digest
// decomposes, whoever stored it.
//
// The residency rule is the caller's: it passes the medium a removal takes
// away (0: the whole key goes, as under the object rule or for a
// first-generation removal).
//
// Not thread-safe (the index's table lock guards it). Writer calls throw
// bad_alloc, changing nothing, when they cannot allocate.
#pragma once

#include <algorithm>
#include <cstdint>
#include <new>
#include <span>
#include <string>
#include <string_view>

#include "index/fingerprint.h"
#include "index/fingerprint_table.h"
#include "index/key_entry.h"
#include "index/key_shape.h"
#include "index/page_store.h"
#include "index/slot_names.h"
#include "index/slot_plan.h"
#include "index/split_table.h"

namespace sci {

class ObjectStore {
  // A whole key's entry: its media (the low byte of a word, as KeyEntry's
  // top byte; the rest unused here).
  struct WholeEntry {
    uint32_t media = 0;
  };
  using WholeTable = SplitTable<WholeEntry, 3>;

 public:
  // `split_bytes`: when a table splits into parts (split_table.h; 0: its
  // default). Tests pass a few KiB, to run every path on split tables.
  explicit ObjectStore(size_t split_bytes = 0) : pages_(split_bytes), whole_(split_bytes) {}

  // Where a key lives: a slot of a page, or whole.
  struct Place {
    bool in_page = false;
    Fingerprint page;   // with in_page: the page entry's fingerprint
    uint32_t slot = 0;  // with in_page: the slot's number
    Fingerprint whole;  // without: the key's fingerprint in the per-object table
    // Without in_page: the key decomposes, but its slot has no number (none
    // left, or its id is another name's: slot_names.h; or, located without
    // numbering, maybe not yet: Store numbers it).
    bool past_slot_capacity = false;
  };

  // Where `key` of the tenant whose seed is `tenant_seed` lives. `number`:
  // a slot not yet numbered gets a number (the writer; may throw bad_alloc).
  // A key's place never changes: its slot had a number when the first key
  // with it was stored, or never will (numbers ran out, and are never taken
  // back), so every key of a slot is where a reader looks for it.
  Place Locate(uint64_t tenant_seed, std::string_view key, bool number);
  Place Locate(uint64_t tenant_seed, std::string_view key) const {
    return const_cast<ObjectStore*>(this)->Locate(tenant_seed, key, false);
  }

  // ---- writer ----
  // `key` (of the tenant whose seed is `tenant_seed`, at `place`: Locate
  // of it, made without numbering, so outside any lock) is stored on
  // `medium`. A key whose slot has no number yet gets one here. Returns
  // what changed; throws bad_alloc, changing nothing, when it cannot
  // allocate.
  SlotChange Store(uint64_t tenant_seed, std::string_view key, const Place& place, MediaSet medium);
  // `key` at `place` is removed from `medium` (0: whatever media hold it).
  // Never throws (page_store.h, RemoveSlot).
  SlotChange Remove(const Place& place, MediaSet medium);
  // The same, locating the key first. Store returns whether the key is
  // new; Remove whether it went (false when absent, or kept on another medium).
  bool Store(uint64_t tenant_seed, std::string_view key, MediaSet medium) {
    return !Store(tenant_seed, key, Locate(tenant_seed, key), medium).was_present;
  }
  bool Remove(uint64_t tenant_seed, std::string_view key, MediaSet medium) {
    const SlotChange change = Remove(Locate(tenant_seed, key), medium);
    return change.was_present && !change.present;
  }

  // A tenant's clear in bounded runs: each call erases the keys of the
  // tenant whose tag is `tag` (and of any sharing it) from at most
  // `buckets` buckets, telling `gone(media, count)` of them, and returns
  // whether any table is left to walk. `walk` starts zeroed.
  struct TenantWalk {
    int table = 0;         // 0: the pages, 1: the whole keys, 2: done
    SplitTableCursor at;   // where in that table (a part and a bucket)
  };
  template <typename Gone>
  bool ClearTenantRun(uint32_t tag, TenantWalk* walk, size_t buckets, Gone&& gone) {
    if (walk->table == 0) {
      if (!pages_.ClearTenantRun(tag, &walk->at, buckets, gone)) *walk = TenantWalk{1, {}};
      return true;
    }
    if (walk->table == 1) {
      const bool more = whole_.erase_if_run(&walk->at, buckets, [&](const PackedFingerprint& key, const WholeEntry& entry) {
        if (TenantTagOf(key.Unpack()) != tag) return false;
        gone(static_cast<MediaSet>(entry.media), 1);
        return true;
      });
      if (!more) *walk = TenantWalk{2, {}};
    }
    return walk->table != 2;
  }
  void ClearTenant(uint64_t tenant_seed);
  void Clear();
  // Empties the store into `gone` (keys only: slot numbers stay, as they
  // must: slot_names.h), so that the old arrays are freed when `gone`
  // goes, after the caller's lock is released.
  void MoveContentsTo(ObjectStore& gone) noexcept {
    pages_.SwapContents(gone.pages_);
    whole_.swap(gone.whole_);
  }

  // Growth without a pause for readers: ahead of a store at `place`, grows
  // the table (or the part of a split table: split_table.h) it may insert
  // into if that is full, or renews it if erases have worn it
  // (FingerprintTable::worn), building the new array with no lock held (the
  // writer is the only thread that changes the store, so it may read it
  // unlocked) and swapping it in under `lock` (a TableLock, held
  // exclusively for the swap); the old array is freed after the lock is
  // released. A store then never rebuilds a table under the lock.
  template <typename Lock>
  void MakeRoom(const Place& place, Lock& lock) {
    if (place.in_page) pages_.MakeRoom(&place.page, lock, &renewals_);
    // A decomposing key with no slot number yet will most likely get one,
    // and its page entry's part is not known until it has: every full
    // part of the page table grows.
    if (place.past_slot_capacity) pages_.MakeRoom(nullptr, lock, &renewals_);
    if (!place.in_page) {
      const PackedFingerprint key(place.whole);
      whole_.MakeRoom(&key, lock, &renewals_);
    }
  }
  // Brings the line a store or removal at `place` will touch into cache.
  void Prefetch(const Place& place) const {
    if (place.in_page) {
      pages_.Prefetch(place.page);
    } else {
      whole_.prefetch(PackedFingerprint(place.whole));
    }
  }

  // ---- readers ----
  bool Contains(uint64_t tenant_seed, std::string_view key) const;
  // Whether the key at `place` (Locate) is present.
  bool Has(const Place& place) const {
    if (place.in_page) return pages_.Has(place.page, place.slot);
    return whole_.contains(PackedFingerprint(place.whole));
  }
  // A present key's media (0: unknown, or absent).
  MediaSet Media(uint64_t tenant_seed, std::string_view key) const;

  // The slots a layout needs of every page, resolved once (slot_plan.h);
  // ResolvePlan again once plan.current(slot_names()) is false.
  SlotPlan ResolvePlan(const std::vector<SlotName>& slots) const { return SlotPlan::Resolve(slot_names_, slots); }
  // Whether every key the plan names for the page with this digest is
  // present: one entry read per bank the plan needs (one for a layout's
  // slots met together), plus one lookup per key of a slot the plan could
  // not number. Exactly Contains() of each of those keys. May throw
  // bad_alloc when the plan has such slots (their keys are built).
  bool PageHas(uint64_t tenant_seed, const PageDigest& digest, const SlotPlan& plan) const {
    return PageTier(tenant_seed, digest, plan, {}, [](MediaSet) { return uint8_t{0}; }, 1) == 0;
  }
  // The fingerprints of a page's entries for the plan's banks, in the
  // plan's order (PageStore::PageKey): what a query computes with no lock
  // held, to prefetch and then pass to PageTier.
  static void PageKeys(uint64_t tenant_seed, const PageDigest& digest, const SlotPlan& plan, Fingerprint* out) {
    size_t i = 0;
    for (const SlotPlan::Bank& bank : plan.banks()) out[i++] = PageStore::PageKey(tenant_seed, digest, bank.bank);
  }
  void PrefetchPage(std::span<const Fingerprint> page_keys) const {
    for (const Fingerprint& key : page_keys) pages_.Prefetch(key);
  }
  // Whether every key the plan names for the page is present, and if so
  // the slowest of their tiers (tier_of(media) of each key's media, the
  // largest); `absent` if not every key is present. `page_keys`: PageKeys
  // of the plan for this page, or empty (then they are computed here).
  // May throw bad_alloc when the plan has whole or key-by-key slots.
  template <typename TierOf>
  uint8_t PageTier(uint64_t tenant_seed, const PageDigest& digest, const SlotPlan& plan,
                   std::span<const Fingerprint> page_keys, TierOf&& tier_of, uint8_t absent) const {
    SCI_DCHECK(page_keys.empty() || page_keys.size() == plan.banks().size(), "a page key per bank of the plan");
    // Checked in every build: a plan that is stale, another index's,
    // unresolved or empty is a miss.
    if (!plan.current(slot_names_) || plan.never_present() || !plan.proves_something()) return absent;
    uint8_t slowest = 0;
    const std::vector<SlotPlan::Bank>& banks = plan.banks();
    for (size_t i = 0; i < banks.size(); ++i) {
      const Fingerprint page = page_keys.empty() ? PageStore::PageKey(tenant_seed, digest, banks[i].bank) : page_keys[i];
      const uint8_t tier = pages_.SlowestTier(page, banks[i].required, tier_of, absent);
      if (tier == absent) return absent;
      slowest = std::max(slowest, tier);
    }
    for (const SlotName& slot : plan.whole()) {
      const WholeEntry* entry =
          whole_.find(PackedFingerprint(FingerprintOf(tenant_seed, KeyOf(slot.prefix, digest, slot.suffix))));
      if (entry == nullptr) return absent;
      slowest = std::max(slowest, static_cast<uint8_t>(tier_of(static_cast<MediaSet>(entry->media))));
    }
    for (const SlotName& slot : plan.by_key()) {
      const std::string key = KeyOf(slot.prefix, digest, slot.suffix);
      if (!Contains(tenant_seed, key)) return absent;
      slowest = std::max(slowest, static_cast<uint8_t>(tier_of(Media(tenant_seed, key))));
    }
    return slowest;
  }

  // What breaks the store's invariants, or "" (PageStore::Inconsistency,
  // and a whole key's media fit their byte). For tests.
  std::string Inconsistency() const;

  // Whether zero bytes are an empty bucket of both tables (fingerprint_table.h).
  static bool TablesStartAsZeroBytes() {
    return PageStore::Table::EmptyBucketIsZeroBytes() && WholeTable::EmptyBucketIsZeroBytes();
  }

  // ---- sizes ----
  uint64_t objects() const { return pages_.slots_present() + whole_.size(); }
  size_t allocated_bytes() const { return pages_.allocated_bytes() + whole_.allocated_bytes(); }
  const PageStore& pages() const { return pages_; }
  const SlotNames& slot_names() const { return slot_names_; }
  size_t whole_keys() const { return whole_.size(); }
  const WholeTable& whole_table() const { return whole_; }
  uint64_t removals_dropped_for_memory() const { return pages_.removals_dropped_for_memory(); }
  // New keys that carry a digest but were filed whole because every slot
  // number was taken (SlotNames::kCapacity): each costs a per-object entry
  // (~20 B) instead of a bit. (A slot whose id another name holds counts
  // here too: slot_names.h.) It stays 0 on a pool of a few layouts; a
  // count that grows says some writer names its keys with a new slot per
  // page, and that it has used the numbers up for every tenant (a review's
  // finding, documented as a limit); the index reports it.
  uint64_t stores_past_slot_capacity() const { return stores_past_slot_capacity_; }
  // Tables MakeRoom renewed (FingerprintTable::worn), and renewals skipped
  // because they could not allocate. For tests.
  uint64_t renewals() const { return renewals_.done; }
  uint64_t renewals_skipped() const { return renewals_.skipped; }

 private:
  PageStore pages_;
  SlotNames slot_names_;
  WholeTable whole_;
  uint64_t stores_past_slot_capacity_ = 0;
  TableRenewals renewals_;  // by MakeRoom, and those skipped for memory
};

}  // namespace sci
