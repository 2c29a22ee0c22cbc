// The digests behind engines' 64-bit event hashes: for every present key
// that ends with a separator and a 64-hex-digit digest, the digest, found
// by its low 64 bits. Which separator is a layout family's convention,
// given to the index (IndexOptions::digest_key_separator).
//
// Why. An engine's KV events may carry a block's digest as its low 64 bits
// only (bytes 24..31, big-endian). A router that holds only those can still
// ask about the pool's keys, which carry the whole digest: each event hash
// is resolved here, then the keys are looked up as usual. Two digests sharing their low 64 bits are
// ambiguous: the entry says so and never resolves, until none is left.
//
// Per tenant: an entry counts the keys of one tenant (by its whole seed,
// fingerprint.h), and an event hash is resolved among the keys of the
// querying layout's tenant only. Keyed by the public 8-bit tenant tag
// instead, a tenant whose name was chosen to share another's tag could make
// the other's event hashes ambiguous by storing keys with the same low 64 bits
// (a miss for the victim, found by review). A tenant's clear, which drops
// keys by their tag without their bytes, drops the entries of every tenant
// of that tag (EraseTagRun), as it drops their keys: 1.2 kept them, one per
// cleared key, and five rounds of 200k keys stored and cleared grew the
// process by 90 MB with one key present (issue #34, R7). Conservative where
// it is not exact: two digests of one tenant sharing their low 64 bits
// never resolve (a miss) until one of them is gone; only a whole clear
// empties the map (and gives its memory back).
//
// Written by the index's writer under the exclusive table lock; read under
// the shared one.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <new>
#include <tuple>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace sci {

class EventHashDigests {
  using EntryKey = std::pair<uint64_t, uint64_t>;  // (event hash, tenant seed)
  struct Entry {
    uint8_t head[24];   // the digest's bytes before its low 64 bits (in the map's key)
    uint32_t keys = 0;  // present keys ending with a digest of these low 64 bits
    bool ambiguous = false;
  };
  using Map = absl::flat_hash_map<EntryKey, Entry>;

 public:
  using Digest = std::array<uint8_t, 32>;

  // The digest a key ends with, if it ends with `separator` (not empty) and
  // 64 lowercase hex digits.
  static bool DigestOfKey(std::string_view key, std::string_view separator, Digest* digest) {
    constexpr size_t kHex = 64;
    if (separator.empty() || key.size() < kHex + separator.size() ||
        key.substr(key.size() - kHex - separator.size(), separator.size()) != separator) {
      return false;
    }
    const char* hex = key.data() + key.size() - kHex;
    for (size_t i = 0; i < digest->size(); ++i) {
      const int high = Nibble(hex[2 * i]), low = Nibble(hex[2 * i + 1]);
      if (high < 0 || low < 0) return false;
      (*digest)[i] = static_cast<uint8_t>(high << 4 | low);
    }
    return true;
  }

  static uint64_t EventHashOf(const Digest& digest) {
    uint64_t low = 0;
    for (size_t i = 24; i < 32; ++i) low = low << 8 | digest[i];
    return low;
  }

  // A present key of the tenant whose seed is `tenant_seed`, with `digest`,
  // came (Add; may throw bad_alloc, and then the map is empty:
  // AbandonAfterFailedGrowth) or went (Remove; never allocates).
  void Add(const Digest& digest, uint64_t tenant_seed) {
    Map::iterator it;
    bool inserted = false;
    try {
      std::tie(it, inserted) = entries_.try_emplace(EntryKey{EventHashOf(digest), tenant_seed});
    } catch (const std::bad_alloc&) {
      AbandonAfterFailedGrowth();
      throw;
    }
    if (inserted) ++entries_by_tag_[TagOf(tenant_seed)];
    Entry& entry = it->second;
    if (entry.keys == 0) {
      std::memcpy(entry.head, digest.data(), sizeof entry.head);
      entry.ambiguous = false;
    } else if (std::memcmp(entry.head, digest.data(), sizeof entry.head) != 0) {
      entry.ambiguous = true;
    }
    ++entry.keys;
  }
  void Remove(const Digest& digest, uint64_t tenant_seed) {
    auto it = entries_.find(EntryKey{EventHashOf(digest), tenant_seed});
    if (it == entries_.end()) return;
    if (--it->second.keys == 0) Erase(it);
  }

  // The one digest present keys of the tenant whose seed is `tenant_seed`
  // carry for `event_hash`; false when none, or more than one, does.
  bool Find(uint64_t event_hash, uint64_t tenant_seed, Digest* digest) const {
    auto it = entries_.find(EntryKey{event_hash, tenant_seed});
    if (it == entries_.end() || it->second.ambiguous) return false;
    std::memcpy(digest->data(), it->second.head, sizeof it->second.head);
    for (size_t i = 0; i < 8; ++i) (*digest)[24 + i] = static_cast<uint8_t>(event_hash >> (56 - 8 * i));
    return true;
  }

  // A tenant's clear: the entries of every tenant of tag `tag` erased, at
  // most `steps` entries visited a call, so that the caller may release its
  // lock between runs.
  // `walk` starts default-constructed; no Add may come between the runs
  // (an erase keeps every other position valid, an insert may not). False
  // once every entry of the tag is gone.
  class Walk {
    friend class EventHashDigests;
    bool started_ = false;
    Map::iterator at_;
  };
  bool HasTag(uint32_t tag) const { return entries_by_tag_[tag & 0xFF] != 0; }
  bool EraseTagRun(uint32_t tag, Walk* walk, size_t steps) {
    if (!walk->started_) {
      walk->started_ = true;
      walk->at_ = entries_.begin();
    }
    for (size_t i = 0; i < steps && entries_by_tag_[tag & 0xFF] > 0; ++i) {
      if (walk->at_ == entries_.end()) return false;
      auto here = walk->at_++;
      if (TagOf(here->first.second) == (tag & 0xFF)) Erase(here);
    }
    return entries_by_tag_[tag & 0xFF] > 0 && walk->at_ != entries_.end();
  }

  void Clear() {
    entries_ = {};
    entries_by_tag_.fill(0);
  }
  size_t size() const { return entries_.size(); }

 private:
  template <typename Iterator>
  void Erase(Iterator it) {
    --entries_by_tag_[TagOf(it->first.second)];
    entries_.erase(it);
  }

  // Abseil's flat_hash_map is not exception-safe: its resize() sets the new
  // capacity before it allocates, so a growth whose allocation throws
  // leaves a table whose capacity and arrays disagree, and any later use,
  // its destructor included, reads past them (found by
  // capi_allocation_sweep_test). So the map is given up: a new, empty one
  // is built in its storage without destroying the old one, whose arrays
  // leak (once per failure, which the index answers by a whole clear
  // anyway). Empty means only that event hashes resolve nothing: misses.
  void AbandonAfterFailedGrowth() noexcept {
    new (&entries_) Map();  // noexcept: an empty flat_hash_map allocates nothing
    entries_by_tag_.fill(0);
  }

  static uint32_t TagOf(uint64_t tenant_seed) { return static_cast<uint32_t>(tenant_seed & 0xFF); }  // fingerprint.h's TenantTag

  static int Nibble(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  }

  Map entries_;
  std::array<uint64_t, 256> entries_by_tag_ = {};  // a tag without entries skips the walk
};

}  // namespace sci
