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
// Conservative where it is not exact: a tenant's clear drops keys without
// their bytes, so their entries stay (a resolved digest whose keys are gone
// finds them absent: a miss); only a whole clear empties the map.
//
// Written by the index's writer under the exclusive table lock; read under
// the shared one.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "absl/container/flat_hash_map.h"

namespace sci {

class EventHashDigests {
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

  // A present key with `digest` came (Add; may throw bad_alloc, changing
  // nothing) or went (Remove; never allocates).
  void Add(const Digest& digest) {
    Entry& entry = entries_[EventHashOf(digest)];
    if (entry.keys == 0) {
      std::memcpy(entry.head, digest.data(), sizeof entry.head);
      entry.ambiguous = false;
    } else if (std::memcmp(entry.head, digest.data(), sizeof entry.head) != 0) {
      entry.ambiguous = true;
    }
    ++entry.keys;
  }
  void Remove(const Digest& digest) {
    auto it = entries_.find(EventHashOf(digest));
    if (it == entries_.end()) return;
    if (--it->second.keys == 0) entries_.erase(it);
  }

  // The one digest present keys carry for `event_hash`; false when none, or
  // more than one, does.
  bool Find(uint64_t event_hash, Digest* digest) const {
    auto it = entries_.find(event_hash);
    if (it == entries_.end() || it->second.ambiguous) return false;
    std::memcpy(digest->data(), it->second.head, sizeof it->second.head);
    for (size_t i = 0; i < 8; ++i) (*digest)[24 + i] = static_cast<uint8_t>(event_hash >> (56 - 8 * i));
    return true;
  }

  void Clear() { entries_ = {}; }
  size_t size() const { return entries_.size(); }

 private:
  static int Nibble(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  }

  struct Entry {
    uint8_t head[24];   // the digest's bytes before its low 64 bits (the map's key)
    uint32_t keys = 0;  // present keys ending with a digest of these low 64 bits
    bool ambiguous = false;
  };
  absl::flat_hash_map<uint64_t, Entry> entries_;
};

}  // namespace sci
