// 128-bit fingerprints of object keys and group ids.
//
// The index stores XXH3-128 fingerprints instead of the key bytes: a false
// hit would need a 128-bit collision (about N / 2^128 per lookup for N
// present keys), and a fingerprint is a fixed 16 bytes however long the key.
// The tenant is folded in as the hash seed, so the same key in two tenants
// gives two unrelated fingerprints.
#pragma once

#include <cstdint>
#include <string_view>

#define XXH_INLINE_ALL
#include <xxhash.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace sci {

struct Fingerprint {
  uint64_t low = 0;
  uint64_t high = 0;

  friend bool operator==(const Fingerprint&, const Fingerprint&) = default;
};

// Seed of a tenant's key space. An empty tenant means "default".
inline uint64_t TenantSeed(std::string_view tenant) {
  if (tenant.empty()) tenant = "default";
  return XXH3_64bits(tenant.data(), tenant.size());
}

// Keys that name a page carry its hash, a run of 64 hex digits, followed by
// a suffix (SGLang: "<hash>_3_k", "<prefix>_<hash>__swa"). Such a key is
// fingerprinted in two parts, the bytes up to the end of those 64 digits
// (the head) and the rest (the tail), then the two 128-bit parts together:
// every key of a page shares its head, and every page of a layout shares the
// layout's few tails, so a page query hashes a page's head once and each of
// its keys costs one 32-byte hash, not a hash of the whole key. The writer
// applies the same rule to whatever key it is given, so both sides agree on
// every key whatever its shape; a key without such a run (or with nothing
// after it: group ids end with the hash) is hashed whole, in a separate seed
// domain from the combined parts.
inline constexpr size_t kFingerprintHexRun = 64;
inline constexpr size_t kNoFingerprintSplit = static_cast<size_t>(-1);

// Bit k set: p[k] is a hex digit (either case), for the 64 bytes at p.
inline uint64_t HexDigitMask64(const char* p) {
  uint64_t mask = 0;
#if defined(__SSE2__)
  for (int chunk = 0; chunk < 4; ++chunk) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * chunk));
    // Signed compares: bytes >= 0x80 are negative, outside both ranges.
    const __m128i digit =
        _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8('0' - 1)), _mm_cmplt_epi8(v, _mm_set1_epi8('9' + 1)));
    const __m128i lower = _mm_or_si128(v, _mm_set1_epi8(0x20));
    const __m128i letter =
        _mm_and_si128(_mm_cmpgt_epi8(lower, _mm_set1_epi8('a' - 1)), _mm_cmplt_epi8(lower, _mm_set1_epi8('f' + 1)));
    const auto bits = static_cast<uint16_t>(_mm_movemask_epi8(_mm_or_si128(digit, letter)));
    mask |= uint64_t{bits} << (16 * chunk);
  }
#else
  for (int k = 0; k < 64; ++k) {
    const uint32_t c = static_cast<unsigned char>(p[k]);
    if (c - '0' < 10u || (c | 0x20u) - 'a' < 6u) mask |= uint64_t{1} << k;
  }
#endif
  return mask;
}

// Where `bytes` splits into head and tail: just after the first 64 digits of
// its first run of at least 64 hex digits (either case), if a byte follows
// them; else kNoFingerprintSplit. The writer calls it for every event, so
// it tests 64-byte windows at once and skips past each window's last
// non-digit: an SGLang key costs one window.
inline size_t FingerprintSplit(std::string_view bytes) {
  if (bytes.size() <= kFingerprintHexRun) return kNoFingerprintSplit;
  // No window starting before `start` is all digits, so the first one that
  // is starts the first run of 64.
  for (size_t start = 0; start + kFingerprintHexRun <= bytes.size();) {
    const uint64_t mask = HexDigitMask64(bytes.data() + start);
    if (mask == ~uint64_t{0}) {
      const size_t split = start + kFingerprintHexRun;
      return split < bytes.size() ? split : kNoFingerprintSplit;
    }
    start += kFingerprintHexRun - static_cast<size_t>(__builtin_clzll(~mask));  // past its last non-digit
  }
  return kNoFingerprintSplit;
}

// One part (head or tail) of a split key, or a whole key.
inline Fingerprint FingerprintPart(uint64_t tenant_seed, std::string_view bytes) {
  XXH128_hash_t h = XXH3_128bits_withSeed(bytes.data(), bytes.size(), tenant_seed);
  return Fingerprint{h.low64, h.high64};
}

// A split key's fingerprint from its parts' (the seed's domain differs from
// whole keys', so a key cannot collide with the 32 bytes of another's parts).
inline Fingerprint CombineFingerprintParts(uint64_t tenant_seed, const Fingerprint& head, const Fingerprint& tail) {
  constexpr uint64_t kSplitDomain = 0x9E3779B97F4A7C15ull;
  const uint64_t parts[4] = {head.low, head.high, tail.low, tail.high};
  XXH128_hash_t h = XXH3_128bits_withSeed(parts, sizeof parts, tenant_seed ^ kSplitDomain);
  return Fingerprint{h.low64, h.high64};
}

// The fingerprint of a key or group id. Key and group fingerprints live in
// separate tables, so the same seed can serve both.
inline Fingerprint FingerprintOf(uint64_t tenant_seed, std::string_view bytes) {
  const size_t split = FingerprintSplit(bytes);
  if (split == kNoFingerprintSplit) return FingerprintPart(tenant_seed, bytes);
  return CombineFingerprintParts(tenant_seed, FingerprintPart(tenant_seed, bytes.substr(0, split)),
                                 FingerprintPart(tenant_seed, bytes.substr(split)));
}

}  // namespace sci
