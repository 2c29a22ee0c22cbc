// The process's secret: 32 bytes from the kernel's generator, made once on
// first use and never written anywhere (not logged, not in stats). Every
// hash that inputs from outside could be aimed at is keyed with it, so an
// adversary who cannot see it cannot choose inputs that collide: tenant
// seeds (index/fingerprint.h, TenantSeed), and through them every key and
// page fingerprint; slot ids (index/slot_names.h); the SGLang memo's root
// (query/digest_memo.h); the vLLM digest memo's domains
// (vllm/memo_domain.cpp); the table of deferred stores
// (index/deferred_stores.h).
//
// Each use takes its own key, derived from the secret by a keyed hash of
// the use's name (ProcessSubkey), never by xoring the secret into a public
// constant: a xor keeps whatever difference two public values had, and
// XXH3 passes some differences of its seed straight through (an outside
// review built two tenants whose key seeds differed in the top bit only,
// and a key of one was a key of the other).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "common/siphash.h"

namespace sci {

const std::array<uint8_t, 32>& ProcessSecret();

// The key for `purpose` (a fixed name, e.g. "tenant seed"): SipHash-2-4 of
// the whole name under the secret's last 16 bytes, then under a key made
// with that first word. Cheap enough to
// call each time, but callers keep it in a static.
SipKey ProcessSubkey(std::string_view purpose);

}  // namespace sci
