// The vLLM family's queries against the real index (docs/vllm-family.md):
// the doc's worked examples' keys, Dynamo's prefix answer for full
// attention, sliding-window and Mamba groups, per-block hits, extras, the
// hash entry points (digests and 64-bit event hashes), and a chunk read in
// one lock hold. Chunks are stored as the Mooncake publisher reports them:
// one stored event per object key.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "index/index.h"
#include "query/digest.h"
#include "vllm/block_hash.h"
#include "vllm/chunk_query.h"
#include "vllm/layout.h"

namespace sci::vllm {
namespace {

std::vector<uint32_t> Iota(size_t n, uint32_t first = 0) {
  std::vector<uint32_t> tokens(n);
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

std::string Hex(const BlockDigest& digest) {
  std::string hex(kPageHashHexLength, '\0');
  ToHex(digest, hex.data());
  return hex;
}

GroupSpec Group(GroupKind kind, uint32_t block_size, std::vector<std::string> prefixes, uint32_t window = 0) {
  GroupSpec group;
  group.kind = kind;
  group.block_size = block_size;
  group.hash_block_size = 16;
  group.sliding_window = window;
  group.key_prefixes = std::move(prefixes);
  return group;
}

LayoutSpec Spec(std::vector<GroupSpec> groups, HashAlgorithm algorithm = HashAlgorithm::kSha256) {
  LayoutSpec spec;
  spec.algorithm = algorithm;
  spec.main_event_block_size = 16;
  spec.groups = std::move(groups);
  return spec;
}

std::unique_ptr<const Layout> Make(const LayoutSpec& spec) {
  std::string error;
  std::unique_ptr<const Layout> layout = Layout::Create(spec, &error);
  EXPECT_NE(layout, nullptr) << error;
  return layout;
}

// Example 1 of the doc: Qwen3-8B, TP 2, cache_prefix "prod", one
// full-attention group of block 16.
LayoutSpec Qwen() {
  return Spec({Group(GroupKind::kFullAttention, 16,
                     {"prod@Qwen3-8B@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0",
                      "prod@Qwen3-8B@tp_rank:1@pcp0@dcp0@pp_rank:0@group:0"})});
}

// Example 3: group 0 full attention (block 16), group 1 Mamba (block 64),
// TP 2, PP 2, model M, prefix prod.
LayoutSpec Hybrid() {
  std::vector<std::string> full, mamba;
  for (int pp = 0; pp < 2; ++pp) {
    for (int tp = 0; tp < 2; ++tp) {
      full.push_back("prod@M@tp_rank:" + std::to_string(tp) + "@pcp0@dcp0@pp_rank:" + std::to_string(pp) + "@group:0");
      mamba.push_back("prod@M@tp_rank:" + std::to_string(tp) + "@pcp0@dcp0@pp_rank:" + std::to_string(pp) + "@group:1");
    }
  }
  return Spec({Group(GroupKind::kFullAttention, 16, full), Group(GroupKind::kMamba, 64, mamba)});
}

class VllmQuery : public ::testing::Test {
 public:
  void Apply(EventKind kind, const std::vector<std::string>& keys, std::string_view group_id = {}) {
    std::vector<Event> events;
    for (const std::string& key : keys) events.push_back(Event{kind, key, group_id, {}, "cpu"});
    index_.ApplyBatch(++sequence_, events);
  }
  // Stores (or removes) chunk `chunk` of group `g`, keyed by the chain of `tokens`.

 protected:
  void Chunk(EventKind kind, const Layout& layout, const std::vector<uint32_t>& tokens, size_t g, size_t chunk,
             const RequestExtras& extras = {}) {
    const std::vector<BlockDigest> chain = HashChain(layout.algorithm(), "0", tokens, 16, extras);
    const size_t per_chunk = layout.groups()[g].block_size / 16;
    Apply(kind, layout.KeysFor(g, Hex(chain[(chunk + 1) * per_chunk - 1])));
  }
  size_t Prefix(const Layout& layout, const std::vector<uint32_t>& tokens, const RequestExtras& extras = {}) {
    return CheckPrefix(index_, layout, ChainSource::Tokens(tokens, extras), 16).prefix_hits;
  }
  std::vector<uint8_t> Blocks(const Layout& layout, const std::vector<uint32_t>& tokens) {
    std::vector<uint8_t> hits(tokens.size() / 16, 9);
    CheckBlocks(index_, layout, ChainSource::Tokens(tokens), 16, hits);
    return hits;
  }

  Index index_{VllmIndexOptions()};
  uint64_t sequence_ = 0;
};

TEST(VllmLayout, WorkedExamplesKeys) {
  const std::vector<BlockDigest> chain = HashChain(HashAlgorithm::kSha256, "0", Iota(64), 16);
  ASSERT_EQ(Hex(chain[0]), "6358e31578a64b75ebe28cdb99d3beae65de82a2087321dc6ec84ae048faaaa6");
  ASSERT_EQ(Hex(chain[3]), "71c151a876275d6b365dfa670e47acb855b683a8880eaf3e31a806c3164561b4");
  EXPECT_EQ(EventHashOf(chain[0]), 7982712666671721126u);

  auto qwen = Make(Qwen());
  EXPECT_EQ(qwen->KeysFor(0, Hex(chain[0])),
            (std::vector<std::string>{
                "prod@Qwen3-8B@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0@" + Hex(chain[0]),
                "prod@Qwen3-8B@tp_rank:1@pcp0@dcp0@pp_rank:0@group:0@" + Hex(chain[0])}));
  EXPECT_EQ(qwen->alignment(), 16u);

  // Example 2: DeepSeek-V3 (MLA), TP 4: one object per chunk.
  auto mla = Make(Spec({Group(GroupKind::kFullAttention, 16, {"DeepSeek-V3@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0"})}));
  EXPECT_EQ(mla->KeysFor(0, Hex(chain[3])),
            (std::vector<std::string>{"DeepSeek-V3@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0@" + Hex(chain[3])}));

  // Example 3: the Mamba chunk over tokens 0-63 is keyed by H_3, 4 objects; alignment 64.
  auto hybrid = Make(Hybrid());
  EXPECT_EQ(hybrid->alignment(), 64u);
  const std::vector<std::string> keys = hybrid->KeysFor(1, Hex(chain[3]));
  ASSERT_EQ(keys.size(), 4u);
  EXPECT_EQ(keys[0], "prod@M@tp_rank:0@pcp0@dcp0@pp_rank:0@group:1@" + Hex(chain[3]));
  EXPECT_EQ(keys[3], "prod@M@tp_rank:1@pcp0@dcp0@pp_rank:1@group:1@" + Hex(chain[3]));
}

TEST(VllmLayout, KeyFingerprintsAreTheWritersFingerprints) {
  // A prefix holding a run of 64 hex digits is fingerprinted whole (the
  // writer splits such a key in its prefix); both must agree with FingerprintOf.
  const std::string hexy(64, 'a');
  auto layout = Make(Spec({Group(GroupKind::kFullAttention, 16, {"plain@M@group:0", hexy + "@M", "x" + hexy})}));
  const BlockDigest digest = HashChain(HashAlgorithm::kSha256, "0", Iota(16), 16)[0];
  for (size_t p = 0; p < layout->n_prefixes(); ++p) {
    const std::string key = std::string(layout->prefix(p)) + Hex(digest);
    EXPECT_EQ(layout->KeyFingerprint(p, digest), FingerprintOf(layout->tenant_seed(), key)) << key;
  }
}

TEST(VllmLayout, RefusalsNameTheirField) {
  std::string error;
  LayoutSpec spec = Qwen();
  spec.main_event_block_size = 0;
  EXPECT_EQ(Layout::Create(spec, &error), nullptr);
  EXPECT_NE(error.find("main_event_block_size"), std::string::npos) << error;

  spec = Hybrid();
  spec.groups[1].block_size = 40;
  EXPECT_EQ(Layout::Create(spec, &error), nullptr);
  EXPECT_NE(error.find("groups[1].block_size"), std::string::npos) << error;

  spec = Hybrid();
  spec.groups[1].hash_block_size = 32;
  EXPECT_EQ(Layout::Create(spec, &error), nullptr);
  EXPECT_NE(error.find("groups[1].hash_block_size"), std::string::npos) << error;

  spec = Qwen();
  spec.groups[0].key_prefixes[1].clear();
  EXPECT_EQ(Layout::Create(spec, &error), nullptr);
  EXPECT_NE(error.find("groups[0].key_prefixes[1]"), std::string::npos) << error;

  spec = Spec({Group(GroupKind::kSlidingWindow, 16, {"p"}, /*window=*/0)});
  EXPECT_EQ(Layout::Create(spec, &error), nullptr);
  EXPECT_NE(error.find("groups[0].sliding_window"), std::string::npos) << error;
}

TEST_F(VllmQuery, FullAttentionPrefixNeverCreditsTheLastToken) {
  auto layout = Make(Qwen());
  const std::vector<uint32_t> tokens = Iota(64);
  EXPECT_EQ(Prefix(*layout, tokens), 0u);
  for (size_t chunk = 0; chunk < 3; ++chunk) Chunk(EventKind::kStored, *layout, tokens, 0, chunk);
  EXPECT_EQ(Prefix(*layout, tokens), 3u);
  Chunk(EventKind::kStored, *layout, tokens, 0, 3);
  EXPECT_EQ(Prefix(*layout, tokens), 3u) << "64 tokens: at most (64 - 1) / 16 blocks";
  EXPECT_EQ(Blocks(*layout, tokens), (std::vector<uint8_t>{1, 1, 1, 1}));
  std::vector<uint32_t> longer = tokens;
  longer.push_back(7);
  EXPECT_EQ(Prefix(*layout, longer), 4u);
}

TEST_F(VllmQuery, EveryPrefixOfAChunkMustHoldItsObject) {
  auto layout = Make(Qwen());
  const std::vector<uint32_t> tokens = Iota(65);
  for (size_t chunk = 0; chunk < 4; ++chunk) Chunk(EventKind::kStored, *layout, tokens, 0, chunk);
  ASSERT_EQ(Prefix(*layout, tokens), 4u);
  // Chunk 1 loses its rank-1 object.
  const std::vector<BlockDigest> chain = HashChain(HashAlgorithm::kSha256, "0", tokens, 16);
  Apply(EventKind::kRemoved, {layout->KeysFor(0, Hex(chain[1]))[1]});
  EXPECT_EQ(Prefix(*layout, tokens), 1u);
  EXPECT_EQ(Blocks(*layout, tokens), (std::vector<uint8_t>{1, 0, 1, 1}));
}

TEST_F(VllmQuery, MambaHoldsOnlyAtTheChunkEndingExactlyThere) {
  auto layout = Make(Hybrid());
  const std::vector<uint32_t> tokens = Iota(130);  // credits at most 128 tokens
  for (size_t chunk = 0; chunk < 8; ++chunk) Chunk(EventKind::kStored, *layout, tokens, 0, chunk);
  EXPECT_EQ(Prefix(*layout, tokens), 0u) << "no Mamba state anywhere";
  Chunk(EventKind::kStored, *layout, tokens, 1, 0);  // the state at token 64
  EXPECT_EQ(Prefix(*layout, tokens), 4u);
  Chunk(EventKind::kStored, *layout, tokens, 1, 1);  // the state at token 128
  EXPECT_EQ(Prefix(*layout, tokens), 8u);
  // Full attention bounds it: chunk 5 (tokens 80-95) gone leaves 64.
  Chunk(EventKind::kRemoved, *layout, tokens, 0, 5);
  EXPECT_EQ(Prefix(*layout, tokens), 4u);
  // Per block, only full attention counts.
  EXPECT_EQ(Blocks(*layout, tokens), (std::vector<uint8_t>{1, 1, 1, 1, 1, 0, 1, 1}));
}

// Credit in tokens (docs/vllm-family.md, "Credit in tokens"), its worked
// example: DCP 8's router block of 12,288 tokens over 128-token chunks
// (Dynamo's DEP #14944). A router crediting whole blocks sees one block of
// a 20,000-token prompt whose first 150 chunks are stored; the engine loads
// 150 x 128 = 19,200 tokens.
TEST_F(VllmQuery, PrefixTokensOfA12288TokenRouterBlockOver128TokenChunks) {
  LayoutSpec spec = Spec({Group(GroupKind::kFullAttention, 128, {"prod@M@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0"})});
  spec.groups[0].hash_block_size = 128;
  spec.main_event_block_size = 12288;
  spec.lcm_block_size = 12288;
  auto layout = Make(spec);
  ASSERT_EQ(layout->load_granularity(), 128u);
  const std::vector<uint32_t> tokens = Iota(20000);
  const std::vector<BlockDigest> chain = HashChain(HashAlgorithm::kSha256, "0", tokens, 128);
  for (size_t chunk = 0; chunk < 150; ++chunk) Apply(EventKind::kStored, layout->KeysFor(0, Hex(chain[chunk])));
  const PageQueryResult prefix = CheckPrefix(index_, *layout, ChainSource::Tokens(tokens), 12288);
  EXPECT_EQ(prefix.prefix_hits, 1u);
  EXPECT_EQ(prefix.prefix_tokens, 19200u);
  std::vector<uint8_t> hits(1, 9);
  const PageQueryResult blocks = CheckBlocks(index_, *layout, ChainSource::Tokens(tokens), 12288, hits);
  EXPECT_EQ(hits[0], 1);
  EXPECT_EQ(blocks.prefix_tokens, 19200u);
  // Every chunk stored: 156 whole chunks end inside the prompt (19,968
  // tokens), and none holds the last token.
  for (size_t chunk = 150; chunk < chain.size(); ++chunk) Apply(EventKind::kStored, layout->KeysFor(0, Hex(chain[chunk])));
  EXPECT_EQ(CheckPrefix(index_, *layout, ChainSource::Tokens(tokens), 12288).prefix_tokens, 19968u);
  // Chunk 40 gone: the run stops inside the first router block, and no block is credited.
  Apply(EventKind::kRemoved, layout->KeysFor(0, Hex(chain[40])));
  const PageQueryResult short_run = CheckPrefix(index_, *layout, ChainSource::Tokens(tokens), 12288);
  EXPECT_EQ(short_run.prefix_hits, 0u);
  EXPECT_EQ(short_run.prefix_tokens, 40u * 128);
}

// A hybrid keeps its Mamba state only at the alignment: the engine loads
// the aligned answer however many full-attention chunks lie past it.
TEST_F(VllmQuery, PrefixTokensOfAHybridAreItsAlignedAnswer) {
  auto layout = Make(Hybrid());
  const std::vector<uint32_t> tokens = Iota(130);
  for (size_t chunk = 0; chunk < 8; ++chunk) Chunk(EventKind::kStored, *layout, tokens, 0, chunk);
  Chunk(EventKind::kStored, *layout, tokens, 1, 0);  // the state at token 64 only
  const PageQueryResult prefix = CheckPrefix(index_, *layout, ChainSource::Tokens(tokens), 16);
  EXPECT_EQ(prefix.prefix_hits, 4u);
  EXPECT_EQ(prefix.prefix_tokens, 64u) << "full attention reaches 128 tokens, the state only 64";
}

TEST_F(VllmQuery, SlidingWindowNeedsOnlyTheLastChunksOfTheWindow) {
  // Window 33 tokens, chunks of 16: a prefix needs its last ceil(32 / 16) = 2 chunks.
  auto layout = Make(Spec({Group(GroupKind::kFullAttention, 16, {"m@full"}),
                           Group(GroupKind::kSlidingWindow, 16, {"m@swa"}, /*window=*/33)}));
  const std::vector<uint32_t> tokens = Iota(97);  // credits 96 tokens: 6 blocks
  for (size_t chunk = 0; chunk < 6; ++chunk) Chunk(EventKind::kStored, *layout, tokens, 0, chunk);
  Chunk(EventKind::kStored, *layout, tokens, 1, 4);
  Chunk(EventKind::kStored, *layout, tokens, 1, 5);
  EXPECT_EQ(Prefix(*layout, tokens), 6u) << "the window's chunks 4 and 5 are all it needs";
  Chunk(EventKind::kRemoved, *layout, tokens, 1, 4);
  Chunk(EventKind::kStored, *layout, tokens, 1, 2);
  Chunk(EventKind::kStored, *layout, tokens, 1, 3);
  EXPECT_EQ(Prefix(*layout, tokens), 4u) << "falls back to 64 tokens, whose window is chunks 2 and 3";
}

// A layout whose every group is a sliding window of one token needs no
// chunk at any length (ceil((1 - 1) / block_size) = 0): section 3's rule
// holds vacuously, but a prefix no object vouches for is not in the pool.
// Found by layout_json_fuzzer (an empty index answered 3 blocks).
TEST_F(VllmQuery, APrefixNoChunkVouchesForIsAMiss) {
  auto layout = Make(Spec({Group(GroupKind::kSlidingWindow, 16, {"m@swa"}, /*window=*/1)}));
  const std::vector<uint32_t> tokens = Iota(49);
  EXPECT_EQ(Prefix(*layout, tokens), 0u) << "an empty index";
  EXPECT_EQ(Blocks(*layout, tokens), (std::vector<uint8_t>{0, 0, 0}));
  // Two such groups: still nothing to look up.
  auto two = Make(Spec({Group(GroupKind::kSlidingWindow, 16, {"m@a"}, 1), Group(GroupKind::kSlidingWindow, 32, {"m@b"}, 1)}));
  EXPECT_EQ(Prefix(*two, tokens), 0u);
  // A window of two tokens needs the chunk before the prefix's end: found, a hit.
  auto window2 = Make(Spec({Group(GroupKind::kSlidingWindow, 16, {"m@swa"}, /*window=*/2)}));
  EXPECT_EQ(Prefix(*window2, tokens), 0u);
  Chunk(EventKind::kStored, *window2, tokens, 0, 1);
  EXPECT_EQ(Prefix(*window2, tokens), 2u);
}

TEST_F(VllmQuery, ExtrasChangeEveryBlockHash) {
  auto layout = Make(Qwen());
  const std::vector<uint32_t> tokens = Iota(49);
  RequestExtras lora;
  lora.has_lora = true;
  lora.lora_name = "adapter-a";
  for (size_t chunk = 0; chunk < 3; ++chunk) Chunk(EventKind::kStored, *layout, tokens, 0, chunk, lora);
  EXPECT_EQ(Prefix(*layout, tokens, lora), 3u);
  EXPECT_EQ(Prefix(*layout, tokens), 0u) << "the same tokens without the adapter are other blocks";
  RequestExtras salted = lora;
  salted.has_salt = true;
  salted.cache_salt = "s";
  EXPECT_EQ(Prefix(*layout, tokens, salted), 0u);
  // Asked twice (the second from the memo), the answer is the same.
  EXPECT_EQ(Prefix(*layout, tokens, lora), 3u);
  EXPECT_EQ(Prefix(*layout, tokens, lora), 3u);
  EXPECT_EQ(Prefix(*layout, tokens), 0u);
}

TEST_F(VllmQuery, HashEntryPointsGiveTheTokensAnswer) {
  auto layout = Make(Qwen());
  const std::vector<uint32_t> tokens = Iota(80);
  for (size_t chunk = 0; chunk < 3; ++chunk) Chunk(EventKind::kStored, *layout, tokens, 0, chunk);
  const std::vector<BlockDigest> chain = HashChain(HashAlgorithm::kSha256, "0", tokens, 16);
  std::vector<uint8_t> bytes;
  std::vector<uint64_t> events;
  for (const BlockDigest& digest : chain) {
    bytes.insert(bytes.end(), digest.begin(), digest.end());
    events.push_back(EventHashOf(digest));
  }
  EXPECT_EQ(CheckPrefix(index_, *layout, ChainSource::Digests(bytes.data(), chain.size(), 80), 16).prefix_hits, 3u);
  EXPECT_EQ(CheckPrefix(index_, *layout, ChainSource::EventHashes(events, 80), 16).prefix_hits, 3u);
  EXPECT_EQ(Prefix(*layout, tokens), 3u);
}

TEST_F(VllmQuery, AnEventHashTwoDigestsShareNeverHits) {
  auto layout = Make(Spec({Group(GroupKind::kFullAttention, 16, {"m@g"})}));
  // Two made-up digests with the same low 64 bits.
  std::string a(64, '1'), b(64, '1');
  b[0] = '2';
  Apply(EventKind::kStored, {"m@g@" + a});
  BlockDigest digest{};
  ASSERT_TRUE(index_.DigestOfEventHash(0x1111111111111111ull, &digest));
  EXPECT_EQ(Hex(digest), a);
  const std::vector<uint64_t> events = {0x1111111111111111ull};
  EXPECT_EQ(CheckPrefix(index_, *layout, ChainSource::EventHashes(events, 17), 16).prefix_hits, 1u);
  Apply(EventKind::kStored, {"m@g@" + b});
  EXPECT_FALSE(index_.DigestOfEventHash(0x1111111111111111ull, &digest));
  EXPECT_EQ(CheckPrefix(index_, *layout, ChainSource::EventHashes(events, 17), 16).prefix_hits, 0u);
  // Both gone: the entry goes; one back: it resolves again.
  Apply(EventKind::kRemoved, {"m@g@" + a, "m@g@" + b});
  EXPECT_FALSE(index_.DigestOfEventHash(0x1111111111111111ull, &digest));
  Apply(EventKind::kStored, {"m@g@" + b});
  ASSERT_TRUE(index_.DigestOfEventHash(0x1111111111111111ull, &digest));
  EXPECT_EQ(Hex(digest), b);
}

// The index knows no family: without vLLM's separator in its options it
// keeps no digest, so no event hash resolves (a miss), while the keys
// still answer queries by tokens.
TEST(VllmIndexOptions, AnIndexWithoutTheSeparatorResolvesNoEventHash) {
  Index plain;
  const std::string key = "m@g@" + std::string(64, '1');
  const std::vector<Event> events = {Event{EventKind::kStored, key, {}, {}, "cpu"}};
  plain.ApplyBatch(1, events);
  BlockDigest resolved{};
  EXPECT_FALSE(plain.DigestOfEventHash(0x1111111111111111ull, &resolved));
  EXPECT_TRUE(plain.Contains({}, key));
  Index with(VllmIndexOptions());
  with.ApplyBatch(1, events);
  EXPECT_TRUE(with.DigestOfEventHash(0x1111111111111111ull, &resolved));
}

TEST_F(VllmQuery, TheEventsGroupIdIsNeverTrusted) {
  // The second-generation master sends the KV-group index as group_id.
  auto layout = Make(Qwen());
  const std::vector<uint32_t> tokens = Iota(33);
  const std::vector<BlockDigest> chain = HashChain(HashAlgorithm::kSha256, "0", tokens, 16);
  for (size_t chunk = 0; chunk < 2; ++chunk) Apply(EventKind::kStored, layout->KeysFor(0, Hex(chain[chunk])), "0");
  ASSERT_EQ(Prefix(*layout, tokens), 2u);
  Apply(EventKind::kRemoved, {layout->KeysFor(0, Hex(chain[0]))[0]}, "0");
  EXPECT_EQ(Prefix(*layout, tokens), 0u);
  EXPECT_EQ(Blocks(*layout, tokens), (std::vector<uint8_t>{0, 1}));
}

// A chunk is one instant: "remove k0, store k1" landing between two lock
// holds must never make the chunk a hit.
struct Interleave {
  VllmQuery* test;
  std::vector<std::string> keys;
  bool done = false;
};

TEST_F(VllmQuery, AChunkIsReadInOneLockHold) {
  auto layout = Make(Qwen());
  const std::vector<uint32_t> tokens = Iota(17);
  const std::vector<BlockDigest> chain = HashChain(HashAlgorithm::kSha256, "0", tokens, 16);
  const std::vector<std::string> keys = layout->KeysFor(0, Hex(chain[0]));
  Apply(EventKind::kStored, {keys[0]});
  static Interleave interleave;
  interleave = Interleave{this, keys};
  ChunkQueryHooks hooks;
  hooks.user = &interleave;
  hooks.before_chunk_keys = [](void* user, size_t, size_t) {
    auto* state = static_cast<Interleave*>(user);
    if (state->done) return;
    state->done = true;
    state->test->Apply(EventKind::kRemoved, {state->keys[0]});
    state->test->Apply(EventKind::kStored, {state->keys[1]});
  };
  EXPECT_EQ(CheckPrefix(index_, *layout, ChainSource::Tokens(tokens), 16, &hooks).prefix_hits, 0u);
  interleave.done = false;
  Apply(EventKind::kStored, {keys[0]});
  Apply(EventKind::kRemoved, {keys[1]});
  std::vector<uint8_t> hits(1, 9);
  CheckBlocks(index_, *layout, ChainSource::Tokens(tokens), 16, hits, &hooks);
  EXPECT_EQ(hits[0], 0);
}

// A query nested in another on its thread (a hook or log callback that
// queries), before the outer query's first chunk is answered: the nested
// one writes its own chain and round fingerprints, never the outer one's
// (ScratchLease). A review's reproducer: a nested query of another layout,
// whose plans the thread kept, wrote r2's fingerprints over the outer
// round's, and r1's chunk 3, never stored, answered a hit. One round (12
// chunks) and three (40, which failed before the thread kept plan sets).
TEST_F(VllmQuery, AQueryNestedInAnotherNeverAnswersForIt) {
  for (const size_t nested_chunks : {12, 40}) {
    LayoutSpec a_spec = Qwen(), b_spec = Qwen();
    b_spec.groups[0].key_prefixes = {"prod@Other@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0"};
    const auto a = Make(a_spec);
    const auto b = Make(b_spec);
    const uint32_t first = static_cast<uint32_t>(nested_chunks) * 1000;  // tokens of this round's own
    const std::vector<uint32_t> r1 = Iota(10 * 16, first), r2 = Iota(nested_chunks * 16, first + 500);
    for (size_t chunk = 0; chunk < 10; ++chunk) {
      if (chunk != 3) Chunk(EventKind::kStored, *a, r1, 0, chunk);  // r1 under A: every chunk but 3
    }
    for (size_t chunk = 0; chunk < nested_chunks; ++chunk) {
      Chunk(EventKind::kStored, *a, r2, 0, chunk);
      Chunk(EventKind::kStored, *b, r2, 0, chunk);
    }
    // Both layouts asked before: the thread keeps both plans resolved.
    ASSERT_EQ(Blocks(*b, r2), std::vector<uint8_t>(nested_chunks, 1));
    std::vector<uint8_t> expected(10, 1);
    expected[3] = 0;
    ASSERT_EQ(Blocks(*a, r1), expected);
    struct Nest {
      Index* index;
      const Layout* layout;
      const std::vector<uint32_t>* tokens;
      std::vector<uint8_t> hits;
    };
    Nest nest{&index_, b.get(), &r2, {}};
    ChunkQueryHooks hooks;
    hooks.user = &nest;
    hooks.before_chunk_keys = [](void* user, size_t, size_t) {
      auto* n = static_cast<Nest*>(user);
      if (!n->hits.empty()) return;  // once a query
      n->hits.assign(n->tokens->size() / 16, 9);
      CheckBlocks(*n->index, *n->layout, ChainSource::Tokens(*n->tokens), 16, n->hits);
    };
    std::vector<uint8_t> hits(10, 9);
    const PageQueryResult r = CheckBlocks(index_, *a, ChainSource::Tokens(r1), 16, hits, &hooks);
    EXPECT_EQ(nest.hits, std::vector<uint8_t>(nested_chunks, 1)) << nested_chunks;
    EXPECT_EQ(hits, expected) << "chunk 3 of r1 was never stored under A; nested " << nested_chunks;
    EXPECT_EQ(r.total_hits, 9u) << nested_chunks;
    nest.hits.clear();
    EXPECT_EQ(CheckPrefix(index_, *a, ChainSource::Tokens(r1), 16, &hooks).prefix_hits, 3u) << nested_chunks;
  }
}

TEST_F(VllmQuery, ABlockSizeOtherThanTheRoutersChecksNothing) {
  auto layout = Make(Qwen());
  const std::vector<uint32_t> tokens = Iota(64);
  EXPECT_EQ(BlocksToCheck(*layout, tokens.size(), 32), 0u);
  EXPECT_EQ(CheckPrefix(index_, *layout, ChainSource::Tokens(tokens), 32).prefix_hits, 0u);
}

}  // namespace
}  // namespace sci::vllm
