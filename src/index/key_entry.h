// What the key table holds for a present key: the group it was stored under
// and, under the per-medium residency rule, the media holding it. One 32-bit
// word, so a key costs what it did before media were tracked (three keys and
// their words fill a cache line: fingerprint_table.h):
//   bits 0-23   the GroupRef of its group (kNoGroup: none); refs stay below
//               kGroupRefLimit (Index::AcquireGroup), which also keeps them
//               clear of PageTails::kMixedGroups;
//   bits 24-31  its media, bit i for the medium the index numbered i
//               (media_names.h); none set: unknown media (stored with no
//               medium, loaded from a snapshot, or the object rule), which
//               any removal drops.
#pragma once

#include <cstdint>

namespace sci {

// A present key's group: a slot number of the group table's, 0 for none.
using GroupRef = uint32_t;
inline constexpr GroupRef kNoGroup = 0;
// Refs are numbered below this (24 bits): 16.7 million groups at once.
// A group beyond it is not made; its keys are stored under none and its
// pages answered key by key (counted in capacity_refusals).
inline constexpr GroupRef kGroupRefLimit = GroupRef{1} << 24;

// A set of media, one bit per medium number (MediaNames); 0: unknown.
using MediaSet = uint8_t;

// The residency rule's arithmetic on a present key's media (0: unknown).
// A store on a known medium adds it to known media; a store with the
// medium unknown, or onto unknown media, leaves just what it says.
inline MediaSet MediaAfterStore(MediaSet was, MediaSet medium) {
  return medium != 0 && was != 0 ? static_cast<MediaSet>(was | medium) : medium;
}
// A removal from `medium` (0: from wherever it is): the media the key is
// still on, or 0 when it goes (unknown media, or the last one removed).
inline MediaSet MediaLeftAfterRemoval(MediaSet was, MediaSet medium) {
  return medium != 0 && was != 0 ? static_cast<MediaSet>(was & ~medium) : 0;
}

struct KeyEntry {
  uint32_t word = 0;

  GroupRef group() const { return word & (kGroupRefLimit - 1); }
  MediaSet media() const { return static_cast<MediaSet>(word >> 24); }
  void set_group(GroupRef ref) { word = (word & ~(kGroupRefLimit - 1)) | ref; }
  void set_media(MediaSet media) { word = (word & (kGroupRefLimit - 1)) | (uint32_t{media} << 24); }
};
static_assert(sizeof(KeyEntry) == 4, "a key's entry is one word beside its fingerprint");

}  // namespace sci
