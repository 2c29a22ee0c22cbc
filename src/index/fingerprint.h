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

namespace sci {

struct Fingerprint {
  uint64_t low = 0;
  uint64_t high = 0;

  friend bool operator==(const Fingerprint&, const Fingerprint&) = default;
};

// The fingerprint is already uniformly distributed: hand its low half to the
// hash table as is instead of hashing it a second time.
struct FingerprintHash {
  size_t operator()(const Fingerprint& f) const { return static_cast<size_t>(f.low); }
};

// Seed of a tenant's key space. An empty tenant means "default".
inline uint64_t TenantSeed(std::string_view tenant) {
  if (tenant.empty()) tenant = "default";
  return XXH3_64bits(tenant.data(), tenant.size());
}

// Key and group fingerprints live in separate tables, so the same seed can
// serve both.
inline Fingerprint FingerprintOf(uint64_t tenant_seed, std::string_view bytes) {
  XXH128_hash_t h = XXH3_128bits_withSeed(bytes.data(), bytes.size(), tenant_seed);
  return Fingerprint{h.low64, h.high64};
}

}  // namespace sci
