// SipHash (Aumasson and Bernstein, 2012): a keyed hash built to be a
// pseudorandom function of short inputs. Whoever does not hold the key can
// neither predict an output nor choose two inputs with one output, nor two
// keys' outputs with a chosen difference -- what XXH3 and NH, fast as they
// are, do not promise once their seed is known or a secret is only xored
// into it.
//
// The index uses it where an input from outside picks a seed or a bucket
// and the cost is paid rarely: a tenant's seed from its name (once per
// event or query, index/fingerprint.h), the seeds derived from the
// process's secret, and the table of stores a resync holds back
// (index/deferred_stores.h). SipHash-2-4 is the reference; SipHash-1-3 is
// what Rust's and Python's hash tables use against flooding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace sci {

struct SipKey {
  uint64_t k0 = 0;
  uint64_t k1 = 0;
};

template <int kCompressionRounds, int kFinalRounds>
uint64_t SipHash(const SipKey& key, std::string_view bytes) {
  uint64_t v0 = 0x736f6d6570736575ull ^ key.k0;
  uint64_t v1 = 0x646f72616e646f6dull ^ key.k1;
  uint64_t v2 = 0x6c7967656e657261ull ^ key.k0;
  uint64_t v3 = 0x7465646279746573ull ^ key.k1;
  const auto rotl = [](uint64_t x, int b) { return (x << b) | (x >> (64 - b)); };
  const auto round = [&] {
    v0 += v1;
    v1 = rotl(v1, 13);
    v1 ^= v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl(v1, 17);
    v1 ^= v2;
    v2 = rotl(v2, 32);
  };
  const auto absorb = [&](uint64_t m) {
    v3 ^= m;
    for (int i = 0; i < kCompressionRounds; ++i) round();
    v0 ^= m;
  };
  const size_t whole = bytes.size() & ~size_t{7};
  for (size_t at = 0; at < whole; at += 8) {
    uint64_t m;
    std::memcpy(&m, bytes.data() + at, 8);  // little-endian, as the reference reads it
    absorb(m);
  }
  uint64_t last = uint64_t{bytes.size() & 0xFF} << 56;
  for (size_t i = whole; i < bytes.size(); ++i) last |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * (i - whole));
  absorb(last);
  v2 ^= 0xFF;
  for (int i = 0; i < kFinalRounds; ++i) round();
  return v0 ^ v1 ^ v2 ^ v3;
}

inline uint64_t SipHash24(const SipKey& key, std::string_view bytes) { return SipHash<2, 4>(key, bytes); }
inline uint64_t SipHash13(const SipKey& key, std::string_view bytes) { return SipHash<1, 3>(key, bytes); }

}  // namespace sci
