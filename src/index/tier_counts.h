// How many of a group's keys are at tiers 1, 2 and 3 (medium_tiers.h), a
// byte each in a 24-bit word (Index::GroupState keeps it beside the group's
// generation; tier 0 is the rest of its keys). The group's tier is the
// slowest tier with a key. A count that reaches 255 stays there until the
// group goes: the group then reads slower than it may be, never faster.
#pragma once

#include <cstdint>

namespace sci {

struct TierCounts {
  static uint8_t SlowestTier(uint32_t counts) {
    return counts >= (1u << 16) ? 3 : counts >= (1u << 8) ? 2 : counts != 0 ? 1 : 0;
  }
  // One key more (`add`) or less at `tier`.
  static uint32_t Add(uint32_t counts, uint8_t tier, bool add) {
    if (tier == 0) return counts;
    const int shift = 8 * (tier - 1);
    const uint32_t n = (counts >> shift) & 0xFF;
    if (n == 0xFF) return counts;  // saturated: stays
    return (counts & ~(0xFFu << shift)) | ((add ? n + 1 : n - 1) << shift);
  }
};

}  // namespace sci
