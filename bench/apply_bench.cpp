// Applying events to the index, without decoding: the writer's own cost.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "bench_support.h"

namespace sci::bench {
namespace {

// Stores then removes 64-event batches of grouped SGLang-shaped keys into an
// index already holding `range(0)` foreign keys: steady-state churn.
void BM_ApplyOnly(benchmark::State& state) {
  Index index;
  uint64_t sequence = 1;
  FillWithForeignKeys(index, static_cast<uint64_t>(state.range(0)), &sequence, 7);
  constexpr size_t kBatch = 64;
  std::vector<std::string> keys(kBatch), groups(kBatch);
  for (size_t i = 0; i < kBatch; ++i) {
    groups[i] = "sglang-hicache:" + std::string(64, static_cast<char>('a' + i % 26)) + std::to_string(i / 8);
    keys[i] = groups[i].substr(15) + "_" + std::to_string(i % 8) + "_k";
  }
  std::vector<Event> stored(kBatch), removed(kBatch);
  for (size_t i = 0; i < kBatch; ++i) {
    stored[i] = Event{EventKind::kStored, keys[i], groups[i], "default", "cpu"};
    removed[i] = Event{EventKind::kRemoved, keys[i], groups[i], "default", "cpu"};
  }
  for (auto _ : state) {
    index.ApplyBatch(sequence++, stored);
    index.ApplyBatch(sequence++, removed);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * 2 * kBatch);
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * 2 * kBatch, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ApplyOnly)->Name("apply/batch:64/keys:10k")->Arg(10'000);
BENCHMARK(BM_ApplyOnly)->Name("apply/batch:64/keys:1m")->Arg(1'000'000);

}  // namespace
}  // namespace sci::bench
