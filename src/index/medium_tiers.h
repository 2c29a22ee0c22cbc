// Storage tiers (issue #36, docs/index-semantics.md "Tiers"): which medium
// names a master sends ("cpu", "disk", ...) are how fast to load a page
// from. An index maps each medium to a tier, fastest first (tier 0), at most
// kMax of them; a medium the map does not name, and a key whose media are
// unknown, count at the slowest tier, so an answer never claims memory it
// cannot show.
//
// Written "cpu=0,disk=1" (the default): name=tier, comma-separated. Names
// are compared as bytes; every tier from 0 to the slowest must have a
// medium (a hole would be a tier nothing can be at).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "index/key_entry.h"

namespace sci {

class MediumTiers {
 public:
  static constexpr int kMax = 4;              // SCI_TIERS_MAX
  static constexpr uint8_t kAbsent = 0xFF;    // SCI_TIER_ABSENT: not fully present at any tier
  static constexpr int kMaxMedia = 8;         // every named medium gets a number (media_names.h)

  // cpu=0, disk=1.
  MediumTiers() : media_{{"cpu", 0}, {"disk", 1}}, n_tiers_(2) {}

  // Parses `text` ("cpu=0,disk=1"; empty: the default). False, with
  // `error` naming the item at fault, for anything else.
  static bool Parse(std::string_view text, MediumTiers* out, std::string* error);

  int n_tiers() const { return n_tiers_; }
  uint8_t slowest() const { return static_cast<uint8_t>(n_tiers_ - 1); }
  // The named media, in the order written (the index numbers them first, in
  // this order, so that medium number i < media().size() is media()[i]).
  const std::vector<std::pair<std::string, uint8_t>>& media() const { return media_; }
  // "cpu=0,disk=1", as the index reports its map.
  std::string ToString() const;

 private:
  std::vector<std::pair<std::string, uint8_t>> media_;
  int n_tiers_ = 0;
};

}  // namespace sci
