// Readers run vLLM chunk queries (CheckPrefix, CheckBlocks; by tokens,
// digests and event hashes) while one writer stores and removes chunks'
// keys (index-semantics.md, "A page hit is one instant"; chunk_query.h: a
// chunk's keys are read under one hold).
//
// Each prompt has poisoned chunks whose keys are never all present at once:
// the writer rotates which one key is missing ("remove k(i+1), then store
// k(i)": at least one is absent at every instant), so any hit that needs a
// poisoned chunk is a false hit. Around them the writer makes other chunks
// appear and disappear key by key (hits the readers may legitimately see),
// under a stable run of full-attention chunks that gives the readers real
// hits. Layouts: TP 2 and TP 8, full attention only and hybrid (full
// attention 16 + Mamba 64, where the poisoned Mamba chunk must never make
// its prefix a hit). Each case runs for a bounded time.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "index/index.h"
#include "query/digest.h"
#include "vllm/block_hash.h"
#include "vllm/chunk_query.h"
#include "vllm/layout.h"

namespace sci::vllm {
namespace {

constexpr uint32_t kBlock = 16;
constexpr size_t kTokens = 1024 + 1;        // 64 full-attention chunks, 16 Mamba chunks, all creditable
constexpr size_t kFullChunks = kTokens / 16;
constexpr size_t kMambaChunks = kTokens / 64;
constexpr int kReaders = 2;
constexpr auto kDuration = std::chrono::milliseconds(1800);

struct Case {
  const char* name;
  int tp;
  bool hybrid;
};

// GoogleTest names a failing case by this, not by its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::string Hex(const BlockDigest& digest) {
  std::string hex(kPageHashHexLength, '\0');
  ToHex(digest, hex.data());
  return hex;
}

std::unique_ptr<const Layout> MakeLayout(const Case& c) {
  LayoutSpec spec;
  spec.main_event_block_size = kBlock;
  for (int g = 0; g < (c.hybrid ? 2 : 1); ++g) {
    GroupSpec group;
    group.kind = g == 0 ? GroupKind::kFullAttention : GroupKind::kMamba;
    group.block_size = g == 0 ? 16 : 64;
    group.hash_block_size = 16;
    for (int rank = 0; rank < c.tp; ++rank) {
      group.key_prefixes.push_back("prod@M@tp_rank:" + std::to_string(rank) + "@pcp0@dcp0@pp_rank:0@group:" +
                                   std::to_string(g));
    }
    spec.groups.push_back(group);
  }
  if (c.hybrid) spec.lcm_block_size = 64;
  std::string error;
  auto layout = Layout::Create(spec, &error);
  EXPECT_NE(layout, nullptr) << error;
  return layout;
}

// One prompt: its chain, and the chunks the writer never lets be whole.
struct Prompt {
  std::vector<uint32_t> tokens;
  std::vector<BlockDigest> chain;
  std::vector<uint8_t> digest_bytes;
  std::vector<uint64_t> event_hashes;
  size_t poisoned_full = 0;   // full-attention chunk; chunks below it stay present
  std::vector<size_t> poisoned_full_after;  // more poisoned full-attention chunks, past it
  size_t poisoned_mamba = 0;  // Mamba chunk (hybrid)

  bool FullPoisoned(size_t chunk) const {
    if (chunk == poisoned_full) return true;
    for (size_t c : poisoned_full_after) {
      if (c == chunk) return true;
    }
    return false;
  }
};

std::vector<Prompt> MakePrompts() {
  std::mt19937_64 rng(42);
  // Early poisons are read by most prefix walks; late ones leave long runs of hits.
  const size_t full[] = {3, 20, 40, 62};
  // Reachable ((m + 1) * 64 <= full * 16) for all but the first prompt.
  const size_t mamba[] = {0, 3, 5, 8};
  std::vector<Prompt> prompts;
  for (size_t p = 0; p < 4; ++p) {
    Prompt prompt;
    prompt.tokens.resize(kTokens);
    for (uint32_t& token : prompt.tokens) token = static_cast<uint32_t>(rng() % 100000);
    prompt.chain = HashChain(HashAlgorithm::kSha256, "0", prompt.tokens, 16);
    for (const BlockDigest& digest : prompt.chain) {
      prompt.digest_bytes.insert(prompt.digest_bytes.end(), digest.begin(), digest.end());
      prompt.event_hashes.push_back(EventHashOf(digest));
    }
    prompt.poisoned_full = full[p];
    for (size_t c = full[p] + 3; c < kFullChunks; c += 5) prompt.poisoned_full_after.push_back(c);
    prompt.poisoned_mamba = mamba[p];
    prompts.push_back(std::move(prompt));
  }
  return prompts;
}

// The writer: one sequence, one batch at a time.
class Writer {
 public:
  Writer(Index& index, const Layout& layout) : index_(index), layout_(layout) {}

  std::vector<std::string> Keys(const Prompt& prompt, size_t g, size_t chunk) const {
    const size_t per_chunk = layout_.groups()[g].block_size / 16;
    return layout_.KeysFor(g, Hex(prompt.chain[(chunk + 1) * per_chunk - 1]));
  }
  void Apply(std::vector<Event> events) { index_.ApplyBatch(++sequence_, events); }
  void Store(const std::string& key) { Apply({Event{EventKind::kStored, key, "0", {}, "cpu"}}); }
  void Remove(const std::string& key) { Apply({Event{EventKind::kRemoved, key, "0", {}, "cpu"}}); }

 private:
  Index& index_;
  const Layout& layout_;
  uint64_t sequence_ = 0;
};

// A poisoned chunk: every key but `missing` present; the writer rotates
// which one is missing, removing the next before storing the last.
struct Poison {
  std::vector<std::string> keys;
  bool hot = false;  // flipped on every round of the writer (others every 8th)
  size_t missing = 0;

  void Initialise(Writer& writer) {
    for (size_t k = 0; k < keys.size(); ++k) {
      if (k != missing) writer.Store(keys[k]);
    }
  }
  void Flip(Writer& writer, bool one_batch) {
    const size_t next = (missing + 1) % keys.size();
    if (one_batch) {  // removal first, within one batch
      writer.Apply({Event{EventKind::kRemoved, keys[next], "0", {}, "cpu"},
                    Event{EventKind::kStored, keys[missing], "0", {}, "cpu"}});
    } else {
      writer.Remove(keys[next]);
      writer.Store(keys[missing]);
    }
    missing = next;
  }
};

// A chunk that appears and disappears key by key.
struct Churn {
  size_t prompt = 0;
  size_t group = 0;
  std::vector<size_t> chunks;  // the group's chunks it cycles through
  size_t at = 0, key = 0;
  bool storing = true;

  void Step(Writer& writer, const Prompt& prompt) {
    const std::vector<std::string> keys = writer.Keys(prompt, group, chunks[at]);
    if (storing) {
      writer.Store(keys[key]);
    } else {
      writer.Remove(keys[key]);
    }
    if (++key == keys.size()) {
      key = 0;
      if (!storing) at = (at + 1) % chunks.size();
      storing = !storing;
    }
  }
};

class VllmConcurrency : public ::testing::TestWithParam<Case> {};

TEST_P(VllmConcurrency, NoReaderSeesAChunkWhoseKeysWereNeverAllPresent) {
  const Case c = GetParam();
  Index index(VllmIndexOptions());
  const auto layout = MakeLayout(c);
  ASSERT_NE(layout, nullptr);
  const std::vector<Prompt> prompts = MakePrompts();
  Writer writer(index, *layout);

  std::vector<Poison> poisons;
  std::vector<Churn> churns;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const Prompt& prompt = prompts[p];
    for (size_t chunk = 0; chunk < prompt.poisoned_full; ++chunk) {
      for (const std::string& key : writer.Keys(prompt, 0, chunk)) writer.Store(key);
    }
    poisons.push_back(Poison{writer.Keys(prompt, 0, prompt.poisoned_full), true});
    for (size_t chunk : prompt.poisoned_full_after) poisons.push_back(Poison{writer.Keys(prompt, 0, chunk)});
    Churn full{p, 0};
    for (size_t chunk = prompt.poisoned_full + 1; chunk < kFullChunks; ++chunk) {
      if (!prompt.FullPoisoned(chunk)) full.chunks.push_back(chunk);
    }
    churns.push_back(full);
    if (c.hybrid) {
      poisons.push_back(Poison{writer.Keys(prompt, 1, prompt.poisoned_mamba), true});
      // The Mamba chunk just below the poisoned one stays present: a prefix
      // ending there is a hit the walk reaches after trying the poisoned one.
      const size_t stable = prompt.poisoned_mamba == 0 ? kMambaChunks : prompt.poisoned_mamba - 1;
      if (stable < kMambaChunks) {
        for (const std::string& key : writer.Keys(prompt, 1, stable)) writer.Store(key);
      }
      Churn mamba{p, 1};
      for (size_t chunk = 0; chunk < kMambaChunks; ++chunk) {
        if (chunk != prompt.poisoned_mamba && chunk != stable) mamba.chunks.push_back(chunk);
      }
      churns.push_back(mamba);
    }
  }
  for (Poison& poison : poisons) poison.Initialise(writer);

  std::atomic<bool> done{false};
  std::atomic<long> false_hits{0}, hits{0}, prefix_hits{0}, queries{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&, r] {
      std::mt19937_64 rng(1000 + static_cast<uint64_t>(r));
      std::vector<uint8_t> block_hits(kTokens / kBlock);
      while (!done.load(std::memory_order_acquire)) {
        const Prompt& prompt = prompts[rng() % prompts.size()];
        const size_t n_tokens = rng() % 2 ? kTokens : 1 + rng() % kTokens;
        const size_t whole = n_tokens / 16;
        ChainSource source;
        switch (rng() % 3) {
          case 0: source = ChainSource::Tokens(std::span(prompt.tokens.data(), n_tokens)); break;
          case 1: source = ChainSource::Digests(prompt.digest_bytes.data(), whole, n_tokens); break;
          default: source = ChainSource::EventHashes(std::span(prompt.event_hashes.data(), whole), n_tokens); break;
        }
        if (rng() % 2) {
          const size_t answer = CheckPrefix(index, *layout, source, kBlock).prefix_hits;  // router blocks
          // Full attention: every chunk ending at or before the answer.
          bool wrong = answer > prompt.poisoned_full;
          // Mamba: the chunk ending exactly there.
          wrong = wrong || (c.hybrid && answer * kBlock == (prompt.poisoned_mamba + 1) * 64);
          if (wrong) false_hits.fetch_add(1);
          if (answer > 0) hits.fetch_add(1), prefix_hits.fetch_add(1);
        } else {
          const size_t n_blocks = n_tokens / kBlock;
          CheckBlocks(index, *layout, source, kBlock, std::span(block_hits.data(), n_blocks));
          for (size_t i = 0; i < n_blocks; ++i) {
            if (!block_hits[i]) continue;
            hits.fetch_add(1, std::memory_order_relaxed);
            if (prompt.FullPoisoned(i)) false_hits.fetch_add(1);
          }
        }
        queries.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }

  std::mt19937_64 rng(7);
  long flips = 0;
  const auto deadline = std::chrono::steady_clock::now() + kDuration;
  for (long round = 0; std::chrono::steady_clock::now() < deadline; ++round) {
    for (Poison& poison : poisons) {
      if (!poison.hot && round % 8 != 0) continue;
      poison.Flip(writer, rng() % 4 == 0);
      ++flips;
    }
    if (round % 8 == 0) {
      for (Churn& churn : churns) churn.Step(writer, prompts[churn.prompt]);
    }
  }
  done.store(true, std::memory_order_release);
  for (std::thread& t : readers) t.join();

  std::printf("%s: %ld queries, %ld hits (%ld prefixes), %ld flips\n", c.name, queries.load(), hits.load(),
              prefix_hits.load(), flips);
  EXPECT_EQ(false_hits.load(), 0);
  EXPECT_GT(hits.load(), 0) << "the readers saw the stable chunks";
  EXPECT_GT(prefix_hits.load(), 0) << "prefix answers (hybrid: a Mamba chunk present at the end)";
  EXPECT_GT(queries.load(), 10);
  EXPECT_GT(flips, 100);
  // Quiesced: the poisoned chunks are still missing one key each; with
  // full attention only, the stable run below the first one is the answer.
  for (const Prompt& prompt : prompts) {
    const size_t answer = CheckPrefix(index, *layout, ChainSource::Tokens(prompt.tokens), kBlock).prefix_hits;
    if (c.hybrid) {
      EXPECT_LE(answer, prompt.poisoned_full);
      EXPECT_NE(answer * kBlock, (prompt.poisoned_mamba + 1) * 64);
      if (prompt.poisoned_mamba > 0) EXPECT_GE(answer * kBlock, prompt.poisoned_mamba * 64) << "the stable chunk";
    } else {
      EXPECT_EQ(answer, prompt.poisoned_full);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, VllmConcurrency,
                         ::testing::Values(Case{"FullTp2", 2, false}, Case{"FullTp8", 8, false},
                                           Case{"HybridTp2", 2, true}, Case{"HybridTp8", 8, true}),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace sci::vllm
