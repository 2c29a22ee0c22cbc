// Stray keys: present split keys (index/fingerprint.h) that are not stored
// under the group named after their head, counted by that group, so that a
// page query can tell a page nobody stored from its group alone.
//
// Which groups are named after their keys' head is a layout family's
// convention, given to the index (IndexOptions::head_group_prefix); the
// index counts strays only under one.
//
// Why. A family may name a page's group after its keys' head: the keys
// "<head>_0_k" ... "<head>_7_v" stored under "<head_group_prefix><head>"
// (docs/architecture.md lists the families that do). A group lives exactly while a key is stored
// under it, so for a layout that names its groups so (Layout::
// groups_named_by_key_heads), "the page's group is unknown" means "none of
// its keys is stored under its group": a key of it can then be present only
// as a stray -- stored under no group (snapshot keys, events without a
// label, a group refused at capacity) or under another one (a publisher's
// mislabel). Before this, a page whose group was unknown -- nearly every
// page of a prompt nobody stored, the router's most common request -- had
// its first key looked up as well: a second cold table line per page, 1.44x
// hashing alone where a verified prompt costs 1.06x (bench/README.md, ninth
// pass).
//
// Exact, and conservative where it is not. The writer keeps, under the
// same exclusive hold of the table lock that changes a key, one count per
// slot of the number of stray keys whose head's group falls in that slot.
// A query reads the slot of the unknown group in the same reader hold as
// its probe: zero proves no key of the page present; non-zero (a stray of
// the page, or of another page sharing the slot) sends the page to its
// keys, as before. A count that reaches 255 sticks (never decremented, so
// it can only cost lookups) until the strays are all gone or a clear.
//
// Size: 2^20 one-byte slots, 1 MiB, that stay in the core's L2 where the
// key tables cannot. After a resync every snapshot page's slot is taken
// until its keys are adopted (adoption_queue.h) or removed: 1M snapshot keys
// of tp8 pages take about 6% of the slots.
// A tenant's clear drops keys by their tenant tag, without their bytes, so
// it cannot find their slots: strays are also counted per tenant tag, the
// gauge drops by the tag's count at once (ClearTag), and the slots, which
// may still count the cleared keys (only a cost: their pages are checked
// key by key), are zeroed as soon as no stray is left. 1.2 left the gauge
// and the slots high until a whole clear (issue #34, R8).
//
#pragma once

#include <array>
#include <atomic>
#include <cassert>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string_view>

#include "common/prefetch.h"
#include "index/fingerprint.h"

namespace sci {

class StrayKeyCounts {
 public:
  static constexpr size_t kSlots = size_t{1} << 20;

  // calloc: a new index's slots are zero pages until written.
  StrayKeyCounts() : counts_(static_cast<uint8_t*>(std::calloc(kSlots, 1))) {
    if (counts_ == nullptr) throw std::bad_alloc();
  }

  // A stray key of tenant tag `tag` whose head's group is `group` came
  // (Add) or went (Remove).
  void Add(const Fingerprint& group, uint32_t tag) {
    uint8_t& count = counts_[SlotOf(group)];
    if (count != kStuck && ++count == kStuck) ++stuck_slots_;
    ++by_tag_[tag & 0xFF];
    strays_.store(strays_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  void Remove(const Fingerprint& group, uint32_t tag) {
    uint8_t& count = counts_[SlotOf(group)];
    assert(count != 0 && "a stray removed that was never added");
    if (count != kStuck) --count;
    uint64_t& of_tag = by_tag_[tag & 0xFF];
    assert(of_tag != 0 && "a stray removed under another tag than it was added");
    if (of_tag != 0) --of_tag;
    const uint64_t left = strays_.load(std::memory_order_relaxed) - 1;
    strays_.store(left, std::memory_order_relaxed);
    // The stuck or left-over slots hold no stray any more.
    if (left == 0 && (stuck_slots_ > 0 || leftovers_)) Reset();
  }
  // Every key of tenant tag `tag` is gone (a tenant's clear), its strays
  // with them: the gauge drops by their count; the slots are zeroed now if
  // no stray is left, else once the last one goes.
  void ClearTag(uint32_t tag) {
    uint64_t& of_tag = by_tag_[tag & 0xFF];
    if (of_tag == 0) return;
    const uint64_t left = strays_.load(std::memory_order_relaxed) - of_tag;
    strays_.store(left, std::memory_order_relaxed);
    of_tag = 0;
    leftovers_ = true;
    if (left == 0) Reset();
  }

  // Whether a stray key of the page whose group is `group` may be present.
  bool MayHold(const Fingerprint& group) const { return counts_[SlotOf(group)] != 0; }
  // The writer's, ahead of a store it knows makes a stray (a snapshot key):
  // the slot's miss overlaps the key table's.
  void Prefetch(const Fingerprint& group) const { PrefetchForWrite(counts_.get() + SlotOf(group)); }

  // Stray keys present: a gauge, readable from any thread (after a resync,
  // the snapshot's keys not yet adopted or removed).
  uint64_t strays() const { return strays_.load(std::memory_order_relaxed); }

  // Every key is gone (a clear). Free when no stray was counted: the
  // counts are all zero already.
  void Reset() {
    if (strays() == 0 && stuck_slots_ == 0 && !leftovers_) return;
    std::memset(counts_.get(), 0, kSlots);
    strays_.store(0, std::memory_order_relaxed);
    stuck_slots_ = 0;
    by_tag_.fill(0);
    leftovers_ = false;
  }

 private:
  static constexpr uint8_t kStuck = UINT8_MAX;
  // The high half: the group table places groups by the low one.
  static size_t SlotOf(const Fingerprint& group) { return static_cast<size_t>(group.high >> 44); }

  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t[], Free> counts_;
  std::atomic<uint64_t> strays_{0};  // written by the writer only
  uint64_t stuck_slots_ = 0;
  std::array<uint64_t, 256> by_tag_ = {};  // strays per tenant tag
  bool leftovers_ = false;                 // slots may count keys a tenant's clear dropped
};

}  // namespace sci
