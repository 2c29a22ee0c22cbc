// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
// generators", 2014): a 64-bit state advanced by a fixed odd step, each
// output a bijective mix of the state. Used to expand one secret word into
// several independent-looking words (the process secret's clock fallback,
// NH's keys); not a keyed hash on its own.
#pragma once

#include <cstdint>

namespace sci {

// Advances `state` by one step and returns that step's output.
inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace sci
