// Queries made while a thread exits: from the destructor of a caller's
// thread_local made before the thread's first query (a router's per-thread
// client that asks once more as it goes). Thread_locals are destroyed in
// the reverse order of their construction, so the library's per-thread
// state (slot plans, digest memo, vLLM scratch) is freed before that
// destructor runs; a review's reproducer aborted in glibc. Each such query
// answers as any other (common/thread_owned.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "index/index.h"
#include "query/digest.h"
#include "sglang/layout.h"
#include "sglang/page_hash.h"
#include "sglang/page_query.h"
#include "vllm/block_hash.h"
#include "vllm/chunk_query.h"
#include "vllm/layout.h"

namespace sci {
namespace {

constexpr uint32_t kPageSize = 4;

// An SGLang index holding a 2-page prompt, and a vLLM index holding a
// 3-chunk one.
struct Pools {
  Index sglang{SGLangIndexOptions()};
  std::unique_ptr<const Layout> layout;
  std::vector<uint32_t> tokens;
  std::vector<std::string> hashes;

  Index vllm_index{vllm::VllmIndexOptions()};
  std::unique_ptr<const vllm::Layout> vllm_layout;
  std::vector<uint32_t> vllm_tokens;

  Pools() {
    LayoutSpec spec;
    spec.page_size = kPageSize;
    spec.tp_size = 2;
    std::string error;
    layout = Layout::Create(spec, &error);
    tokens.resize(2 * kPageSize);
    std::iota(tokens.begin(), tokens.end(), 7u);
    hashes = PageHashesHex(tokens, kPageSize, false);
    std::vector<Event> events;
    std::vector<std::string> keys;
    for (size_t page = 0; page < 2; ++page) {
      for (std::string& key : layout->KeysFor(hashes[page], page, 2)) keys.push_back(std::move(key));
    }
    for (const std::string& key : keys) events.push_back(Event{EventKind::kStored, key, {}, {}, "cpu"});
    sglang.ApplyBatch(1, events);

    vllm::LayoutSpec vspec;
    vspec.main_event_block_size = 16;
    vllm::GroupSpec full;
    full.kind = vllm::GroupKind::kFullAttention;
    full.block_size = full.hash_block_size = 16;
    full.key_prefixes = {"p@M@tp_rank:0@group:0"};
    vspec.groups = {full};
    vllm_layout = vllm::Layout::Create(vspec, &error);
    vllm_tokens.resize(3 * 16);
    std::iota(vllm_tokens.begin(), vllm_tokens.end(), 300u);
    std::vector<std::string> vkeys;
    for (const vllm::BlockDigest& digest : vllm::HashChain(vllm::HashAlgorithm::kSha256, "0", vllm_tokens, 16, {})) {
      std::string hex(kPageHashHexLength, '\0');
      ToHex(digest, hex.data());
      for (std::string& key : vllm_layout->KeysFor(0, hex)) vkeys.push_back(std::move(key));
    }
    events.clear();
    for (const std::string& key : vkeys) events.push_back(Event{EventKind::kStored, key, {}, {}, "cpu"});
    vllm_index.ApplyBatch(1, events);
  }

  // Hits of every query kind, summed (11 when all answer right: the vLLM
  // prefix stops short of the chunk holding the prompt's last token).
  size_t AskEverything() {
    std::vector<uint8_t> hits(3);
    size_t total = CheckPages(sglang, *layout, tokens, kPageSize, hits).total_hits;
    total += CheckPrefix(sglang, *layout, tokens, kPageSize).prefix_hits;
    total += CheckPageHashes(
                 sglang, *layout, 2, [this](size_t page) -> std::string_view { return hashes[page]; }, hits)
                 .total_hits;
    total += vllm::CheckBlocks(vllm_index, *vllm_layout, vllm::ChainSource::Tokens(vllm_tokens), 16, hits).total_hits;
    total += vllm::CheckPrefix(vllm_index, *vllm_layout, vllm::ChainSource::Tokens(vllm_tokens), 16).prefix_hits;
    return total;
  }
};
constexpr size_t kAllHits = 2 + 2 + 2 + 3 + 2;

Pools* g_pools = nullptr;

struct PerThreadClient {
  size_t* answered_at_exit = nullptr;
  ~PerThreadClient() {
    if (answered_at_exit != nullptr) *answered_at_exit = g_pools->AskEverything();
  }
};

TEST(ThreadExit, QueriesFromACallersThreadLocalDestructorAnswerRight) {
  Pools pools;
  g_pools = &pools;
  size_t at_exit = 0;
  std::thread([&at_exit] {
    thread_local PerThreadClient client;  // made before the thread's first query
    client.answered_at_exit = &at_exit;
    EXPECT_EQ(g_pools->AskEverything(), kAllHits);
  }).join();
  EXPECT_EQ(at_exit, kAllHits);
  g_pools = nullptr;
}

// A thread_local made after the thread's first query is destroyed before
// the library's state: its queries find that state still there.
TEST(ThreadExit, QueriesFromAThreadLocalMadeAfterTheFirstQueryAnswerRight) {
  Pools pools;
  g_pools = &pools;
  size_t at_exit = 0;
  std::thread([&at_exit] {
    EXPECT_EQ(g_pools->AskEverything(), kAllHits);
    thread_local PerThreadClient client;
    client.answered_at_exit = &at_exit;
  }).join();
  EXPECT_EQ(at_exit, kAllHits);
  g_pools = nullptr;
}

}  // namespace
}  // namespace sci
