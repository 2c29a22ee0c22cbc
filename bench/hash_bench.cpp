// SHA-256 page hashing alone: the floor under every check_pages call.
//
// 169 chained pages of 64 tokens (the p169 request): page i hashes
// digest_{i-1} (32 bytes) then its 256 token bytes, 288 bytes a message.
// Each libcrypto interface is measured on exactly that, since their fixed
// per-message costs differ by about 2x at this size (performance.md):
//   lowlevel        SHA256_Init / Update / Final, context on the stack
//   evp_digest      EVP_Digest with an EVP_MD fetched once (one buffer: a copy)
//   evp_ctx_reused  one EVP_MD_CTX reused through EVP_DigestInit_ex2
//   oneshot         SHA256() (one buffer: a copy)
// beside the library's own PageHasher, without its digest memo, with the
// memo on prompts it has never seen (memo:fresh: the first page misses and
// is memoised, the rest is hashed without the memo) and on a prompt it has
// seen twice (memo:repeated: every page hits).
// Every variant must end on the same digest as the library, or it reports
// an error instead of a time.
#include <benchmark/benchmark.h>

#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <cstring>
#include <vector>

#include "sglang/page_hash.h"
#include "workloads.h"

namespace sci::bench {
namespace {

constexpr size_t kPages = 169;
constexpr size_t kPageBytes = kPageSize * sizeof(uint32_t);

const std::vector<uint32_t>& Tokens() {
  static const std::vector<uint32_t> tokens = PromptTokens(42, kPages);
  return tokens;
}

const PageDigest& ExpectedLastDigest() {
  static const PageDigest last = [] {
    PageHasher hasher(Tokens(), kPageSize, false);
    PageDigest d{};
    for (size_t i = 0; i < hasher.pages(); ++i) d = hasher.Next();
    return d;
  }();
  return last;
}

const uint8_t* PageBytes(size_t page) {
  return reinterpret_cast<const uint8_t*>(Tokens().data() + page * kPageSize);
}

void Report(benchmark::State& state, const PageDigest& last) {
  if (last != ExpectedLastDigest()) state.SkipWithError("digest differs from the library's");
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kPages));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * (kPages * (kPageBytes + 32) - 32)));
  state.counters["pages"] = kPages;
}

void BM_LowLevel(benchmark::State& state) {
  PageDigest digest{};
  for (auto _ : state) {
    for (size_t page = 0; page < kPages; ++page) {
      SHA256_CTX ctx;
      SHA256_Init(&ctx);
      if (page > 0) SHA256_Update(&ctx, digest.data(), digest.size());
      SHA256_Update(&ctx, PageBytes(page), kPageBytes);
      SHA256_Final(digest.data(), &ctx);
    }
    benchmark::DoNotOptimize(digest);
  }
  Report(state, digest);
}

void BM_EvpDigest(benchmark::State& state) {
  EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  PageDigest digest{};
  uint8_t message[32 + kPageBytes];
  for (auto _ : state) {
    for (size_t page = 0; page < kPages; ++page) {
      // One contiguous message: the parent digest, then the page's tokens.
      const size_t parent = page > 0 ? 32 : 0;
      std::memcpy(message, digest.data(), parent);
      std::memcpy(message + parent, PageBytes(page), kPageBytes);
      EVP_Digest(message, parent + kPageBytes, digest.data(), nullptr, md, nullptr);
    }
    benchmark::DoNotOptimize(digest);
  }
  EVP_MD_free(md);
  Report(state, digest);
}

void BM_EvpContextReused(benchmark::State& state) {
  EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  PageDigest digest{};
  for (auto _ : state) {
    for (size_t page = 0; page < kPages; ++page) {
      EVP_DigestInit_ex2(ctx, md, nullptr);
      if (page > 0) EVP_DigestUpdate(ctx, digest.data(), digest.size());
      EVP_DigestUpdate(ctx, PageBytes(page), kPageBytes);
      EVP_DigestFinal_ex(ctx, digest.data(), nullptr);
    }
    benchmark::DoNotOptimize(digest);
  }
  EVP_MD_CTX_free(ctx);
  EVP_MD_free(md);
  Report(state, digest);
}

void BM_OneShot(benchmark::State& state) {
  PageDigest digest{};
  uint8_t message[32 + kPageBytes];
  for (auto _ : state) {
    for (size_t page = 0; page < kPages; ++page) {
      const size_t parent = page > 0 ? 32 : 0;
      std::memcpy(message, digest.data(), parent);
      std::memcpy(message + parent, PageBytes(page), kPageBytes);
      SHA256(message, parent + kPageBytes, digest.data());
    }
    benchmark::DoNotOptimize(digest);
  }
  Report(state, digest);
}

enum class Memo { kNone, kFresh, kRepeated };

void BM_PageHasher(benchmark::State& state, Memo mode) {
  PageDigestMemo memo;
  PageDigestMemo* use = mode == Memo::kNone ? nullptr : &memo;
  PageDigest digest{};
  for (int sight = 0; sight < 2; ++sight) {  // memoised on the second
    PageHasher warm(Tokens(), kPageSize, false, use);
    for (size_t page = 0; page < kPages; ++page) warm.Next();
  }
  for (auto _ : state) {
    if (mode == Memo::kFresh) memo.Clear();
    PageHasher hasher(Tokens(), kPageSize, false, use);
    for (size_t page = 0; page < kPages; ++page) digest = hasher.Next();
    benchmark::DoNotOptimize(digest);
  }
  Report(state, digest);
  if (use != nullptr) {
    const double lookups = static_cast<double>(memo.hits() + memo.misses());
    state.counters["memo_hit_rate"] = lookups > 0 ? static_cast<double>(memo.hits()) / lookups : 0;
  }
}

BENCHMARK(BM_LowLevel)->Name("sha256/lowlevel/p169")->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EvpDigest)->Name("sha256/evp_digest/p169")->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EvpContextReused)->Name("sha256/evp_ctx_reused/p169")->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_OneShot)->Name("sha256/oneshot/p169")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_PageHasher, none, Memo::kNone)
    ->Name("page_hasher/p169/memo:none")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_PageHasher, fresh, Memo::kFresh)
    ->Name("page_hasher/p169/memo:fresh")->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_PageHasher, repeated, Memo::kRepeated)
    ->Name("page_hasher/p169/memo:repeated")->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace sci::bench
