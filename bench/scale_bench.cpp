// One router's index at 1M, 10M, 30M and 100M present keys (issue 27 §2,
// performance.md's "scale" row), everything measured per size in one run:
//
//   scale/tp8/keys:<1m|10m|30m|100m>   (keys:200k: the ctest smoke size)
//
// Each size builds its own index from scratch and drops it afterwards, so
// sizes never add up in memory: the fixture of cold_prompts_bench.cpp
// (cold_fixture.h), 48 stored 169-page tp8 prompts with their groups among
// foreign tp8 pages (16 keys and one group a page) up to exactly the named
// number of present keys. Reported, as counters:
//
//   bytes_per_key        RSS delta of the filled index / keys (malloc_trim
//                        first, as memory_bench.cpp); peak_bytes_per_key the
//                        same from VmHWM, reset before the fill (a table's
//                        growth holds its old and new arrays at once)
//   fastpath_ns_per_page, fastpath_us, fastpath_hashing_us, fastpath_over_hashing
//   exact_ns_per_key, exact_us, exact_hashing_us, exact_over_hashing
//                        fresh cold prompts, measured as cold_prompts_bench.cpp
//                        measures them (see its top comment): each of the 48
//                        prompts queried once by a thread that never hashed it,
//                        memo cleared, paired with SHA-256 of the same pages
//                        alone; medians of the per-call times. fastpath: the
//                        groups verified by another thread (median / 169
//                        pages); exact: verification dropped (median / 2,704
//                        required keys). "rotation" eviction; the same with
//                        the suffix _dram512m after the 512 MiB sweep
//   decode_apply_events_per_s  production messages (production_stream.h, 64
//                        events each) storing new pages then removing them,
//                        decoded and applied by ApplyMessage on the index of
//                        that size, >= 1M events in all
//   contains_ns          Index::Contains (what sci_index_contains calls) of
//                        100,000 random present foreign keys, made beforehand,
//                        each asked once, back to back: wall time per call
//                        (1.4's target: at 100M within 1.3x of 1M);
//                        contains_ns_evict8m, contains_ns_dram512m: 300 such
//                        calls, each timed alone after the sweep, medians;
//                        clock_ns_evict8m, clock_ns_dram512m: the same timing
//                        of no call (included in those medians); line_ns: a
//                        random line of a buffer the index's size, read back
//                        to back (contains_ns' floor)
//   fill_s, process_peak_MB   the fill's wall time, and the process's peak RSS
//                        from the fill's start to the size's end (what the
//                        machine must have for the size)
//
// A size fails (SkipWithError) if its index does not hold exactly the named
// number of keys, before and after the churn, or if any answer is wrong.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench_support.h"
#include "cold_fixture.h"
#include "production_stream.h"
#include "random_line_floor.h"
#include "wire/message_apply.h"

namespace sci::bench {
namespace {

struct ScaleSize {
  const char* name;
  uint64_t keys;
  size_t stream_cycles;  // each kStreamChunks messages of stores, then as many of removals
  bool dram512m;         // also measure the cold queries after the 512 MiB sweep
};

// 16 cycles of the stream are 1,048,576 events.
constexpr ScaleSize kSizes[] = {
    {"200k", 200'000, 1, false},  // the smoke size: a few seconds, no 512 MiB sweep
    {"1m", 1'000'000, 16, true},
    {"10m", 10'000'000, 16, true},
    {"30m", 30'000'000, 16, true},
    {"100m", 100'000'000, 16, true},
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The cold fresh-prompt queries of `fixture`, fast path then exact, after
// `evict`; their counters end in `suffix`. False if an answer was wrong.
bool MeasureColdQueries(benchmark::State& state, ColdFixture& fixture, Eviction evict, const std::string& suffix) {
  std::vector<uint8_t> hits(kPages);
  auto tokens_of = [&fixture](size_t i) -> const std::vector<uint32_t>& { return fixture.prompt(i); };
  auto query = [&](const std::vector<uint32_t>& tokens) {
    return CheckPages(fixture.index(), fixture.layout(), tokens, kPageSize, hits);
  };
  for (bool fast_path : {true, false}) {
    auto right = [](const PageQueryResult& r) {
      return r.total_hits == kPages && r.fast_path == kPages;
    };
    std::function<void(size_t)> after = PrepareVerification(fixture, fast_path);
    PairedTimes times;
    bool all_right = true;
    for (size_t i = 0; i < kPrompts; ++i) {
      all_right &= PairedCall(fixture, i, evict, kPages, tokens_of, query, right, after, &times) >= 0;
    }
    if (!all_right) {
      state.SkipWithError(("unexpected answer on the " + std::string(fast_path ? "fast" : "exact") +
                           " path: the workload is not what its name says")
                              .c_str());
      return false;
    }
    const double hashing_us = Median(times.hashing), query_us = Median(times.query);
    const std::string path = fast_path ? "fastpath" : "exact";
    state.counters[path + "_us" + suffix] = query_us;
    state.counters[path + "_hashing_us" + suffix] = hashing_us;
    state.counters[path + "_over_hashing" + suffix] = query_us / hashing_us;
    if (fast_path) {
      state.counters["fastpath_ns_per_page" + suffix] = query_us * 1000 / kPages;
    } else {
      state.counters["exact_ns_per_key" + suffix] = query_us * 1000 / static_cast<double>(fixture.required_keys());
    }
  }
  return true;
}

// Decodes and applies `cycles` cycles of the production stream on the
// fixture's index: events per second, or a negative value (and the size
// skipped) if an event was not applied in order.
double MeasureDecodeApply(benchmark::State& state, ColdFixture& fixture, size_t cycles) {
  const ProductionStream& stream = ProductionStream::Get();
  Index& index = fixture.index();
  MessageFrames frames;
  DecodedMessage scratch;
  std::string error;
  const Stats before = index.GetStats();
  bool ok = true;
  const auto start = Clock::now();
  for (size_t cycle = 0; cycle < cycles; ++cycle) {
    for (const std::string& payload : stream.payloads) {
      ok &= ApplyMessage(index, frames.Of((*fixture.sequence())++, payload), scratch, &error);
    }
  }
  const double seconds = Seconds(Clock::now() - start);
  const Stats after = index.GetStats();
  const uint64_t events = uint64_t{cycles} * stream.payloads.size() * kStreamBatch;
  if (!ok || after.events_applied - before.events_applied != events || after.sequence_gaps != before.sequence_gaps) {
    state.SkipWithError(("not every event was applied in order: " + error).c_str());
    return -1;
  }
  state.counters["decode_apply_events"] = static_cast<double>(events);
  return static_cast<double>(events) / seconds;
}

// Random present foreign keys (pages [0, foreign_keys / 16), stored by
// ColdFixture with salt 77), `count` of them, made beforehand.
std::vector<std::string> RandomForeignKeys(uint64_t foreign_keys, size_t count) {
  std::mt19937_64 rng(foreign_keys);
  std::vector<std::string> keys;
  keys.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t k = rng() % foreign_keys;
    const uint64_t slot = k % 16;
    keys.push_back(ForeignPageHash(k / 16, 77) + "_" + std::to_string(slot / 2) + (slot % 2 == 0 ? "_k" : "_v"));
  }
  return keys;
}

// Index::Contains of random present foreign keys, each asked once: ns per
// call, or a negative value if one was not found. With kNone, 100,000
// calls back to back, the wall time per call: the loop's own calls keep a
// small index in the caches. Otherwise each of 300 calls is timed alone
// after `evict` and a read of the key, as a router calls between other
// work, and the median is returned: at every size the index's lines then
// come from where the eviction left them (dram512m: DRAM at 1M as at
// 100M), so the ratio between sizes shows what the index adds at scale,
// apart from the machine's caches.
double MeasureContains(ColdFixture& fixture, uint64_t foreign_keys, Eviction evict) {
  const std::vector<std::string> keys = RandomForeignKeys(foreign_keys, evict == Eviction::kNone ? 100'000 : 300);
  const Index& index = fixture.index();
  size_t found = 0;
  if (evict == Eviction::kNone) {
    const auto start = Clock::now();
    for (const std::string& key : keys) found += index.Contains({}, key) ? 1 : 0;
    const double seconds = Seconds(Clock::now() - start);
    return found == keys.size() ? seconds * 1e9 / static_cast<double>(keys.size()) : -1;
  }
  std::vector<double> micros;
  micros.reserve(keys.size());
  for (const std::string& key : keys) {
    fixture.Evict(evict);
    // A router asks about a key it has just made: the key's bytes are in
    // its cache, whatever the index's are.
    benchmark::DoNotOptimize(std::accumulate(key.begin(), key.end(), 0u));
    const auto start = Clock::now();
    found += index.Contains({}, key) ? 1 : 0;
    micros.push_back(Micros(Clock::now() - start));
  }
  return found == keys.size() ? Median(std::move(micros)) * 1000 : -1;
}

// The floor under a random lookup back to back: ns per read of random
// lines, one after another, each read's address waiting for the last read's
// value, in a buffer of `bytes` mapped as the index's tables are.
double MeasureDependentLine(size_t bytes) {
  const TableSizedBuffer buffer(bytes);
  const std::vector<size_t> offsets = RandomLineOffsets(buffer, 100'000);
  uint8_t last = 1;
  uint64_t sum = 0;
  const auto start = Clock::now();
  for (const size_t offset : offsets) {
    last = ReadLine(buffer, offset, last, /*dependent=*/true);
    sum += last;
  }
  const double seconds = Seconds(Clock::now() - start);
  benchmark::DoNotOptimize(sum);
  return seconds * 1e9 / static_cast<double>(offsets.size());
}

// What MeasureContains' timing costs with no call between the clock reads,
// after the same eviction: median ns of 300 (part of every timed call).
double MeasureClockAlone(ColdFixture& fixture, Eviction evict) {
  std::vector<double> micros;
  for (int i = 0; i < 300; ++i) {
    fixture.Evict(evict);
    const auto start = Clock::now();
    micros.push_back(Micros(Clock::now() - start));
  }
  return Median(std::move(micros)) * 1000;
}

bool HoldsExactly(benchmark::State& state, ColdFixture& fixture, uint64_t keys, const char* when) {
  const uint64_t held = fixture.index().GetStats().keys;
  if (held == keys) return true;
  char why[160];
  std::snprintf(why, sizeof why, "the index holds %llu keys %s, not the %llu named",
                static_cast<unsigned long long>(held), when, static_cast<unsigned long long>(keys));
  state.SkipWithError(why);
  return false;
}

void BM_Scale(benchmark::State& state, ScaleSize size) {
  ProductionStream::Get();  // made once, before any index
  for (auto _ : state) {
    const auto fill_start = Clock::now();
    auto fixture = std::make_unique<ColdFixture>(size.keys - kPromptKeys);
    const double fill_s = Seconds(Clock::now() - fill_start);
    if (!HoldsExactly(state, *fixture, size.keys, "once filled")) return;
    const auto keys = static_cast<double>(size.keys);
    state.counters["keys"] = keys;
    state.counters["groups"] = static_cast<double>(fixture->index().GetStats().groups);
    state.counters["fill_s"] = fill_s;
    state.counters["bytes_per_key"] = static_cast<double>(fixture->index_bytes()) / keys;
    state.counters["peak_bytes_per_key"] = static_cast<double>(fixture->index_peak_bytes()) / keys;
    state.counters["index_MB"] = static_cast<double>(fixture->index_bytes()) / 1e6;
    state.counters["required_keys"] = static_cast<double>(fixture->required_keys());

    if (!MeasureColdQueries(state, *fixture, Eviction::kNone, "")) return;
    if (size.dram512m && !MeasureColdQueries(state, *fixture, Eviction::kDram, "_dram512m")) return;
    state.counters["line_ns"] = MeasureDependentLine(fixture->index_bytes());
    for (const Eviction evict : {Eviction::kNone, Eviction::kPrivateCaches, Eviction::kDram}) {
      if (evict == Eviction::kDram && !size.dram512m) continue;
      const double contains_ns = MeasureContains(*fixture, size.keys - kPromptKeys, evict);
      if (contains_ns < 0) {
        state.SkipWithError("a present key was not found");
        return;
      }
      if (evict == Eviction::kNone) {
        state.counters["contains_ns"] = contains_ns;
      } else {
        state.counters[std::string("contains_ns_") + EvictionName(evict)] = contains_ns;
        state.counters[std::string("clock_ns_") + EvictionName(evict)] = MeasureClockAlone(*fixture, evict);
      }
    }

    const double rate = MeasureDecodeApply(state, *fixture, size.stream_cycles);
    if (rate < 0 || !HoldsExactly(state, *fixture, size.keys, "after the churn")) return;
    state.counters["decode_apply_events_per_s"] = rate;
    state.counters["process_peak_MB"] = static_cast<double>(PeakResidentBytes()) / 1e6;
    state.PauseTiming();
    fixture.reset();
    state.ResumeTiming();
  }
}

const bool kRegistered = [] {
  for (const ScaleSize& size : kSizes) {
    benchmark::RegisterBenchmark((std::string("scale/tp8/keys:") + size.name).c_str(), BM_Scale, size)
        ->Iterations(1)
        ->UseRealTime()
        ->Unit(benchmark::kSecond);
  }
  return true;
}();

}  // namespace
}  // namespace sci::bench
