// vLLM block hashing alone (HashBlock, the router's cost per block of a
// vLLM prompt): a 4096-token prompt of a 151936-token vocabulary (Qwen2's,
// so ids take 1-, 2- and 4-byte pickle ints alike) hashed as one chain of
// 16- or 64-token blocks, with a LoRA name on every block and a cache salt
// on block 0, under each algorithm. "block" is the time per block.
// The chain must end on HashChain's digest, or it reports an error.
// Beside it, the floor: SHA-256 alone (low-level calls) over the same
// blocks' bytes, encoded beforehand.
#include <benchmark/benchmark.h>

#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "vllm/block_hash.h"
#include "workloads.h"

namespace sci::bench {
namespace {

constexpr size_t kPromptTokens = 4096;

const std::vector<uint32_t>& Tokens() {
  static const std::vector<uint32_t> tokens = [] {
    std::vector<uint32_t> t(kPromptTokens);
    for (size_t j = 0; j < t.size(); ++j) {
      t[j] = static_cast<uint32_t>(SplitMix64(7 * 0x9E3779B97F4A7C15ull + j) % 151936);
    }
    return t;
  }();
  return tokens;
}

void BM_HashBlock(benchmark::State& state, vllm::HashAlgorithm algorithm) {
  const size_t block_size = static_cast<size_t>(state.range(0));
  const std::span<const uint32_t> tokens = Tokens();
  const vllm::RequestExtras extras{true, "adapter-A", true, "tenant-salt"};
  const size_t blocks = tokens.size() / block_size;
  const vllm::BlockDigest none_hash = vllm::NoneHash(algorithm, "0");
  vllm::BlockDigest last{};
  for (auto _ : state) {
    vllm::BlockDigest parent = none_hash;
    for (size_t i = 0; i < blocks; ++i) {
      parent = vllm::HashBlock(algorithm, parent, tokens.subspan(i * block_size, block_size), extras, i);
    }
    benchmark::DoNotOptimize(parent);
    last = parent;
  }
  if (last != vllm::HashChain(algorithm, "0", tokens, static_cast<uint32_t>(block_size), extras).back()) {
    state.SkipWithError("digest differs from HashChain's");
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * blocks));
  state.counters["block"] =
      benchmark::Counter(static_cast<double>(blocks), benchmark::Counter::kIsIterationInvariantRate |
                                                          benchmark::Counter::kInvert);
}

void BM_Sha256Floor(benchmark::State& state, vllm::HashAlgorithm algorithm) {
  const size_t block_size = static_cast<size_t>(state.range(0));
  const std::span<const uint32_t> tokens = Tokens();
  const vllm::RequestExtras extras{true, "adapter-A", true, "tenant-salt"};
  const std::vector<vllm::BlockDigest> chain =
      vllm::HashChain(algorithm, "0", tokens, static_cast<uint32_t>(block_size), extras);
  std::vector<std::string> encoded;
  vllm::BlockDigest parent = vllm::NoneHash(algorithm, "0");
  for (size_t i = 0; i < chain.size(); ++i) {
    encoded.push_back(vllm::EncodeBlock(algorithm, parent, tokens.subspan(i * block_size, block_size), extras, i));
    parent = chain[i];
  }
  size_t bytes = 0;
  for (const std::string& e : encoded) bytes += e.size();
  vllm::BlockDigest digest{};
  for (auto _ : state) {
    for (const std::string& e : encoded) {
      SHA256_CTX ctx;
      SHA256_Init(&ctx);
      SHA256_Update(&ctx, e.data(), e.size());
      SHA256_Final(digest.data(), &ctx);
    }
    benchmark::DoNotOptimize(digest);
  }
  if (digest != chain.back()) state.SkipWithError("digest differs from HashChain's");
  state.counters["block"] = benchmark::Counter(static_cast<double>(chain.size()),
                                               benchmark::Counter::kIsIterationInvariantRate |
                                                   benchmark::Counter::kInvert);
  state.counters["bytes/block"] = static_cast<double>(bytes) / static_cast<double>(chain.size());
}

BENCHMARK_CAPTURE(BM_HashBlock, sha256, vllm::HashAlgorithm::kSha256)
    ->Name("vllm_hash/sha256/block")->Arg(16)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_HashBlock, sha256_cbor, vllm::HashAlgorithm::kSha256Cbor)
    ->Name("vllm_hash/sha256_cbor/block")->Arg(16)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Sha256Floor, sha256, vllm::HashAlgorithm::kSha256)
    ->Name("vllm_hash/sha256/floor")->Arg(16)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Sha256Floor, sha256_cbor, vllm::HashAlgorithm::kSha256Cbor)
    ->Name("vllm_hash/sha256_cbor/floor")->Arg(16)->Arg(64)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace sci::bench
