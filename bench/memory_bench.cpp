// Memory per present key, measured from the process (RSS delta), not
// estimated: performance.md asks for <= 48 bytes per key at 10 million keys.
#include <benchmark/benchmark.h>

#include "bench_support.h"

namespace sci::bench {
namespace {

void BM_MemoryPerKey(benchmark::State& state) {
  const uint64_t n = static_cast<uint64_t>(state.range(0));
  double bytes_per_key = 0;
  for (auto _ : state) {
    const uint64_t before = ResidentBytes();
    auto index = std::make_unique<Index>(IndexOptions{.max_entries = n + 1});
    uint64_t sequence = 1;
    FillWithForeignKeys(*index, n, &sequence);
    const uint64_t after = ResidentBytes();
    benchmark::DoNotOptimize(index->GetStats().keys);
    bytes_per_key = static_cast<double>(after - before) / static_cast<double>(n);
    state.PauseTiming();
    index.reset();
    state.ResumeTiming();
  }
  state.counters["bytes_per_key"] = bytes_per_key;
  state.counters["keys"] = static_cast<double>(n);
}
BENCHMARK(BM_MemoryPerKey)->Name("memory/keys:10k")->Arg(10'000)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MemoryPerKey)->Name("memory/keys:1m")->Arg(1'000'000)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MemoryPerKey)->Name("memory/keys:10m")->Arg(10'000'000)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sci::bench
