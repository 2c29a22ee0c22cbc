// Small numbers for the tails of split keys (index/fingerprint.h: a key
// "<head><tail>" whose head ends with 64 hex digits, e.g. "<hash>_3_k"), so
// that a page's present tails fit one 64-bit word (index/page_tails.h).
//
// A tail is named by its TailId: XXH3-128 of its bytes, without the tenant
// (tenants and models share tails such as "_0_k", so 64 numbers go far).
// Numbers are handed out in order of first sight and never taken back, not
// even by a clear: a query that learned a tail's number keeps using it
// across several holds of the table lock, so a number must never come to
// mean another tail. Once all 64 are taken, new tails get none: their keys
// are then answered key by key, as before this summary existed. Since a
// tail gets its number at its first store, before any key with it is
// present, "no number while numbers remain" proves that no key with that
// tail was ever stored.
//
// Not thread-safe: the index guards it with its table lock (the writer
// numbers a tail with the lock held exclusively, readers look tails up with
// it held shared).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "index/fingerprint.h"

namespace sci {

inline Fingerprint TailId(std::string_view tail) {
  constexpr uint64_t kTailDomain = 0x6A09E667F3BCC908ull;  // not a tenant's seed: ids never meet key fingerprints
  const XXH128_hash_t h = XXH3_128bits_withSeed(tail.data(), tail.size(), kTailDomain);
  return Fingerprint{h.low64, h.high64};
}

class TailInterner {
 public:
  static constexpr uint32_t kCapacity = 64;  // bits of a page's tail word
  static constexpr int kNone = -1;

  // The number of `tail` (whose id is `id`), handing out the next one on
  // first sight; kNone when all are taken.
  int Intern(const Fingerprint& id, std::string_view tail) {
    const int known = Find(id);
    if (known != kNone || count_ == kCapacity) return known;
    // The copy first: if it throws, no number was given. (Numbered first, a
    // failed copy left the number recorded while count_ stayed, and the next
    // new tail took the same number: two tails sharing one summary bit.)
    bytes_[count_] = std::string(tail);
    uint32_t slot = Home(id);
    while (slots_[slot].number != 0) slot = (slot + 1) % kSlots;
    slots_[slot].tail = id;
    slots_[slot].number = static_cast<uint8_t>(count_ + 1);  // stored + 1: 0 marks a free slot
    return static_cast<int>(count_++);
  }

  // The tail's number, or kNone if it has none.
  int Find(const Fingerprint& tail) const {
    for (uint32_t slot = Home(tail);; slot = (slot + 1) % kSlots) {
      if (slots_[slot].number == 0) return kNone;
      if (slots_[slot].tail == tail) return slots_[slot].number - 1;
    }
  }

  // Whether every number is taken (then an unnumbered tail proves nothing).
  bool full() const { return count_ == kCapacity; }
  uint32_t size() const { return count_; }
  // The tail numbered `n` (< size()): the writer rebuilds a page's keys
  // from its head and these (index.cpp, "SummarisePage").
  const std::string& Tail(uint32_t n) const { return bytes_[n]; }

 private:
  // Twice the capacity: a lookup probes a slot or two, and never loops.
  static constexpr uint32_t kSlots = 2 * kCapacity;
  struct Slot {
    Fingerprint tail;
    uint8_t number = 0;  // the tail's number + 1; 0: free
  };
  static uint32_t Home(const Fingerprint& tail) { return static_cast<uint32_t>(tail.low % kSlots); }

  Slot slots_[kSlots];
  std::string bytes_[kCapacity];
  uint32_t count_ = 0;
};

}  // namespace sci
