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

#include <cstdint>
#include <string>
#include <string_view>

#include "index/fingerprint.h"
#include "index/fingerprint_table.h"
#include "index/key_entry.h"
#include "index/key_shape.h"
#include "index/page_store.h"
#include "index/slot_names.h"
#include "index/slot_plan.h"

namespace sci {

class ObjectStore {
 public:
  // Where a key lives: a slot of a page, or whole.
  struct Place {
    bool in_page = false;
    Fingerprint page;   // with in_page: the page entry's fingerprint
    uint32_t slot = 0;  // with in_page: the slot's number
    Fingerprint whole;  // without: the key's fingerprint in the per-object table
    bool past_slot_capacity = false;  // without: the key decomposes, but its slot has no number
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
  // Returns whether the key is new.
  bool Store(uint64_t tenant_seed, std::string_view key, MediaSet medium);
  // Returns whether the key went (false when absent, or kept on another medium).
  bool Remove(uint64_t tenant_seed, std::string_view key, MediaSet medium);
  void ClearTenant(uint64_t tenant_seed);
  void Clear();

  // ---- readers ----
  bool Contains(uint64_t tenant_seed, std::string_view key) const;
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
  bool PageHas(uint64_t tenant_seed, const PageDigest& digest, const SlotPlan& plan) const;

  // What breaks the store's invariants, or "" (PageStore::Inconsistency,
  // and a whole key's media fit their byte). For tests.
  std::string Inconsistency() const;

  // ---- sizes ----
  uint64_t objects() const { return pages_.slots_present() + whole_.size(); }
  size_t allocated_bytes() const { return pages_.allocated_bytes() + whole_.allocated_bytes(); }
  const PageStore& pages() const { return pages_; }
  const SlotNames& slot_names() const { return slot_names_; }
  size_t whole_keys() const { return whole_.size(); }
  uint64_t removals_dropped_for_memory() const { return pages_.removals_dropped_for_memory(); }
  // New keys that carry a digest but were filed whole because every slot
  // number was taken (SlotNames::kCapacity): each costs a per-object entry
  // (~20 B) instead of a bit. It stays 0 on a pool of a few layouts; a
  // count that grows says some writer names its keys with a new slot per
  // page, and that it has used the numbers up for every tenant (a review's
  // finding, documented as a limit); the index reports it.
  uint64_t stores_past_slot_capacity() const { return stores_past_slot_capacity_; }

 private:
  // A whole key's entry: its media (the low byte of a word, as KeyEntry's
  // top byte; the rest unused here).
  struct WholeEntry {
    uint32_t media = 0;
  };
  using WholeTable = FingerprintTable<WholeEntry, 3>;

  PageStore pages_;
  SlotNames slot_names_;
  WholeTable whole_;
  uint64_t stores_past_slot_capacity_ = 0;
};

}  // namespace sci
