#include "index/object_store.h"

namespace sci {

ObjectStore::Place ObjectStore::Locate(uint64_t tenant_seed, std::string_view key, bool number) {
  Place place;
  const KeyShape shape = ShapeOf(key);
  if (shape.decomposes) {
    const Fingerprint id = SlotId(shape.prefix, shape.suffix);
    const uint32_t slot = number ? slot_names_.Number(id, shape.prefix, shape.suffix) : slot_names_.Find(id);
    if (slot != SlotNames::kNone) {
      place.in_page = true;
      place.slot = slot;
      place.page = PageStore::PageKey(tenant_seed, shape.digest, SlotNames::BankOf(slot));
      return place;
    }
    place.past_slot_capacity = true;
  }
  place.whole = FingerprintOf(tenant_seed, key);
  return place;
}

bool ObjectStore::Store(uint64_t tenant_seed, std::string_view key, MediaSet medium) {
  const Place place = Locate(tenant_seed, key, /*number=*/true);
  if (place.in_page) return pages_.Store(place.page, place.slot, medium);
  const PackedFingerprint packed(place.whole);
  WholeEntry* entry = whole_.find(packed);
  if (entry == nullptr) {
    whole_.insert_absent(packed, WholeEntry{medium});  // may throw: nothing changed, nothing counted
    if (place.past_slot_capacity) ++stores_past_slot_capacity_;
    return true;
  }
  entry->media = MediaAfterStore(static_cast<MediaSet>(entry->media), medium);
  return false;
}

bool ObjectStore::Remove(uint64_t tenant_seed, std::string_view key, MediaSet medium) {
  const Place place = Locate(tenant_seed, key);
  if (place.in_page) return pages_.Remove(place.page, place.slot, medium);
  WholeEntry* entry = whole_.find(PackedFingerprint(place.whole));
  if (entry == nullptr) return false;
  const MediaSet left = MediaLeftAfterRemoval(static_cast<MediaSet>(entry->media), medium);
  if (left != 0) {
    entry->media = left;
    return false;
  }
  whole_.erase(entry);
  return true;
}

void ObjectStore::ClearTenant(uint64_t tenant_seed) {
  const uint32_t tag = TenantTag(tenant_seed);
  pages_.ClearTenant(tag);
  whole_.erase_if(0, whole_.bucket_count(),
                  [&](const PackedFingerprint& key, const WholeEntry&) { return TenantTagOf(key.Unpack()) == tag; });
}

std::string ObjectStore::Inconsistency() const {
  std::string what = pages_.Inconsistency();
  whole_.for_each([&](const PackedFingerprint&, const WholeEntry& entry) {
    if (what.empty() && entry.media > 0xFF) what = "a whole key's media beyond a byte";
  });
  return what;
}

void ObjectStore::Clear() {
  pages_.Clear();
  whole_.clear();
}

bool ObjectStore::Contains(uint64_t tenant_seed, std::string_view key) const {
  const Place place = Locate(tenant_seed, key);
  if (place.in_page) return pages_.Has(place.page, place.slot);
  return whole_.contains(PackedFingerprint(place.whole));
}

bool ObjectStore::PageHas(uint64_t tenant_seed, const PageDigest& digest, const SlotPlan& plan) const {
  SCI_DCHECK(plan.current(slot_names_), "a plan resolved since the last slot was numbered");
  // Checked in every build: an unresolved or empty plan is a miss.
  if (plan.never_present() || !plan.proves_something()) return false;
  for (const SlotPlan::Bank& bank : plan.banks()) {
    const uint64_t slots = pages_.Slots(PageStore::PageKey(tenant_seed, digest, bank.bank));
    if ((slots & bank.required) != bank.required) return false;
  }
  for (const SlotName& slot : plan.whole()) {
    if (!whole_.contains(PackedFingerprint(FingerprintOf(tenant_seed, KeyOf(slot.prefix, digest, slot.suffix))))) {
      return false;
    }
  }
  for (const SlotName& slot : plan.by_key()) {
    if (!Contains(tenant_seed, KeyOf(slot.prefix, digest, slot.suffix))) return false;
  }
  return true;
}

MediaSet ObjectStore::Media(uint64_t tenant_seed, std::string_view key) const {
  const Place place = Locate(tenant_seed, key);
  if (place.in_page) return pages_.Media(place.page, place.slot);
  const WholeEntry* entry = whole_.find(PackedFingerprint(place.whole));
  return entry == nullptr ? 0 : static_cast<MediaSet>(entry->media);
}

}  // namespace sci
