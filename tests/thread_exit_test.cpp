// Queries nested six deep, alternating families (from an outside review),
// and queries made while a thread exits: from the destructor of a caller's
// thread_local made before or after the thread's first query (a router's
// per-thread client that asks once more as it goes), or from a pthread
// key's destructor. When the library's per-thread state (slot plans,
// digest memo, vLLM scratch) was a plain thread_local, it was freed before
// the first kind ran (a review's reproducer aborted in glibc) and never
// freed after the last (a second review: 540 KB a thread). Each such query
// answers as any other, and its state is freed with the thread
// (common/thread_owned.h, docs/architecture.md I59).
#include <gtest/gtest.h>

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "common/thread_owned.h"
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
// the library's reaper runs: its queries find that state still there.
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

// Counts its live instances: whether ThreadOwned freed what it made. One
// type per test (ThreadOwned keeps one object, and one key, per type).
template <int kTag>
struct Counted {
  static inline std::atomic<int> live{0};
  static inline std::atomic<int> found_while_dying{0};
  Counted() { ++live; }
  ~Counted() {
    // A call from the object's own destructor finds it gone, not dying.
    if (ThreadOwned<Counted>::Get() != nullptr) ++found_while_dying;
    --live;
  }
};

// A router's per-thread client kept under a pthread key rather than in a
// thread_local: glibc runs key destructors after every thread_local
// destructor, so the reaper a thread_local registers from one never runs.
// ThreadOwned's own key frees the state instead.
TEST(ThreadExit, StateMadeByAFirstCallFromAPthreadKeyDestructorIsFreed) {
  using C = Counted<1>;
  pthread_key_t client;
  ASSERT_EQ(pthread_key_create(&client,
                               [](void*) {
                                 EXPECT_NE(ThreadOwned<C>::Get(), nullptr);
                                 EXPECT_NE(ThreadOwned<C>::Peek(), nullptr);
                               }),
            0);
  std::thread([&client] { ASSERT_EQ(pthread_setspecific(client, &client), 0); }).join();
  EXPECT_EQ(C::live, 0) << "the thread's T outlived it";
  // And on a thread whose first call is an ordinary one.
  std::thread([] { EXPECT_NE(ThreadOwned<C>::Get(), nullptr); }).join();
  EXPECT_EQ(C::live, 0);
  EXPECT_EQ(C::found_while_dying, 0);
  pthread_key_delete(client);
}

// With every pthread key of the process taken, the thread_local reaper
// alone frees the thread's state.
TEST(ThreadExit, StateIsFreedWhenNoPthreadKeyIsLeft) {
  using C = Counted<2>;
  std::vector<pthread_key_t> taken;
  pthread_key_t key;
  while (pthread_key_create(&key, nullptr) == 0) taken.push_back(key);
  ASSERT_FALSE(taken.empty());
  std::thread([] { EXPECT_NE(ThreadOwned<C>::Get(), nullptr); }).join();  // its key is not made
  for (pthread_key_t k : taken) pthread_key_delete(k);
  EXPECT_EQ(C::live, 0) << "the thread's T outlived it";
  std::thread([] { EXPECT_NE(ThreadOwned<C>::Get(), nullptr); }).join();
  EXPECT_EQ(C::live, 0);
  EXPECT_EQ(C::found_while_dying, 0);
}

// The library's own state made by every query kind from a pthread-key
// destructor: each answers right. Under ASan (scripts/test-sanitizers.sh),
// LeakSanitizer fails the run if that state is not freed (534 KB with the
// reaper alone; glibc's record of the reaper that never runs is
// suppressed in tests/lsan.supp).
TEST(ThreadExit, QueriesFromAPthreadKeyDestructorAnswerRight) {
  Pools pools;
  g_pools = &pools;
  static size_t at_exit = 0;
  at_exit = 0;
  pthread_key_t client;
  ASSERT_EQ(pthread_key_create(&client, [](void*) { at_exit = g_pools->AskEverything(); }), 0);
  std::thread([&client] { ASSERT_EQ(pthread_setspecific(client, &client), 0); }).join();
  EXPECT_EQ(at_exit, kAllHits);
  pthread_key_delete(client);
  g_pools = nullptr;
}

// Queries nested six deep through the test hooks, SGLang and vLLM in turn,
// each level asking a request nobody stored (other tokens), the stored one
// and its prefix; the first hook of each query nests the next level. Each
// level's answers are summed into one number: 100 x the request nobody
// stored (vLLM 0 chunks; SGLang 1 page, whose second page differs) + the
// stored one + 10 x the prefix.
struct Level {
  int depth = 0;
  bool nested = false;  // this query's first hook already nested the next level
  std::vector<size_t>* answers = nullptr;
};
void AskAt(int depth, std::vector<size_t>* answers);
void NestNext(void* user) {
  auto* level = static_cast<Level*>(user);
  if (level->nested || level->depth >= 6) return;
  level->nested = true;
  AskAt(level->depth + 1, level->answers);
}
void AskAt(int depth, std::vector<size_t>* answers) {
  Pools& pools = *g_pools;
  Level level{depth, false, answers};
  vllm::ChunkQueryHooks chunk_hooks;
  chunk_hooks.user = &level;
  chunk_hooks.before_chunk_keys = [](void* user, size_t, size_t) { NestNext(user); };
  PageQueryHooks page_hooks;
  page_hooks.user = &level;
  page_hooks.after_group_probe = [](void* user, size_t) { NestNext(user); };
  std::vector<uint8_t> hits(3);
  size_t answer = 0;
  if (depth % 2 == 0) {
    std::vector<uint32_t> other(pools.vllm_tokens.size());
    std::iota(other.begin(), other.end(), 90000u + static_cast<uint32_t>(depth) * 100);
    answer += 100 * vllm::CheckBlocks(pools.vllm_index, *pools.vllm_layout, vllm::ChainSource::Tokens(other), 16, hits,
                                      &chunk_hooks)
                        .total_hits;
    level.nested = false;
    answer += vllm::CheckBlocks(pools.vllm_index, *pools.vllm_layout, vllm::ChainSource::Tokens(pools.vllm_tokens), 16,
                                hits, &chunk_hooks)
                  .total_hits;
    level.nested = false;
    answer += 10 * vllm::CheckPrefix(pools.vllm_index, *pools.vllm_layout,
                                     vllm::ChainSource::Tokens(pools.vllm_tokens), 16, &chunk_hooks)
                       .prefix_hits;
  } else {
    std::vector<uint32_t> half = pools.tokens;
    half[kPageSize + 1] += 1000;  // page 1 differs
    answer += 100 * CheckPages(pools.sglang, *pools.layout, half, kPageSize, hits, &page_hooks).total_hits;
    level.nested = false;
    answer += CheckPages(pools.sglang, *pools.layout, pools.tokens, kPageSize, hits, &page_hooks).total_hits;
    level.nested = false;
    answer += 10 * CheckPrefix(pools.sglang, *pools.layout, pools.tokens, kPageSize, &page_hooks).prefix_hits;
  }
  (*answers)[static_cast<size_t>(depth)] = answer;
}
const std::vector<size_t> kEveryLevelRight = {23, 122, 23, 122, 23, 122, 23};

struct NestsAtExit {
  std::vector<size_t>* answers = nullptr;
  ~NestsAtExit() {
    if (answers != nullptr) AskAt(0, answers);
  }
};

TEST(NestedQueries, SixDeepAlternatingFamiliesAnswerAsAlone) {
  Pools pools;
  g_pools = &pools;
  std::vector<size_t> answers(7, 0);
  AskAt(0, &answers);
  EXPECT_EQ(answers, kEveryLevelRight);
  std::vector<size_t> at_exit(7, 0);
  std::thread([&at_exit] {
    thread_local NestsAtExit client;  // made before the thread's first query
    client.answers = &at_exit;
    std::vector<size_t> warm(7, 0);
    AskAt(0, &warm);
    EXPECT_EQ(warm, kEveryLevelRight);
  }).join();
  EXPECT_EQ(at_exit, kEveryLevelRight) << "nested as the thread exits";
  g_pools = nullptr;
}

}  // namespace
}  // namespace sci
