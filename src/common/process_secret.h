// The process's secret: 32 bytes from the kernel's generator, made once on
// first use and never written anywhere (not logged, not in stats). Hashes
// that inputs from outside could be aimed at key their domain with it: the
// vLLM digest memo's domains (vllm/memo_domain.cpp), the SGLang memo's root
// (query/digest_memo.h), the page store's page fingerprints
// (index/page_store.h) and every key fingerprint (index/fingerprint.h,
// KeySeed). An adversary who cannot see it cannot choose inputs that
// collide. (Slot ids are public hashes; slot_names.h compares names.)
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

namespace sci {

const std::array<uint8_t, 32>& ProcessSecret();

// Its first 8 bytes, as a hash seed.
inline uint64_t ProcessSeed() {
  static const uint64_t seed = [] {
    uint64_t s = 0;
    std::memcpy(&s, ProcessSecret().data(), sizeof s);
    return s;
  }();
  return seed;
}

}  // namespace sci
