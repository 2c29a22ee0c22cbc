// 128-bit fingerprints of object keys and group ids.
//
// The index stores 128-bit fingerprints (XXH3-128, or NH for hash-ended
// strings, below) instead of the key bytes: a false hit would need a 128-bit
// collision (about N / 2^128 per lookup for N present keys), and a
// fingerprint is a fixed 16 bytes however long the key.
// The tenant is folded in as the hash seed, so the same key in two tenants
// gives two unrelated fingerprints.
//
// Every seed here is keyed with the process's secret: XXH3 and NH are not
// collision-resistant for an adversary who knows their seeds and keys, and
// an object key is any bytes a writer chooses, a tenant any name. A review
// built two 64-byte keys with one XXH3-128 under a public tenant seed, two
// tenant names with one public seed, and two whose seeds differed in the
// top bit only (XXH3-128 of a short key passes that bit through to the
// key's last byte); each read a key present that was never stored. Now a
// tenant's seed is a keyed hash of its name (TenantSeed), so no one who
// cannot see the secret can aim a seed or a difference between two
// (tests/adversarial_hash_test.cpp). Only the tenant tag (below) is taken
// from a public hash, so tags are the same in every process.
//
// Tenant tags. Every fingerprint made with a tenant's seed also carries that
// tenant's tag, 8 bits of the seed, in the low 8 bits of its high word (the
// index shards by the high word's top bits and counts strays by its top 20,
// tables place by the low word): the index finds one tenant's keys among
// all of them by their tag when a tenant is cleared, without storing the
// tenant per key. So 120 bits are hash: a false hit needs a 120-bit
// collision within one tenant (about N / 2^120 per lookup). Two tenants
// sharing a tag only make a clear of one drop the other's keys too: a miss.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/hex_lanes.h"
#include "common/process_secret.h"
#include "common/siphash.h"
#include "common/splitmix64.h"

namespace sci {

struct Fingerprint {
  uint64_t low = 0;
  uint64_t high = 0;

  friend bool operator==(const Fingerprint&, const Fingerprint&) = default;
};

// Seed of a tenant's key space, the seed its fingerprints are made with.
// An empty tenant means "default". 56 bits are SipHash of the name under
// the process's secret; the low 8 are the tenant tag, a public hash of the
// name (below). Two names share a key space only if their tags match and
// 56 secret bits collide: about T^2 / 2^57 for T tenants, and no name can
// be chosen to raise it.
inline uint64_t SecretTenantSeed(std::string_view tenant) {
  static const SipKey key = ProcessSubkey("tenant seed");
  const uint64_t tag = XXH3_64bits(tenant.data(), tenant.size()) & 0xFF;
  return (SipHash13(key, tenant) & ~uint64_t{0xFF}) | tag;
}
inline uint64_t TenantSeed(std::string_view tenant) {
  // Nearly every event and query names the default tenant: hash it once.
  static const uint64_t default_seed = SecretTenantSeed("default");
  if (tenant.empty() || tenant == "default") return default_seed;
  return SecretTenantSeed(tenant);
}

// A bijection on 64 bits that spreads most bits over the word (one
// xorshift-multiply-xorshift round). Not every difference: 0x8000000080000000
// passes through it unchanged. So DomainSeed leans on its input being
// secret, and HashEndedFromSum on three rounds chained, not on one round.
inline uint64_t SpreadBits(uint64_t x) {
  x ^= x >> 32;
  x *= 0xD6E8FEB86659FD93ull;
  return x ^ (x >> 32);
}

// A seed for one use (`domain`, a fixed constant) of a tenant's seed: their
// sum, spread (not a xor), so that seeds of two domains or banks differ in
// bits no one can predict (the carries of the sum through the multiply).
// One round is enough, as the tenant seed is secret; a page query pays it
// per page.
inline uint64_t DomainSeed(uint64_t tenant_seed, uint64_t domain) { return SpreadBits(tenant_seed + domain); }

// The tenant tag (see the top of this file; TenantSeed puts it in the
// seed's low 8 bits).
inline constexpr int kTenantTagShift = 0;
inline constexpr uint64_t kTenantTagMask = uint64_t{0xFF} << kTenantTagShift;
inline uint32_t TenantTag(uint64_t tenant_seed) { return static_cast<uint32_t>(tenant_seed & 0xFF); }
inline uint32_t TenantTagOf(const Fingerprint& f) { return static_cast<uint32_t>((f.high & kTenantTagMask) >> kTenantTagShift); }
// `high` with the tag of `tenant_seed` in place of its tag bits.
inline uint64_t WithTenantTag(uint64_t high, uint64_t tenant_seed) {
  return (high & ~kTenantTagMask) | (uint64_t{TenantTag(tenant_seed)} << kTenantTagShift);
}

// Keys that name a page carry its hash, a run of 64 hex digits, followed by
// a suffix (e.g. "<hash>_3_k", "<prefix>_<hash>__swa"). Such a key is
// fingerprinted in two parts, the bytes up to the end of those 64 digits
// (the head) and the rest (the tail), then the two 128-bit parts together:
// every key of a page shares its head, and every page of a layout shares the
// layout's few tails, so a page query hashes a page's head once and each of
// its keys costs one 32-byte hash, not a hash of the whole key. The writer
// applies the same rule to whatever key it is given, so both sides agree on
// every key whatever its shape; a key without such a run is hashed whole,
// in a separate seed domain from the combined parts, and one that ends with
// it (group ids end with the hash) is hash-ended (below).
inline constexpr size_t kFingerprintHexRun = 64;
inline constexpr size_t kNoFingerprintSplit = static_cast<size_t>(-1);

// Bit k set: p[k] is a hex digit (either case), for the 64 bytes at p.
inline uint64_t HexDigitMask64(const char* p) {
  uint64_t mask = 0;
#if defined(__SSE2__)
  for (int chunk = 0; chunk < 4; ++chunk) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * chunk));
    const __m128i digit = DigitLanes(v);
    const __m128i letter = LowercaseHexLetterLanes(_mm_or_si128(v, _mm_set1_epi8(0x20)));
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

// Just past the 64th digit of `bytes`' first run of at least 64 hex digits
// (either case), or kNoHexRun. The writer calls it for every event, so it
// tests 64-byte windows at once and skips past each window's last
// non-digit: a key whose hash starts it costs one window.
inline constexpr size_t kNoHexRun = static_cast<size_t>(-1);
inline size_t HexRunEnd(std::string_view bytes) {
  // No window starting before `start` is all digits, so the first one that
  // is starts the first run of 64.
  for (size_t start = 0; start + kFingerprintHexRun <= bytes.size();) {
    const uint64_t mask = HexDigitMask64(bytes.data() + start);
    if (mask == ~uint64_t{0}) return start + kFingerprintHexRun;
    start += kFingerprintHexRun - static_cast<size_t>(__builtin_clzll(~mask));  // past its last non-digit
  }
  return kNoHexRun;
}

// Where `bytes` splits into head and tail: just after the first 64 digits of
// its first run of at least 64 hex digits, if a byte follows them; else
// kNoFingerprintSplit.
inline size_t FingerprintSplit(std::string_view bytes) {
  const size_t end = HexRunEnd(bytes);
  return end != kNoHexRun && end < bytes.size() ? end : kNoFingerprintSplit;
}

// Hash-ended strings. A group id is "<prefix><64 hex page hash>": its first
// run of 64 digits ends it. Such a string is fingerprinted from its prefix
// (hashed once into a secret) and its 64 digits (mixed by one round of NH,
// the universal hash of UMAC: independent 64x64->128 multiplies, summed;
// two over the 32 bytes lowercase digits spell, four over the digits of any
// other case), not by XXH3 over all its bytes: a page query fingerprints one
// group id per page, and that hash was 40% of a verified page's lookup
// (XXH3-128 over 79 bytes is a chain of dependent multiplies, in the way of
// the probe). The writer gets the same fingerprint from the whole string.
//
// Collisions: the map from the NH sum to the fingerprint is a bijection but
// for the 8 bits the tenant tag replaces, so two digit runs collide only if
// 120 bits of their sums do; for page hashes (SHA-256 digests, 256 random
// bits in 64 digits) that is as likely as a 120-bit collision, give or take
// a few bits. For digits chosen by someone who cannot see the secret, NH
// promises less: two given runs collide with probability about 2^-64 over
// the keys (NH is almost-universal, not a 120-bit hash), so N stored and M
// queried chosen strings give about N*M / 2^64 false hits. That needs the
// nine keys independent (HashEndSecretOf). Digits that are not all lowercase are mixed as the bytes they
// are, under other keys, so "AB.." and "ab.." stay distinct strings. The
// prefix and tenant enter through the secret; the construction differs from
// XXH3's, so a hash-ended string cannot take a fingerprint of another shape
// but by chance.
struct HashEndSecret {
  uint64_t k[9];
  uint64_t tenant_seed;  // for the tenant tag
};

inline HashEndSecret HashEndSecretOf(uint64_t tenant_seed, std::string_view prefix) {
  constexpr uint64_t kHashEndDomain = 0x243F6A8885A308D3ull;  // pi's first fraction bits
  const XXH128_hash_t h = XXH3_128bits_withSeed(prefix.data(), prefix.size(), DomainSeed(tenant_seed, kHashEndDomain));
  // NH needs its keys independent: each is expanded from the 128-bit hash
  // on its own (SplitMix64's steps). 1.3 xored one 64-bit hash into nine
  // constants, and k1 - k0 then took few enough values that a writer could
  // cover them blindly with swapped word pairs (an outside review: 2 false
  // hits in 2^14 stores by 2^14 queries).
  HashEndSecret secret;
  uint64_t state = h.low64;
  for (uint64_t& k : secret.k) k = SplitMix64(state) ^ h.high64;
  secret.tenant_seed = tenant_seed;
  return secret;
}


// The 32 bytes that the 64 lowercase hex digits at `digits` spell, into
// `out`; false (out undefined) if one of them is not [0-9a-f].
inline bool LowercaseHexBytes(const char* digits, uint8_t* out) {
#if defined(__SSE2__)
  for (int half = 0; half < 2; ++half) {
    __m128i nibbles[2];
    for (int part = 0; part < 2; ++part) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(digits + 32 * half + 16 * part));
      const __m128i digit = DigitLanes(v);
      const __m128i letter = LowercaseHexLetterLanes(v);
      if (_mm_movemask_epi8(_mm_or_si128(digit, letter)) != 0xFFFF) return false;
      // '0'-'9' to 0-9, 'a'-'f' to 10-15.
      nibbles[part] = _mm_sub_epi8(_mm_sub_epi8(v, _mm_set1_epi8('0')),
                                   _mm_and_si128(letter, _mm_set1_epi8('a' - '0' - 10)));
    }
    // A 16-bit lane holds one byte's two digits, the first (high nibble) in
    // its low byte.
    const auto join = [](__m128i lanes) {
      return _mm_or_si128(_mm_slli_epi16(_mm_and_si128(lanes, _mm_set1_epi16(0x00FF)), 4), _mm_srli_epi16(lanes, 8));
    };
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16 * half), _mm_packus_epi16(join(nibbles[0]), join(nibbles[1])));
  }
  return true;
#else
  const auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (int i = 0; i < 32; ++i) {
    const int high = nibble(digits[2 * i]), low = nibble(digits[2 * i + 1]);
    if (high < 0 || low < 0) return false;
    out[i] = static_cast<uint8_t>(high << 4 | low);
  }
  return true;
#endif
}

// The NH sum's last step: the fingerprint from the 128-bit sum, through
// three rounds each a bijection of one word given the other (a Feistel
// ladder), so the whole map is a bijection of 128 bits: a = S(low ^ k8),
// b = S(high ^ a), c = S(a ^ b), and (c, b) gives back a, then low and
// high. The low word places a key in its table, so it depends on both
// halves through two rounds: with two products, digit runs that differ in
// one 4-byte window (a counter) sum along a line. (1.4.0's first form,
// S(S(low ^ k8) ^ high) and S(high ^ low), was not one: S passes the
// difference 0x8000000080000000 through unchanged, so sums that differed
// by it in both words shared a fingerprint, an outside review found.)
__extension__ using NhSum = unsigned __int128;  // NH's sum of 64x64-bit products
inline Fingerprint HashEndedFromSum(const HashEndSecret& secret, NhSum sum) {
  const auto low = static_cast<uint64_t>(sum);
  const auto high = static_cast<uint64_t>(sum >> 64);
  const uint64_t a = SpreadBits(low ^ secret.k[8]);
  const uint64_t b = SpreadBits(high ^ a);
  return Fingerprint{SpreadBits(a ^ b), WithTenantTag(b, secret.tenant_seed)};
}

// The fingerprint of "<prefix><digits>" when its 64 digits are lowercase,
// from the 32 bytes they spell (a SHA-256 digest, as a query holds it): NH
// over four words, two multiplies. A query that holds the digest needs no
// hex at all, and half the multiplies of the digits' form.
inline Fingerprint HashEndedFingerprintOfBytes(const HashEndSecret& secret, const uint8_t* bytes) {
  // Keys of their own: this form and the digits' (below) never share terms.
  constexpr uint64_t kBytesDomain = 0x7B54A41DC25A59B5ull;
  uint64_t w[4];
  std::memcpy(w, bytes, sizeof w);
  const NhSum sum = static_cast<NhSum>(w[0] + (secret.k[0] ^ kBytesDomain)) * (w[1] + (secret.k[1] ^ kBytesDomain)) +
                    static_cast<NhSum>(w[2] + (secret.k[2] ^ kBytesDomain)) * (w[3] + (secret.k[3] ^ kBytesDomain));
  return HashEndedFromSum(secret, sum);
}

// The fingerprint of "<prefix><digits>", from the prefix's secret and the
// 64 hex digits at `digits`: from the bytes they spell when all are
// lowercase (as every page and chunk hash is written), else from the digits
// themselves, as the bytes they are (so "AB.." and "ab.." stay distinct).
inline Fingerprint HashEndedFingerprint(const HashEndSecret& secret, const char* digits) {
  uint8_t bytes[32];
  if (LowercaseHexBytes(digits, bytes)) return HashEndedFingerprintOfBytes(secret, bytes);
  uint64_t w[8];
  std::memcpy(w, digits, sizeof w);
  NhSum sum = 0;
  for (int j = 0; j < 8; j += 2) sum += static_cast<NhSum>(w[j] + secret.k[j]) * (w[j + 1] + secret.k[j + 1]);
  return HashEndedFromSum(secret, sum);
}

// One part (head or tail) of a split key, or a whole key.
inline Fingerprint FingerprintPart(uint64_t tenant_seed, std::string_view bytes) {
  XXH128_hash_t h = XXH3_128bits_withSeed(bytes.data(), bytes.size(), tenant_seed);
  return Fingerprint{h.low64, WithTenantTag(h.high64, tenant_seed)};
}

// A split key's fingerprint from its parts' (the seed's domain differs from
// whole keys', so a key cannot collide with the 32 bytes of another's parts).
inline Fingerprint CombineFingerprintParts(uint64_t tenant_seed, const Fingerprint& head, const Fingerprint& tail) {
  constexpr uint64_t kSplitDomain = 0xC2B2AE3D27D4EB4Full;  // not a multiple of the page store's bank stride
  const uint64_t parts[4] = {head.low, head.high, tail.low, tail.high};
  XXH128_hash_t h = XXH3_128bits_withSeed(parts, sizeof parts, DomainSeed(tenant_seed, kSplitDomain));
  return Fingerprint{h.low64, WithTenantTag(h.high64, tenant_seed)};
}

// Where FingerprintOf split a key, and its head's part (a key's fingerprint
// from its parts: a layout computes its keys' from one head per page).
struct KeySplit {
  size_t at = kNoFingerprintSplit;  // the tail is bytes.substr(at)
  Fingerprint head;                 // FingerprintPart of bytes.substr(0, at)
};

// The fingerprint of a key or group id. Key and group fingerprints live in
// separate tables, so the same seed can serve both. `split`, if given, says
// where the key was split (at stays kNoFingerprintSplit if it was not).
inline Fingerprint FingerprintOf(uint64_t tenant_seed, std::string_view bytes, KeySplit* split = nullptr) {
  const size_t end = HexRunEnd(bytes);
  if (end == kNoHexRun) return FingerprintPart(tenant_seed, bytes);
  if (end < bytes.size()) {
    const Fingerprint head = FingerprintPart(tenant_seed, bytes.substr(0, end));
    if (split != nullptr) *split = KeySplit{end, head};
    return CombineFingerprintParts(tenant_seed, head, FingerprintPart(tenant_seed, bytes.substr(end)));
  }
  const size_t digits = end - kFingerprintHexRun;
  return HashEndedFingerprint(HashEndSecretOf(tenant_seed, bytes.substr(0, digits)), bytes.data() + digits);
}

}  // namespace sci
