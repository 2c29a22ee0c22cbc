// Answers per storage tier (issue #36): what one call answering every tier
// costs next to the plain page query, and what tracking media costs in
// memory.
//
//   tiers/tp8/p169/keys:1m/half_on_disk/<fastpath|exact>/<rotation|evict8m|dram512m>/paired_with_check_pages
//   memory/tp8/keys:1m/<object_rule|half_on_disk>
//
// The index is cold_prompts_bench's (cold_fixture.h): 48 stored 169-page
// tp8 prompts among 1M foreign keys (SCI_TIERS_BENCH_KEYS overrides, for
// the smoke run), under the per-medium rule, with half the keys on disk
// only: every odd page of the prompts (so each prompt's pages alternate
// tier 0 and tier 1), the second half of the foreign pages. Fresh cold
// prompts as there: each iteration clears the thread's memo and evicts
// before each timed call, then times CheckPages on prompt i and CheckTiers
// on prompt i + 24 (another fresh prompt: the same one would find its
// lines warm), in alternating order, so both see the same caches.
// fastpath: the groups were verified by another thread; exact: each
// prompt's verifications are dropped right after its query (its pages'
// first keys stored again on their own medium). Medians and their ratio:
// the target is check_tiers <= 1.1x check_pages.
//
// memory/...: the index's resident bytes per key once filled (RSS delta,
// as scale_bench), under the object rule (media not kept, all keys on cpu)
// and under the per-medium rule with half the keys on disk only; the
// second's ratio to the first is what tracking media costs (target <= 1.1x).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cold_fixture.h"

namespace sci::bench {
namespace {

uint64_t ForeignKeys() {
  const char* env = std::getenv("SCI_TIERS_BENCH_KEYS");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 1'000'000;
}

ColdFixture& Fixture(ColdFixture::Media media) {
  if (media == ColdFixture::Media::kNone) {
    static ColdFixture* const object_rule = new ColdFixture(ForeignKeys());
    return *object_rule;
  }
  static ColdFixture* const half_on_disk = new ColdFixture(ForeignKeys(), ColdFixture::Media::kHalfOnDisk);
  return *half_on_disk;
}

// Even pages on cpu (tier 0), odd ones on disk (tier 1): 85 and 84 of 169.
constexpr size_t kFastPages = (kPages + 1) / 2;

void BM_TiersVsPages(benchmark::State& state, bool fast_path, Eviction evict) {
  ColdFixture& fixture = Fixture(ColdFixture::Media::kHalfOnDisk);
  const std::function<void(size_t)> after = PrepareVerification(fixture, fast_path);
  std::vector<uint8_t> hits(kPages), tiers(kPages);
  std::vector<double> pages_us, tiers_us;
  bool right = true;
  size_t i = 0;
  for (auto _ : state) {
    const size_t plain_prompt = i, tier_prompt = i + kPrompts / 2;
    double iteration = 0;
    for (int turn = 0; turn < 2; ++turn) {
      const bool tier_turn = (turn == 0) == (i % 2 == 0);  // alternate which goes first
      fixture.Evict(evict);
      PageDigestMemo::ForThisThread()->Clear();
      const auto t0 = Clock::now();
      if (tier_turn) {
        TierAnswer answer;
        const PageQueryResult r = CheckTiers(fixture.index(), fixture.layout(), fixture.prompt(tier_prompt),
                                             kPageSize, tiers, &answer);
        const auto t1 = Clock::now();
        tiers_us.push_back(Micros(t1 - t0));
        iteration += Micros(t1 - t0);
        right = right && r.total_hits == kPages && r.fast_path == kPages &&
                answer.pages_at[0] == kFastPages && answer.prefix_pages[0] == 1 && answer.prefix_pages[1] == kPages;
        after(tier_prompt);
      } else {
        const PageQueryResult r =
            CheckPages(fixture.index(), fixture.layout(), fixture.prompt(plain_prompt), kPageSize, hits);
        const auto t1 = Clock::now();
        pages_us.push_back(Micros(t1 - t0));
        iteration += Micros(t1 - t0);
        right = right && r.total_hits == kPages && r.fast_path == kPages;
        after(plain_prompt);
      }
    }
    state.SetIterationTime(iteration / 1e6);
    ++i;
  }
  if (!right) {
    state.SkipWithError("unexpected answer: the workload is not what its name says");
    return;
  }
  const double pages = Median(pages_us), tiered = Median(tiers_us);
  state.counters["check_pages_us"] = pages;
  state.counters["check_tiers_us"] = tiered;
  state.counters["tiers_over_pages"] = tiered / pages;
}

void BM_MemoryPerKey(benchmark::State& state, ColdFixture::Media media) {
  ColdFixture& fixture = Fixture(media);
  for (auto _ : state) benchmark::DoNotOptimize(fixture.index().GetStats().keys);
  const Stats stats = fixture.index().GetStats();
  state.counters["keys"] = static_cast<double>(stats.keys);
  state.counters["keys_tier0"] = static_cast<double>(stats.keys_tier0);
  state.counters["keys_tier1"] = static_cast<double>(stats.keys_tier1);
  state.counters["bytes_per_key"] = static_cast<double>(fixture.index_bytes()) / static_cast<double>(stats.keys);
}

std::string KeysName() {
  const uint64_t keys = ForeignKeys();
  return keys % 1'000'000 == 0 ? std::to_string(keys / 1'000'000) + "m" : std::to_string(keys / 1000) + "k";
}

const bool kRegistered = [] {
  const std::string keys = KeysName();
  // Memory first: each fixture's RSS delta is taken while it is the only
  // thing growing.
  for (ColdFixture::Media media : {ColdFixture::Media::kNone, ColdFixture::Media::kHalfOnDisk}) {
    benchmark::RegisterBenchmark(("memory/tp8/keys:" + keys + "/" +
                                  (media == ColdFixture::Media::kNone ? "object_rule" : "half_on_disk"))
                                     .c_str(),
                                 BM_MemoryPerKey, media)
        ->Iterations(1);
  }
  for (Eviction evict : {Eviction::kNone, Eviction::kPrivateCaches, Eviction::kDram}) {
    for (bool fast : {true, false}) {
      benchmark::RegisterBenchmark(("tiers/tp8/p169/keys:" + keys + "/half_on_disk/" + (fast ? "fastpath" : "exact") +
                                    "/" + EvictionName(evict) + "/paired_with_check_pages")
                                       .c_str(),
                                   BM_TiersVsPages, fast, evict)
          ->Iterations(kPrompts)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  return true;
}();

}  // namespace
}  // namespace sci::bench
