// Shared pieces of the benchmarks: workload names from performance.md,
// synthetic keys, and the process's resident memory.
#pragma once

#include <malloc.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "index/event.h"
#include "index/index.h"

namespace sci::bench {

// Resident set size of this process, in bytes (from /proc/self/statm).
inline uint64_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long pages_total = 0, pages_resident = 0;
  const int n = std::fscanf(f, "%lu %lu", &pages_total, &pages_resident);
  std::fclose(f);
  return n == 2 ? uint64_t{pages_resident} * 4096 : 0;
}

// Peak resident size (VmHWM) in bytes, or 0 if unreadable.
inline uint64_t PeakResidentBytes() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  uint64_t kib = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, "VmHWM:", 6) == 0) {
      kib = std::strtoull(line + 6, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kib * 1024;
}

// Resets the peak resident size to the current one; false if not allowed.
inline bool ResetPeakResident() {
  FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

// What a structure built by `build` holds resident, per item of `n`: the
// RSS it added (malloc_trim first, so memory an earlier run freed cannot
// hide it) and the peak during its growth (VmHWM, reset first where the
// kernel allows; 0 if not). `build` returns the structure, kept alive
// until both are read; `check` may inspect it before it goes.
struct Resident {
  double bytes_per_item = 0;
  double peak_bytes_per_item = 0;
};
template <typename Build, typename Check>
Resident MeasureResident(uint64_t n, Build&& build, Check&& check) {
  malloc_trim(0);
  const bool peak_reset = ResetPeakResident();
  const uint64_t before = ResidentBytes();
  auto built = build();
  const uint64_t after = ResidentBytes();
  Resident r;
  r.bytes_per_item = static_cast<double>(after - before) / static_cast<double>(n);
  r.peak_bytes_per_item = peak_reset ? static_cast<double>(PeakResidentBytes() - before) / static_cast<double>(n) : 0;
  check(*built);
  return r;
}

// Fills `index` with `n` keys shaped like SGLang objects of other prompts
// ("<64 hex>_<rank>_k"), in batches of 64 like the real publisher, starting
// at sequence `*sequence`. Returns nothing; keys are not kept.
// `decomposing`: SGLang-shaped keys (a 64-hex-digit page hash: page
// entries, one key a page); false: 32 hex digits, which no page holds, so
// every key is kept whole (the per-object table).
inline void FillWithForeignKeys(Index& index, uint64_t n, uint64_t* sequence, uint64_t salt = 0,
                                bool decomposing = true) {
  constexpr size_t kBatch = 64;
  std::vector<std::string> keys(kBatch);
  std::vector<Event> batch(kBatch);
  char buf[96];
  for (uint64_t done = 0; done < n;) {
    const size_t count = static_cast<size_t>(std::min<uint64_t>(kBatch, n - done));
    for (size_t i = 0; i < count; ++i) {
      const uint64_t id = done + i;
      const int len = decomposing
                          ? std::snprintf(buf, sizeof buf, "%016llx%016llx%016llx%016llx_%u_k",
                                          static_cast<unsigned long long>(id * 0x9E3779B97F4A7C15ull + salt),
                                          static_cast<unsigned long long>(id), 0ull,
                                          static_cast<unsigned long long>(salt), static_cast<unsigned>(id % 8))
                          : std::snprintf(buf, sizeof buf, "%016llx%016llx_%u_k",
                                          static_cast<unsigned long long>(id * 0x9E3779B97F4A7C15ull + salt),
                                          static_cast<unsigned long long>(id), static_cast<unsigned>(id % 8));
      keys[i].assign(buf, static_cast<size_t>(len));
      batch[i] = Event{EventKind::kStored, keys[i], {}, {}, {}};
    }
    index.ApplyBatch((*sequence)++, std::span<const Event>(batch.data(), count));
    done += count;
  }
}

}  // namespace sci::bench
