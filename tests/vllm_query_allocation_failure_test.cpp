// Issue #34, R5: an allocation that fails inside a vLLM query costs that
// query (std::bad_alloc; SCI_ERR_NO_MEMORY through the C API), never a
// later one. This binary replaces the global operator new with one that
// fails the N-th allocation made while it is armed, and for every N a
// query sequence reaches: in a fresh thread (fresh thread-local scratch and
// digest memo, so the growth paths run), the sequence -- by tokens with and
// without extras, per block and by prefix, by digests, by event hashes --
// runs armed, each query allowed to fail; then, disarmed, the sequence runs
// again and every answer must be the one a thread that never failed gives.
// 1.2 grew the chain's digests and their known flags in two resizes: with
// the second one failed, the next query of that length wrote past the
// flags (SIGSEGV here, a heap-buffer-overflow under ASan).
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "index/index.h"
#include "query/digest.h"
#include "vllm/block_hash.h"
#include "vllm/chunk_query.h"
#include "vllm/layout.h"

#include "replaced_operator_new.h"

namespace {
thread_local bool g_arming = false;  // this thread's queries run armed
thread_local bool g_armed = false;   // a query is running armed: its allocations are counted
thread_local long g_fail_at = 0;    // the armed allocation that fails (1-based)
thread_local long g_allocations = 0;
thread_local bool g_failed = false;
}  // namespace

void* sci_test::AllocateForTest(std::size_t size, std::size_t alignment) {
  if (g_armed && ++g_allocations == g_fail_at) {
    g_failed = true;
    return nullptr;
  }
  return HeapAllocate(size, alignment);
}

namespace sci::vllm {
namespace {

constexpr size_t kTokens = 1025;

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

struct Fixture {
  Fixture() : index(VllmIndexOptions()) {
    std::string error;
    layout = Layout::Create(Hybrid(), &error);
    EXPECT_NE(layout, nullptr) << error;
    stored.resize(kTokens);
    std::iota(stored.begin(), stored.end(), 1000u);
    lora.has_lora = true;
    lora.lora_name = "adapter";
    // Every chunk of both groups of `stored` (and of it with the LoRA), but
    // the full-attention chunk 40.
    std::vector<Event> events;
    for (const RequestExtras& extras : {RequestExtras{}, lora}) {
      const std::vector<BlockDigest> chain = HashChain(HashAlgorithm::kSha256, "0", stored, 16, extras);
      for (size_t g = 0; g < 2; ++g) {
        const size_t per_chunk = layout->groups()[g].block_size / 16;
        for (size_t chunk = 0; (chunk + 1) * per_chunk <= chain.size(); ++chunk) {
          if (g == 0 && chunk == 40) continue;
          std::string hex(kPageHashHexLength, '\0');
          ToHex(chain[(chunk + 1) * per_chunk - 1], hex.data());
          for (std::string& key : layout->KeysFor(g, hex)) keys.push_back(std::move(key));
        }
      }
      if (!extras.has_lora) {
        for (const BlockDigest& digest : chain) {
          digests.insert(digests.end(), digest.begin(), digest.end());
          event_hashes.push_back(EventHashOf(digest));
        }
      }
    }
    for (const std::string& key : keys) events.push_back(Event{EventKind::kStored, key, {}, {}, "cpu"});
    index.ApplyBatch(1, events);
  }

  // Every answer of the sequence, in order; a query that throws bad_alloc
  // answers SIZE_MAX (allowed only while armed).
  std::vector<size_t> RunSequence() {
    std::vector<size_t> answers;
    std::vector<uint8_t> hits(kTokens / 16);
    answers.reserve(32);
    // Only the query runs armed (the test's own vectors do not).
    const auto run = [&](auto query) {
      size_t answer = SIZE_MAX;
      g_armed = g_arming;
      try {
        answer = query();
      } catch (const std::bad_alloc&) {
      }
      g_armed = false;
      answers.push_back(answer);
    };
    const size_t n_blocks = digests.size() / 32;
    for (int repeat = 0; repeat < 3; ++repeat) {  // the memo's first, second and third sight
      run([&] { return CheckPrefix(index, *layout, ChainSource::Tokens(stored), 16).prefix_hits; });
      run([&] { return CheckBlocks(index, *layout, ChainSource::Tokens(stored), 16, hits).total_hits; });
      run([&] { return CheckPrefix(index, *layout, ChainSource::Tokens(stored, lora), 16).prefix_hits; });
      run([&] { return CheckBlocks(index, *layout, ChainSource::Tokens(stored, lora), 16, hits).total_hits; });
      run([&] {
        return CheckPrefix(index, *layout, ChainSource::Digests(digests.data(), n_blocks, kTokens), 16).prefix_hits;
      });
      run([&] { return CheckPrefix(index, *layout, ChainSource::EventHashes(event_hashes, kTokens), 16).prefix_hits; });
    }
    // A shorter request, then the long one again: scratch already grown.
    const std::vector<uint32_t> head(stored.begin(), stored.begin() + 200);
    run([&] { return CheckPrefix(index, *layout, ChainSource::Tokens(head), 16).prefix_hits; });
    run([&] { return CheckBlocks(index, *layout, ChainSource::Tokens(stored), 16, hits).total_hits; });
    return answers;
  }

  Index index;
  std::unique_ptr<const Layout> layout;
  std::vector<uint32_t> stored;
  RequestExtras lora;
  std::vector<std::string> keys;
  std::vector<uint8_t> digests;
  std::vector<uint64_t> event_hashes;
};

TEST(VllmQueryAllocationFailure, AFailedAllocationCostsOnlyItsOwnQuery) {
  Fixture fixture;
  std::vector<size_t> expected;
  std::thread([&] { expected = fixture.RunSequence(); }).join();
  ASSERT_EQ(expected[0], 40u);  // the prefix stops before chunk 40 (tokens 640..655), on a Mamba boundary
  for (size_t answer : expected) ASSERT_NE(answer, SIZE_MAX);

  long reached = 0;
  for (long n = 1;; ++n) {
    bool failed = false;
    std::vector<size_t> armed, after;
    std::thread([&] {
      g_fail_at = n;
      g_allocations = 0;
      g_failed = false;
      g_arming = true;
      armed = fixture.RunSequence();
      g_arming = false;
      failed = g_failed;
      after = fixture.RunSequence();
    }).join();
    SCOPED_TRACE("allocation " + std::to_string(n) + " failed");
    ASSERT_EQ(armed.size(), expected.size());
    for (size_t i = 0; i < armed.size(); ++i) {
      // A query either fails whole or answers right: never a hit it should not.
      if (armed[i] != SIZE_MAX) EXPECT_EQ(armed[i], expected[i]) << "query " << i << " while armed";
    }
    EXPECT_EQ(after, expected) << "a query after the failure answered wrong";
    if (!failed) break;
    reached = n;
    if (n > 10000) FAIL() << "the sequence never completed";
  }
  // The chain's scratch, the rest of the scratch and the memo, at least.
  EXPECT_GE(reached, 3);
  std::printf("vLLM query sequence: %ld allocation sites failed in turn\n", reached);
}

}  // namespace
}  // namespace sci::vllm
