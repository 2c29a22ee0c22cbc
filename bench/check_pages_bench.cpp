// Whole check_pages calls (the router's query, hashing included), per layout,
// request length, index size and hit mix, on the fast path and the exact
// path, for fresh and repeated prompts:
//
//   check_pages/<layout>/p<pages>/keys:<size>/hits:<mix>/<path>/prompts:<fresh|repeated>
//
//   fastpath  every stored page's group is verified (a query ran before), so
//             a hit page costs its hash and one group lookup.
//   exact     every verification is dropped before each call (a key of each
//             page stored again, untimed), so each stored page checks all its keys
//             and marks its group verified again: the first query after a
//             store, every time.
//   fresh     the thread's digest memo is cleared before each call: every
//             page is hashed with SHA-256 (only the first is memoised, as
//             the prompt's first sighting), as for a prompt never seen before.
//   repeated  the memo holds the prompt's pages (it was queried twice
//             before): no page is rehashed.
//
// Layouts in turn (a router thread serving several models):
//
//   check_pages/tp8/p<1|16|169>/keys:1m/hits:all/fastpath/prompts:fresh/layouts_in_turn:<1|2>
//
// each call asks with the next of 1 or 2 handles of the same tp8 layout, so
// with 2 every query's layout is not the one its thread asked about last
// (the slot plans the thread keeps: query/query_plans.h).
//
// Counters: pages, required_keys (keys the request's pages need), hits,
// fast_path, and the time per page and per required key (CPU time).
// Compare against sha256/* in hash_bench for the hashing floor, or read
// check_pages/.../fastpath/paired_with_hashing: the ratio measured call by
// call, side by side.
#include <benchmark/benchmark.h>

#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "sglang/page_query.h"
#include "query_fixture.h"

namespace sci::bench {
namespace {

struct Case {
  std::string layout;
  size_t pages;
  std::string size;
  std::string mix;
  bool fast_path;
  bool repeated;

  RequestSpec request() const { return RequestSpec{layout, pages, HitMixNamed(mix)}; }
  std::string name() const {
    return "check_pages/" + layout + "/p" + std::to_string(pages) + "/keys:" + size + "/hits:" + mix +
           (fast_path ? "/fastpath" : "/exact") + (repeated ? "/prompts:repeated" : "/prompts:fresh");
  }
};

void BM_CheckPages(benchmark::State& state, const Case& c) {
  QueryFixture& fixture = QueryFixture::ForSize(SizeNamed(c.size));
  const Request& request = fixture.request(c.request());
  Index& index = fixture.index();
  PageDigestMemo& memo = *PageDigestMemo::ForThisThread();
  std::vector<uint8_t> hits(request.spec.pages);
  // Warm-up: verifies the stored pages' groups and memoises the prompt (on
  // its second sight).
  fixture.DropVerification(request);
  PageQueryResult result = CheckPages(index, *request.layout, request.tokens, kPageSize, hits);
  result = CheckPages(index, *request.layout, request.tokens, kPageSize, hits);
  for (auto _ : state) {
    if (!c.fast_path) {
      state.PauseTiming();
      fixture.DropVerification(request);
      state.ResumeTiming();
    }
    if (!c.repeated) memo.Clear();
    result = CheckPages(index, *request.layout, request.tokens, kPageSize, hits);
    benchmark::DoNotOptimize(result);
  }
  if (result.total_hits != request.stored_pages || result.n_pages != request.spec.pages ||
      result.fast_path != request.stored_pages) {
    state.SkipWithError("unexpected answer: the workload is not what its name says");
    return;
  }
  const auto per = benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert;
  state.counters["pages"] = static_cast<double>(request.spec.pages);
  state.counters["required_keys"] = static_cast<double>(request.required_keys);
  state.counters["hits"] = static_cast<double>(result.total_hits);
  state.counters["fast_path"] = static_cast<double>(result.fast_path);
  state.counters["per_page"] = benchmark::Counter(static_cast<double>(request.spec.pages), per);
  state.counters["per_key"] = benchmark::Counter(static_cast<double>(request.required_keys), per);
}

// check_pages through `layouts` handles of the request's layout in turn,
// the memo cleared before each call.
void BM_LayoutsInTurn(benchmark::State& state, const RequestSpec& spec, size_t layouts) {
  QueryFixture& fixture = QueryFixture::ForSize(SizeNamed("1m"));
  const Request& request = fixture.request(spec);
  std::vector<std::unique_ptr<const Layout>> handles;
  for (size_t i = 0; i < layouts; ++i) handles.push_back(LayoutNamed(spec.layout));
  PageDigestMemo& memo = *PageDigestMemo::ForThisThread();
  std::vector<uint8_t> hits(spec.pages);
  PageQueryResult result;
  size_t call = 0;
  for (auto _ : state) {
    memo.Clear();
    result = CheckPages(fixture.index(), *handles[call++ % layouts], request.tokens, kPageSize, hits);
    benchmark::DoNotOptimize(result);
  }
  if (result.total_hits != request.stored_pages || result.fast_path != request.stored_pages) {
    state.SkipWithError("unexpected answer: the workload is not what its name says");
  }
}

// The hashing-floor ratio measured pairwise: each iteration times SHA-256 of
// the request's 169 pages alone (SHA256_Init/Update/Final, the fastest
// libcrypto interface here: see sha256/* in hash_bench) and then one whole
// check_pages call on the fast path with a fresh memo, back to back; medians
// of the per-call times and their ratio (performance.md: <= 1.5x).
void BM_FastPathVsHashing(benchmark::State& state, const std::string& size) {
  using Clock = std::chrono::steady_clock;
  QueryFixture& fixture = QueryFixture::ForSize(SizeNamed(size));
  const Request& request = fixture.request(RequestSpec{"tp8", 169, HitMix::kAll});
  Index& index = fixture.index();
  PageDigestMemo& memo = *PageDigestMemo::ForThisThread();
  std::vector<uint8_t> hits(169);
  fixture.DropVerification(request);
  CheckPages(index, *request.layout, request.tokens, kPageSize, hits);  // verifies the groups
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(request.tokens.data());
  constexpr size_t kPageBytes = kPageSize * sizeof(uint32_t);
  std::vector<double> hashing, query;
  bool right = true;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    PageDigest digest{};
    for (size_t page = 0; page < 169; ++page) {
      SHA256_CTX ctx;
      SHA256_Init(&ctx);
      if (page > 0) SHA256_Update(&ctx, digest.data(), digest.size());
      SHA256_Update(&ctx, bytes + page * kPageBytes, kPageBytes);
      SHA256_Final(digest.data(), &ctx);
    }
    benchmark::DoNotOptimize(digest);
    const auto t1 = Clock::now();
    memo.Clear();
    const auto t2 = Clock::now();
    const PageQueryResult result = CheckPages(index, *request.layout, request.tokens, kPageSize, hits);
    const auto t3 = Clock::now();
    hashing.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    query.push_back(std::chrono::duration<double, std::micro>(t3 - t2).count());
    right &= result.fast_path == 169;
  }
  if (!right) {
    state.SkipWithError("unexpected answer: the workload is not what its name says");
    return;
  }
  const auto median = [](std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  const double hashing_us = median(hashing), query_us = median(query);
  state.counters["hashing_us"] = hashing_us;
  state.counters["check_pages_us"] = query_us;
  state.counters["check_pages_over_hashing"] = query_us / hashing_us;
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  // Cost against pages and keys per page (the plot): every layout, length, path.
  for (const char* layout : {"tp1", "tp8", "tp8pp2", "mla", "pools6"}) {
    for (size_t pages : {16, 169, 1024}) {
      for (bool fast : {true, false}) cases.push_back({layout, pages, "1m", "all", fast, false});
    }
  }
  // Cost against index size, and against the hit mix.
  for (const char* size : {"10k", "10m"}) {
    for (bool fast : {true, false}) cases.push_back({"tp8", 169, size, "all", fast, false});
  }
  for (const char* mix : {"half", "none"}) {
    for (bool fast : {true, false}) cases.push_back({"tp8", 169, "1m", mix, fast, false});
  }
  // Repeated prompts: the digest memo at work.
  for (size_t pages : {16, 169, 1024}) {
    for (bool fast : {true, false}) cases.push_back({"tp8", pages, "1m", "all", fast, true});
  }
  for (const char* mix : {"half", "none"}) {
    for (bool fast : {true, false}) cases.push_back({"tp8", 169, "1m", mix, fast, true});
  }
  return cases;
}

const bool kRegistered = [] {
  for (const char* size : {"1m", "10k"}) {
    benchmark::RegisterBenchmark(
        (std::string("check_pages/tp8/p169/keys:") + size + "/hits:all/fastpath/paired_with_hashing").c_str(),
        BM_FastPathVsHashing, std::string(size))
        ->Unit(benchmark::kMicrosecond);
  }
  for (const Case& c : Cases()) {
    QueryFixture::Register(SizeNamed(c.size), c.request());
    benchmark::RegisterBenchmark(c.name().c_str(), BM_CheckPages, c)->Unit(benchmark::kMicrosecond);
  }
  for (size_t pages : {1, 16, 169}) {
    const RequestSpec spec{"tp8", pages, HitMix::kAll};
    QueryFixture::Register(SizeNamed("1m"), spec);
    for (size_t layouts : {1, 2}) {
      benchmark::RegisterBenchmark(("check_pages/tp8/p" + std::to_string(pages) +
                                    "/keys:1m/hits:all/fastpath/prompts:fresh/layouts_in_turn:" + std::to_string(layouts))
                                       .c_str(),
                                   BM_LayoutsInTurn, spec, layouts)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  return true;
}();

}  // namespace
}  // namespace sci::bench
