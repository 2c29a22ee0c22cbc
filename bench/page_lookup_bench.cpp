// The lookup part of a query, without hashing: CheckPageHashes with the page
// hashes precomputed (as a caller that already holds SGLang's hashes would
// call it), fast path against exact path, per layout:
//
//   page_lookup/<layout>/p169/keys:1m/hits:all/<fastpath|exact>
//
// The fast path costs one group lookup per page; the exact path fingerprints
// and looks up every key the page needs and marks the group verified
// (verification is dropped before each call, untimed). The ratio of the two
// per-page times is the fast path's gain (performance.md: >= 10x for tp8);
// page_lookup/<layout>/.../paired measures it call by call, side by side.
//
// Below them, the primitives a page costs, to say what dominates:
//   primitives/fingerprint/<layout>_key      XXH3-128 of one object key
//   primitives/contains_all/keys:<size>      Index::ContainsAll over each
//       page's 16 tp8 key fingerprints (the request's own keys, as a query
//       sees them), per key
//   primitives/contains_all_cold/keys:<size> the same over pages of foreign
//       keys spread over the whole table (cache-cold lines), per key
//   primitives/probe_group/keys:1m           Index::ProbeGroup of a verified group
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "index/fingerprint.h"
#include "sglang/page_query.h"
#include "query_fixture.h"

namespace sci::bench {
namespace {

constexpr size_t kPages = 169;

void BM_PageLookup(benchmark::State& state, const std::string& layout, const std::string& size, bool fast_path) {
  QueryFixture& fixture = QueryFixture::ForSize(SizeNamed(size));
  const Request& request = fixture.request(RequestSpec{layout, kPages, HitMix::kAll});
  Index& index = fixture.index();
  std::vector<uint8_t> hits(kPages);
  const auto hash_of = [&request](size_t page) -> std::string_view { return request.hashes[page]; };
  fixture.DropVerification(request);
  PageQueryResult result = CheckPageHashes(index, *request.layout, kPages, hash_of, hits);
  for (auto _ : state) {
    if (!fast_path) {
      state.PauseTiming();
      fixture.DropVerification(request);
      state.ResumeTiming();
    }
    result = CheckPageHashes(index, *request.layout, kPages, hash_of, hits);
    benchmark::DoNotOptimize(result);
  }
  if (result.total_hits != kPages || result.fast_path != kPages) {
    state.SkipWithError("unexpected answer: the workload is not what its name says");
    return;
  }
  const auto per = benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert;
  state.counters["pages"] = static_cast<double>(kPages);
  state.counters["required_keys"] = static_cast<double>(request.required_keys);
  state.counters["per_page"] = benchmark::Counter(static_cast<double>(kPages), per);
  state.counters["per_key"] = benchmark::Counter(static_cast<double>(request.required_keys), per);
}

// Median of `samples` (reorders them).
double Median(std::vector<double>& samples) {
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(samples.size() / 2), samples.end());
  return samples[samples.size() / 2];
}

// The ratio itself, measured pairwise: each iteration times one fast-path
// call and one exact-path call back to back (the drop of verification in
// between untimed), so both see the same machine; medians of the per-call
// times, and their ratio. Separate benchmarks run minutes apart, while a
// neighbour's load comes and goes.
void BM_PageLookupPaired(benchmark::State& state, const std::string& layout, const std::string& size) {
  using Clock = std::chrono::steady_clock;
  QueryFixture& fixture = QueryFixture::ForSize(SizeNamed(size));
  const Request& request = fixture.request(RequestSpec{layout, kPages, HitMix::kAll});
  Index& index = fixture.index();
  std::vector<uint8_t> hits(kPages);
  const auto hash_of = [&request](size_t page) -> std::string_view { return request.hashes[page]; };
  std::vector<double> fast, exact;
  bool right = true;
  CheckPageHashes(index, *request.layout, kPages, hash_of, hits);  // verifies the groups
  for (auto _ : state) {
    // The exact call marks every group verified again: the next fast call is one.
    const auto t0 = Clock::now();
    const PageQueryResult f = CheckPageHashes(index, *request.layout, kPages, hash_of, hits);
    const auto t1 = Clock::now();
    fixture.DropVerification(request);
    const auto t2 = Clock::now();
    const PageQueryResult e = CheckPageHashes(index, *request.layout, kPages, hash_of, hits);
    const auto t3 = Clock::now();
    fast.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
    exact.push_back(std::chrono::duration<double, std::nano>(t3 - t2).count());
    right &= f.fast_path == kPages && e.fast_path == kPages && e.total_hits == kPages;
  }
  if (!right) {
    state.SkipWithError("unexpected answer: the workload is not what its name says");
    return;
  }
  const double fast_ns = Median(fast), exact_ns = Median(exact);
  state.counters["fast_ns_per_page"] = fast_ns / kPages;
  state.counters["exact_ns_per_page"] = exact_ns / kPages;
  state.counters["exact_over_fast"] = exact_ns / fast_ns;
}

void BM_Fingerprint(benchmark::State& state, const std::string& layout) {
  const auto named = LayoutNamed(layout);
  const std::string key = named->KeysFor(std::string(64, 'a'), 0, 1).back();
  const uint64_t seed = named->tenant_seed();
  for (auto _ : state) {
    benchmark::DoNotOptimize(key.data());
    benchmark::DoNotOptimize(FingerprintOf(seed, key));
  }
  state.counters["key_bytes"] = static_cast<double>(key.size());
}

const bool kRegistered = [] {
  for (const char* layout : {"tp1", "tp8", "tp8pp2", "mla", "pools6"}) {
    QueryFixture::Register(SizeNamed("1m"), RequestSpec{layout, kPages, HitMix::kAll});
    for (bool fast : {true, false}) {
      const std::string name =
          std::string("page_lookup/") + layout + "/p169/keys:1m/hits:all/" + (fast ? "fastpath" : "exact");
      benchmark::RegisterBenchmark(name.c_str(), BM_PageLookup, std::string(layout), std::string("1m"), fast)
          ->Unit(benchmark::kMicrosecond);
    }
    benchmark::RegisterBenchmark((std::string("page_lookup/") + layout + "/p169/keys:1m/hits:all/paired").c_str(),
                                 BM_PageLookupPaired, std::string(layout), std::string("1m"))
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((std::string("primitives/fingerprint/") + layout + "_key").c_str(), BM_Fingerprint,
                                 std::string(layout));
  }
  // The tp8 fast/exact pair at the smallest size too (the smoke run's).
  QueryFixture::Register(SizeNamed("10k"), RequestSpec{"tp8", kPages, HitMix::kAll});
  for (bool fast : {true, false}) {
    benchmark::RegisterBenchmark((std::string("page_lookup/tp8/p169/keys:10k/hits:all/") +
                                  (fast ? "fastpath" : "exact")).c_str(),
                                 BM_PageLookup, std::string("tp8"), std::string("10k"), fast)
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("page_lookup/tp8/p169/keys:10k/hits:all/paired", BM_PageLookupPaired,
                               std::string("tp8"), std::string("10k"))
      ->Unit(benchmark::kMicrosecond);
  return true;
}();

}  // namespace
}  // namespace sci::bench
