// What the cold-prompt benchmarks push out of the caches before each timed
// call, and the per-call timing they share (cold_fixture.h,
// vllm_query_bench.cpp):
//   rotation  nothing: the other prompts queried since (more than the
//             core's 2 MiB L2) pushed this one's data out; code stays warm;
//   evict8m   an 8 MiB buffer read through: the core's private caches and
//             TLBs emptied, code and page-table entries included;
//   dram512m  a 512 MiB buffer read through, twice this guest's L3: tables,
//             code and page tables come from DRAM.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sci::bench {

enum class Eviction { kNone, kPrivateCaches, kDram };
inline constexpr size_t kPrivateCachesBytes = size_t{8} << 20;  // evict8m
inline constexpr size_t kDramBytes = size_t{512} << 20;         // dram512m

inline const char* EvictionName(Eviction eviction) {
  switch (eviction) {
    case Eviction::kNone:
      return "rotation";
    case Eviction::kPrivateCaches:
      return "evict8m";
    case Eviction::kDram:
      return "dram512m";
  }
  return "?";
}

// Reads through the buffer an eviction names (allocated on first use:
// 512 MiB is not for every run).
class CacheEvictor {
 public:
  void Evict(Eviction eviction) {
    if (eviction == Eviction::kNone) return;
    std::vector<uint64_t>& buffer = eviction == Eviction::kDram ? dram_ : private_caches_;
    const size_t bytes = eviction == Eviction::kDram ? kDramBytes : kPrivateCachesBytes;
    if (buffer.empty()) buffer.assign(bytes / sizeof(uint64_t), 1);
    uint64_t sum = 0;
    for (size_t i = 0; i < buffer.size(); i += 8) sum += buffer[i];
    benchmark::DoNotOptimize(sum);
  }

 private:
  std::vector<uint64_t> private_caches_, dram_;
};

inline double Micros(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace sci::bench
