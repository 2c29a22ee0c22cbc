#include "index/object_store.h"

namespace sci {

ObjectStore::Place ObjectStore::Locate(uint64_t tenant_seed, std::string_view key, bool number) {
  Place place;
  const KeyShape shape = ShapeOf(key);
  if (shape.decomposes) {
    const Fingerprint id = SlotId(shape.prefix, shape.suffix);
    const uint32_t slot =
        number ? slot_names_.Number(id, shape.prefix, shape.suffix) : slot_names_.Find(id, shape.prefix, shape.suffix);
    if (slot < SlotNames::kCapacity) {
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

SlotChange ObjectStore::Store(uint64_t tenant_seed, std::string_view key, const Place& located, MediaSet medium) {
  // A decomposing key whose slot had no number when it was located: number it now.
  const Place place = located.past_slot_capacity ? Locate(tenant_seed, key, /*number=*/true) : located;
  if (place.in_page) return pages_.StoreSlot(place.page, place.slot, medium);
  const PackedFingerprint packed(place.whole);
  SlotChange change;
  change.present = true;
  WholeEntry* entry = whole_.find(packed);
  if (entry == nullptr) {
    whole_.insert_absent(packed, WholeEntry{medium});  // may throw: nothing changed, nothing counted
    if (place.past_slot_capacity) ++stores_past_slot_capacity_;
    change.media = medium;
    return change;
  }
  change.was_present = true;
  change.was_media = static_cast<MediaSet>(entry->media);
  change.media = MediaAfterStore(change.was_media, medium);
  entry->media = change.media;
  return change;
}

SlotChange ObjectStore::Remove(const Place& place, MediaSet medium) {
  if (place.in_page) return pages_.RemoveSlot(place.page, place.slot, medium);
  SlotChange change;
  WholeEntry* entry = whole_.find(PackedFingerprint(place.whole));
  if (entry == nullptr) return change;
  change.was_present = true;
  change.was_media = static_cast<MediaSet>(entry->media);
  const MediaSet left = MediaLeftAfterRemoval(change.was_media, medium);
  if (left != 0) {
    entry->media = left;
    change.present = true;
    change.media = left;
    return change;
  }
  whole_.erase(PackedFingerprint(place.whole), entry);
  return change;
}

void ObjectStore::ClearTenant(uint64_t tenant_seed) {
  const uint32_t tag = TenantTag(tenant_seed);
  pages_.ClearTenant(tag);
  whole_.erase_if([&](const PackedFingerprint& key, const WholeEntry&) { return TenantTagOf(key.Unpack()) == tag; });
}

std::string ObjectStore::Inconsistency() const {
  std::string what = pages_.Inconsistency();
  if (what.empty()) {
    what = whole_.Inconsistency();
    if (!what.empty()) what = "whole-key table: " + what;
  }
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

MediaSet ObjectStore::Media(uint64_t tenant_seed, std::string_view key) const {
  const Place place = Locate(tenant_seed, key);
  if (place.in_page) return pages_.Media(place.page, place.slot);
  const WholeEntry* entry = whole_.find(PackedFingerprint(place.whole));
  return entry == nullptr ? 0 : static_cast<MediaSet>(entry->media);
}

}  // namespace sci
