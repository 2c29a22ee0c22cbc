// The vLLM queries allocate nothing once warm: this binary counts global
// operator new, warms each entry point up on the longest request, then
// asserts that repeated queries -- by tokens (hits, misses, extras, the
// memo), by digests, by event hashes, per block and by prefix, through the
// C ABI and the C++ core -- allocate nothing at all.
#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <string>
#include <vector>

#include "index/index.h"
#include "query/digest.h"
#include "shared_cache_index.h"
#include "vllm/block_hash.h"
#include "vllm/chunk_query.h"
#include "vllm/layout.h"

#include "replaced_operator_new.h"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* sci_test::AllocateForTest(std::size_t size, std::size_t alignment) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return HeapAllocate(size, alignment);
}

namespace sci::vllm {
namespace {

constexpr size_t kTokens = 2049;
constexpr int kRounds = 10;

LayoutSpec Hybrid() {
  LayoutSpec spec;
  spec.main_event_block_size = 16;
  GroupSpec full, mamba;
  full.kind = GroupKind::kFullAttention;
  full.block_size = full.hash_block_size = 16;
  full.key_prefixes = {"p@M@tp_rank:0@group:0", "p@M@tp_rank:1@group:0"};
  mamba.kind = GroupKind::kMamba;
  mamba.block_size = 64;
  mamba.hash_block_size = 16;
  mamba.key_prefixes = {"p@M@tp_rank:0@group:1", "p@M@tp_rank:1@group:1"};
  spec.groups = {full, mamba};
  return spec;
}

TEST(VllmQueryAllocation, WarmQueriesAllocateNothing) {
  std::string error;
  const auto layout = Layout::Create(Hybrid(), &error);
  ASSERT_NE(layout, nullptr) << error;
  Index index(VllmIndexOptions());
  std::vector<uint32_t> stored(kTokens), other(kTokens);
  std::iota(stored.begin(), stored.end(), 1000u);
  std::iota(other.begin(), other.end(), 50000u);
  // Every chunk of both groups of `stored`, but the full-attention chunk 100.
  const std::vector<BlockDigest> chain = HashChain(HashAlgorithm::kSha256, "0", stored, 16);
  std::vector<std::string> keys;
  for (size_t g = 0; g < 2; ++g) {
    const size_t per_chunk = layout->groups()[g].block_size / 16;
    for (size_t chunk = 0; (chunk + 1) * per_chunk <= chain.size(); ++chunk) {
      if (g == 0 && chunk == 100) continue;
      std::string hex(kPageHashHexLength, '\0');
      ToHex(chain[(chunk + 1) * per_chunk - 1], hex.data());
      for (std::string& key : layout->KeysFor(g, hex)) keys.push_back(std::move(key));
    }
  }
  std::vector<Event> events;
  for (const std::string& key : keys) events.push_back(Event{EventKind::kStored, key, {}, {}, "cpu"});
  index.ApplyBatch(1, events);
  std::vector<uint8_t> digests;
  std::vector<uint64_t> event_hashes;
  for (const BlockDigest& digest : chain) {
    digests.insert(digests.end(), digest.begin(), digest.end());
    event_hashes.push_back(EventHashOf(digest));
  }
  RequestExtras lora;
  lora.has_lora = true;
  lora.lora_name = "adapter";
  std::vector<uint8_t> hits(kTokens / 16);

  const auto run_all = [&] {
    size_t answers = 0;
    for (const std::vector<uint32_t>* tokens : {&stored, &other}) {
      answers += CheckPrefix(index, *layout, ChainSource::Tokens(*tokens), 16).prefix_hits;
      answers += CheckPrefix(index, *layout, ChainSource::Tokens(*tokens, lora), 16).prefix_hits;
      answers += CheckBlocks(index, *layout, ChainSource::Tokens(*tokens), 16, hits).total_hits;
    }
    answers += CheckPrefix(index, *layout, ChainSource::Digests(digests.data(), chain.size(), kTokens), 16).prefix_hits;
    answers += CheckPrefix(index, *layout, ChainSource::EventHashes(event_hashes, kTokens), 16).prefix_hits;
    return answers;
  };
  const size_t warm = run_all();  // scratch, memo and thread state grow here
  run_all();                      // the memo has seen the prompts: its look-up mode
  const long before = g_allocations.load();
  for (int round = 0; round < kRounds; ++round) EXPECT_EQ(run_all(), warm);
  EXPECT_EQ(g_allocations.load() - before, 0);
  // The answers are what the chunks say: the prefix stops before chunk 100
  // (tokens 1600..1615), at the Mamba state of token 1600 (25 x 64).
  EXPECT_EQ(CheckPrefix(index, *layout, ChainSource::Tokens(stored), 16).prefix_hits, 1600u / 16);
}

}  // namespace
}  // namespace sci::vllm
