// What this machine's memory does with the access pattern of the exact
// path: not the library, the floor under it (bench/README.md, "Method").
//
//   guest_memory/lines:53MiB/<scattered|16_per_4KiB>/prefetched_256
//   guest_memory/overlap/sha256_page/paired_with_16_prefetches
//
// lines: reads random cache lines of a 53 MiB buffer (the size of a 1M-key
// index's tables) on transparent huge pages, as the exact path reads key
// lines: 256 prefetched, then 256 read. scattered: every line anywhere;
// 16_per_4KiB: the lines come in runs of 16 within one random 4 KiB page
// (a page's 16 keys, were they stored
// together; in the query itself that placement made lookups slower:
// CHANGELOG.md, 1.1.0, and bench/README.md's history). ns_per_line is the
// throughput: how many lines the core keeps in flight at this latency.
//
// overlap: SHA-256 of one page message (288 bytes, as the query hashes
// it), alone and after prefetches of 16 scattered lines (a page's keys),
// alternating in one run. added_ns_per_prefetch is what each prefetch adds
// to the hash: 0 if the misses overlapped with it, the line throughput
// above if they did not.
#include <benchmark/benchmark.h>

#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace sci::bench {
namespace {

constexpr size_t kBufferBytes = size_t{53} << 20;
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kLine = 64;
constexpr size_t kBatch = 256;  // a round's key lines (page_query.cpp)
constexpr size_t kLinesPerPage = 16;

// The buffer, huge-page aligned and advised, touched once.
const char* Buffer() {
  static const char* const buffer = [] {
    void* mapped = ::mmap(nullptr, kBufferBytes + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) return static_cast<const char*>(nullptr);
    char* aligned = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(mapped) + kHugePage - 1) & ~(kHugePage - 1));
    (void)::madvise(aligned, kBufferBytes, MADV_HUGEPAGE);
    std::memset(aligned, 1, kBufferBytes);
    return static_cast<const char*>(aligned);
  }();
  return buffer;
}

// Byte offsets of `n` lines: anywhere, or in runs of kLinesPerPage within
// one random 4 KiB page.
std::vector<uint64_t> LineOffsets(size_t n, bool grouped) {
  std::mt19937_64 rng(2026);
  std::vector<uint64_t> offsets(n);
  for (size_t i = 0; i < n; i += kLinesPerPage) {
    const uint64_t page = rng() % (kBufferBytes / 4096);
    for (size_t k = i; k < std::min(n, i + kLinesPerPage); ++k) {
      offsets[k] = grouped ? page * 4096 + (rng() % (4096 / kLine)) * kLine : (rng() % (kBufferBytes / kLine)) * kLine;
    }
  }
  return offsets;
}

void BM_Lines(benchmark::State& state, bool grouped) {
  const char* buffer = Buffer();
  if (buffer == nullptr) {
    state.SkipWithError("mmap refused 53 MiB");
    return;
  }
  const std::vector<uint64_t> offsets = LineOffsets(size_t{1} << 20, grouped);
  size_t next = 0;
  uint64_t sum = 0;
  for (auto _ : state) {
    if (next + kBatch > offsets.size()) next = 0;
    const uint64_t* batch = offsets.data() + next;
    for (size_t k = 0; k < kBatch; ++k) __builtin_prefetch(buffer + batch[k]);
    for (size_t k = 0; k < kBatch; ++k) sum += *reinterpret_cast<const volatile uint64_t*>(buffer + batch[k]);
    next += kBatch;
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kBatch));
  state.counters["ns_per_line"] = benchmark::Counter(static_cast<double>(state.iterations() * kBatch),
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert,
                                                     benchmark::Counter::kIs1000);
}

// SHA-256 of one page message: the previous digest, then 256 token bytes.
void HashPage(const uint8_t* tokens, uint8_t* digest) {
  SHA256_CTX ctx;
  SHA256_Init(&ctx);
  SHA256_Update(&ctx, digest, SHA256_DIGEST_LENGTH);
  SHA256_Update(&ctx, tokens, 256);
  SHA256_Final(digest, &ctx);
}

void BM_Overlap(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  const char* buffer = Buffer();
  if (buffer == nullptr) {
    state.SkipWithError("mmap refused 53 MiB");
    return;
  }
  const std::vector<uint64_t> offsets = LineOffsets(size_t{1} << 20, /*grouped=*/false);
  const std::vector<uint8_t> tokens(256, 7);
  uint8_t digest[SHA256_DIGEST_LENGTH] = {};
  constexpr size_t kPages = 64;  // hashes per timed stretch
  size_t next = 0;
  double alone_ns = 0, with_ns = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    for (size_t p = 0; p < kPages; ++p) HashPage(tokens.data(), digest);
    const auto t1 = Clock::now();
    for (size_t p = 0; p < kPages; ++p) {
      if (next + kLinesPerPage > offsets.size()) next = 0;
      for (size_t k = 0; k < kLinesPerPage; ++k) __builtin_prefetch(buffer + offsets[next + k]);
      next += kLinesPerPage;
      HashPage(tokens.data(), digest);
    }
    const auto t2 = Clock::now();
    alone_ns += std::chrono::duration<double, std::nano>(t1 - t0).count();
    with_ns += std::chrono::duration<double, std::nano>(t2 - t1).count();
  }
  benchmark::DoNotOptimize(digest);
  const double pages = static_cast<double>(state.iterations() * kPages);
  state.counters["hash_ns"] = alone_ns / pages;
  state.counters["hash_with_prefetches_ns"] = with_ns / pages;
  state.counters["added_ns_per_prefetch"] = (with_ns - alone_ns) / pages / kLinesPerPage;
}

const bool kRegistered = [] {
  benchmark::RegisterBenchmark("guest_memory/lines:53MiB/scattered/prefetched_256", BM_Lines, false);
  benchmark::RegisterBenchmark("guest_memory/lines:53MiB/16_per_4KiB/prefetched_256", BM_Lines, true);
  benchmark::RegisterBenchmark("guest_memory/overlap/sha256_page/paired_with_16_prefetches", BM_Overlap);
  return true;
}();

}  // namespace
}  // namespace sci::bench
