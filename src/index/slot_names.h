// Numbers for the slots of pages (key_shape.h: a decomposing key's bytes
// around its digest, e.g. ("", "_3_k") or ("model@tp_rank:1@", "")), so that a
// page's present slots fit a word of bits (page_store.h).
//
// Slots are numbered in order of first sight, in banks of 64: slot n is bit
// n % 64 of the page's entry for bank n / 64 (a page whose slots lie in two
// banks has two entries; the slots of one layout, met together, nearly
// always share one). Numbers are never taken back, not even by a clear: a
// query that learned a slot's number may use it across several holds of the
// table lock, so a number must never come to mean another slot. Past
// kCapacity slots, new ones get none and their keys are stored whole (the
// per-object table). A slot gets its number at its first store, before any
// key with it is present, so "no number while numbers remain" proves that no
// key with that slot was ever stored. (docs/architecture.md, I1.)
//
// A slot is found by its SlotId: XXH3-128 over the XXH3-128 parts of its
// prefix and suffix (so ("ab", "c") and ("a", "bc") differ), without the
// tenant: tenants and models share slots such as ("", "_0_k"). The id only
// finds the slot; its number is given for the name the slot was numbered
// with, compared byte for byte. A writer who can choose key names could
// make two suffixes share an id when its seeds were public (a review built
// one): without the comparison, a key never stored read present under the
// other's bit. The seeds now hold the process's secret, so ids cannot be
// aimed (nor the map flooded), and the comparison makes a collision,
// however it came, cost speed instead of a false hit: a name whose id
// another holds gets no number, its keys are stored whole, and plans check
// them key by key (kTakenByAnother; tests/adversarial_hash_test.cpp).
//
// Each table has its own serial, which plans record (slot_plan.h): a plan
// resolved against one index is never current on another.
//
// Not thread-safe: the index guards it with its table lock (the writer
// numbers a slot with the lock held exclusively, readers look slots up with
// it held shared).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <unordered_map>
#include "common/process_secret.h"
#include "index/fingerprint.h"

namespace sci {

// The seeds of a slot id's prefix and suffix parts: fixed domains keyed
// with the process's secret (exposed for the tests that build collisions).
inline uint64_t SlotPrefixSeed() {
  static const uint64_t seed = ProcessSubkey("slot prefix").k0;
  return seed;
}
inline uint64_t SlotSuffixSeed() {
  static const uint64_t seed = ProcessSubkey("slot suffix").k0;
  return seed;
}

inline Fingerprint SlotId(std::string_view prefix, std::string_view suffix) {
  constexpr uint64_t kSlotDomain = 0xA54FF53A5F1D36F1ull;
  const XXH128_hash_t parts[2] = {XXH3_128bits_withSeed(prefix.data(), prefix.size(), SlotPrefixSeed()),
                                  XXH3_128bits_withSeed(suffix.data(), suffix.size(), SlotSuffixSeed())};
  const XXH128_hash_t h = XXH3_128bits_withSeed(parts, sizeof(parts), kSlotDomain);
  return Fingerprint{h.low64, h.high64};
}

class SlotNames {
 public:
  static constexpr uint32_t kBankSlots = 64;  // bits of a page entry's slot word
  static constexpr uint32_t kCapacity = 4096;
  static constexpr uint32_t kNone = UINT32_MAX;
  // Find's answer for a name whose id another name was numbered with.
  static constexpr uint32_t kTakenByAnother = UINT32_MAX - 1;

  SlotNames() : serial_(NextSerial()) {}
  // A copy would share the serial while its numbers drift apart.
  SlotNames(const SlotNames&) = delete;
  SlotNames& operator=(const SlotNames&) = delete;

  static uint32_t BankOf(uint32_t slot) { return slot / kBankSlots; }
  static uint64_t BitOf(uint32_t slot) { return uint64_t{1} << (slot % kBankSlots); }

  // The number of slot (prefix, suffix) whose id is `id`, handing out the
  // next one on first sight; kNone when all are taken or another name holds
  // the id (the key is then stored whole). May throw bad_alloc, and then no
  // number was given.
  uint32_t Number(const Fingerprint& id, std::string_view prefix, std::string_view suffix) {
    const uint32_t known = Find(id, prefix, suffix);
    if (known == kTakenByAnother) return kNone;
    if (known != kNone || full()) return known;
    // Everything that allocates first: if it throws, nothing was recorded.
    std::pair<std::string, std::string> name(prefix, suffix);
    names_.reserve(names_.size() + 1);
    const auto number = static_cast<uint32_t>(names_.size());
    numbers_.emplace(id, number);
    names_.push_back(std::move(name));  // room reserved, a move: cannot throw
    return number;
  }

  // The number of slot (prefix, suffix) whose id is `id`; kNone if it has
  // none, kTakenByAnother if another name was numbered under its id.
  uint32_t Find(const Fingerprint& id, std::string_view prefix, std::string_view suffix) const {
    const auto it = numbers_.find(id);
    if (it == numbers_.end()) return kNone;
    const std::pair<std::string, std::string>& name = names_[it->second];
    return name.first == prefix && name.second == suffix ? it->second : kTakenByAnother;
  }

  // Whether every number is taken (then an unnumbered slot proves nothing).
  bool full() const { return names_.size() == kCapacity; }
  uint32_t size() const { return static_cast<uint32_t>(names_.size()); }
  // Slot `n`'s prefix and suffix (n < size()): for the consistency walk and
  // for rebuilding a page's keys.
  const std::pair<std::string, std::string>& Name(uint32_t n) const { return names_[n]; }
  // This table's serial, unique in the process.
  uint64_t serial() const { return serial_; }

 private:
  // std::unordered_map, not absl's: its single insertion either completes
  // or changes nothing when an allocation fails (absl's flat map may be
  // left unreadable by a failed growth).
  struct IdHash {
    size_t operator()(const Fingerprint& f) const { return static_cast<size_t>(f.low); }
  };
  static uint64_t NextSerial() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
  }

  uint64_t serial_;
  std::unordered_map<Fingerprint, uint32_t, IdHash> numbers_;
  std::vector<std::pair<std::string, std::string>> names_;
};

}  // namespace sci
