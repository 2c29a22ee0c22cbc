// The vLLM family through the C ABI, as a router calls it: a layout from
// the descriptor a worker publishes (sci_layout_new_json), chunks stored by
// events, and every query entry point (tokens, extras, digests, event
// hashes). Digests are the doc's worked example (tokens 0..63, block 16,
// sha256, PYTHONHASHSEED 0), recomputed with CPython's pickle and hashlib.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "capi_test_support.h"
#include "shared_cache_index.h"

namespace {

using sci_test::IndexHandle;

sci_str Str(const std::string& s) { return sci_str{s.data(), s.size()}; }

const char* kDescriptor = R"({"schema_version": 1, "adapter": "vllm-1085b644", "vllm_revision": "1085b644",
 "hash": {"algorithm": "sha256", "digest_encoding": "hex", "gpu_event_hash": "low64",
          "seed_policy": "pythonhashseed-0", "key_separator": "@"},
 "input": {"text_only": true, "normalized_namespaces": true, "lora": true},
 "main_event_group": 0, "main_event_block_size": 16, "gpu_to_store_group": [0],
 "coordinator": {"lcm_block_size": 16, "speculative": false, "drop_blocks": false, "partial_hash_hits": false},
 "groups": [{"group_id": 0, "kind": "full_attention", "block_size": 16, "hash_block_size": 16,
             "key_prefixes": ["prod@Qwen3-8B@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0",
                              "prod@Qwen3-8B@tp_rank:1@pcp0@dcp0@pp_rank:0@group:0"],
             "sliding_window": null, "mamba_cache_mode": null}]})";

// H_0..H_3 of tokens 0..63, and their event hashes.
const char* kChain[4] = {"6358e31578a64b75ebe28cdb99d3beae65de82a2087321dc6ec84ae048faaaa6",
                         "3c3c50f324aefbdfbb124dfdc541efac3e94e59c40f4be08afe70601eeca92c8",
                         "0728d91353ef7b6761329eaaf146e88046d84f6384628314a0a6c35dd9b88e0a",
                         "71c151a876275d6b365dfa670e47acb855b683a8880eaf3e31a806c3164561b4"};
const uint64_t kEventHashes[4] = {7982712666671721126ull, 12675106281628537544ull, 11576154700054564362ull,
                                  3578117338907894196ull};
// H_0, H_1 with LoRA "lora-a" and cache salt "salt".
const char* kLoraChain[2] = {"b02fc6e3bad08eb9430b7f3da3caf6859c90d2b906a575e115fd625c67815992",
                             "45b37155d33b978679264cc8bbba8b281e3720cd4e26386f41cb28273d9c7a9a"};

std::vector<uint8_t> Bytes(const char* hex) {
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < 64; i += 2) bytes.push_back(static_cast<uint8_t>(std::stoi(std::string(hex + i, 2), nullptr, 16)));
  return bytes;
}

class CapiVllm : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(sci_layout_new_json(sci_str{kDescriptor, std::strlen(kDescriptor)}, &layout_), SCI_OK)
        << sci_last_error();
  }
  void TearDown() override { sci_layout_free(layout_); }

  // The chunk's keys (both ranks', or rank `only_rank`'s) on `medium`, in
  // `index` (the fixture's by default).
  void StoreChunk(const char* hash, sci_event_kind kind = SCI_EVENT_STORED, std::string_view medium = {},
                  int only_rank = -1, sci_index* index = nullptr) {
    std::vector<std::string> keys;
    for (int rank = 0; rank < 2; ++rank) {
      if (only_rank >= 0 && rank != only_rank) continue;
      keys.push_back("prod@Qwen3-8B@tp_rank:" + std::to_string(rank) + "@pcp0@dcp0@pp_rank:0@group:0@" + hash);
    }
    std::vector<sci_event> events;
    for (const std::string& key : keys) {
      sci_event event{};
      event.kind = kind;
      event.object_key = Str(key);
      event.medium = sci_str{medium.data(), medium.size()};
      events.push_back(event);
    }
    ASSERT_EQ(sci_index_apply_events(index != nullptr ? index : index_.index, ++sequence_, events.data(),
                                     events.size()),
              SCI_OK);
  }
  size_t Prefix(const std::vector<uint32_t>& tokens) {
    size_t prefix = 99;
    EXPECT_EQ(sci_index_check_prefix(index_.index, layout_, tokens.data(), tokens.size(), 16, &prefix), SCI_OK);
    return prefix;
  }

  IndexHandle index_;
  sci_layout* layout_ = nullptr;
  uint64_t sequence_ = 0;
};

std::vector<uint32_t> Iota(size_t n) {
  std::vector<uint32_t> tokens(n);
  std::iota(tokens.begin(), tokens.end(), 0u);
  return tokens;
}

TEST_F(CapiVllm, TheDescriptorMakesAVllmLayout) {
  EXPECT_EQ(sci_layout_get_family(layout_), SCI_LAYOUT_VLLM);
  EXPECT_EQ(sci_layout_block_size(layout_), 16u);
  const std::string wrapped = std::string(R"({"vllm_mooncake_store": )") + kDescriptor + "}";
  sci_layout* other = nullptr;
  ASSERT_EQ(sci_layout_new_json(Str(wrapped), &other), SCI_OK) << sci_last_error();
  EXPECT_EQ(sci_layout_get_family(other), SCI_LAYOUT_VLLM);
  sci_layout_free(other);
}

TEST_F(CapiVllm, SGLangsRuntimeConfigMakesAnSGLangLayout) {
  sci_layout* sglang = nullptr;
  const std::string config = R"({"page_size": 64, "tp_size": 8, "model_path": "ignored"})";
  ASSERT_EQ(sci_layout_new_json(Str(config), &sglang), SCI_OK) << sci_last_error();
  EXPECT_EQ(sci_layout_get_family(sglang), SCI_LAYOUT_SGLANG);
  EXPECT_EQ(sci_layout_block_size(sglang), 64u);
  sci_block_hashes hashes = SCI_BLOCK_HASHES_INIT;
  size_t prefix = 0;
  EXPECT_EQ(sci_index_check_block_hashes(index_.index, sglang, &hashes, 64, &prefix), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sci_last_error()).find("sci_index_check_page_hashes"), std::string::npos);
  sci_layout_free(sglang);
}

TEST_F(CapiVllm, RefusalsNameTheirJsonPath) {
  sci_layout* bad = reinterpret_cast<sci_layout*>(0x1);
  std::string descriptor = kDescriptor;
  descriptor.replace(descriptor.find("\"full_attention\""), 16, "\"linear\"");
  EXPECT_EQ(sci_layout_new_json(Str(descriptor), &bad), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bad, nullptr);
  EXPECT_NE(std::string(sci_last_error()).find("groups[0].kind"), std::string::npos) << sci_last_error();
  const std::string not_json = "{\"page_size\": ";
  EXPECT_EQ(sci_layout_new_json(Str(not_json), &bad), SCI_ERR_INVALID_ARGUMENT);
  const std::string no_page_size = R"({"tp_size": 8})";
  EXPECT_EQ(sci_layout_new_json(Str(no_page_size), &bad), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sci_last_error()).find("page_size"), std::string::npos) << sci_last_error();
  EXPECT_EQ(sci_layout_new_json(sci_str{nullptr, 3}, &bad), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sci_layout_new_json(Str(no_page_size), nullptr), SCI_ERR_INVALID_ARGUMENT);
}

TEST_F(CapiVllm, PagesAndPrefixFollowDynamosRules) {
  for (int chunk = 0; chunk < 3; ++chunk) StoreChunk(kChain[chunk]);
  const std::vector<uint32_t> tokens = Iota(64);
  EXPECT_EQ(Prefix(tokens), 3u);
  std::vector<uint8_t> hits(4, 9);
  sci_page_result result = SCI_PAGE_RESULT_INIT;
  ASSERT_EQ(sci_index_check_pages(index_.index, layout_, tokens.data(), tokens.size(), 16, hits.data(), hits.size(),
                                  &result),
            SCI_OK);
  EXPECT_EQ(hits, (std::vector<uint8_t>{1, 1, 1, 0}));
  EXPECT_EQ(result.n_pages, 4u);
  EXPECT_EQ(result.total_hits, 3u);
  EXPECT_EQ(result.prefix_hits, 3u);
  StoreChunk(kChain[3]);
  EXPECT_EQ(Prefix(tokens), 3u) << "the last token is never credited";
  StoreChunk(kChain[1], SCI_EVENT_REMOVED);
  EXPECT_EQ(Prefix(tokens), 1u);
  // The wrong block size checks nothing.
  size_t prefix = 99;
  ASSERT_EQ(sci_index_check_prefix(index_.index, layout_, tokens.data(), tokens.size(), 64, &prefix), SCI_OK);
  EXPECT_EQ(prefix, 0u);
  sci_stats stats = SCI_STATS_INIT;
  ASSERT_EQ(sci_index_stats(index_.index, &stats), SCI_OK);
  EXPECT_EQ(stats.block_size_mismatches, 1u);
  // Page hashes are SGLang's entry point.
  sci_str page_hash = Str(kChain[0]);
  EXPECT_EQ(sci_index_check_page_hashes(index_.index, layout_, &page_hash, 1, hits.data(), hits.size(), &result),
            SCI_ERR_INVALID_ARGUMENT);
}

TEST_F(CapiVllm, ExtrasAreTheRequestsOwnEntryPoint) {
  StoreChunk(kLoraChain[0]);
  StoreChunk(kLoraChain[1]);
  const std::vector<uint32_t> tokens = Iota(33);
  const std::string lora = "lora-a", salt = "salt";
  sci_request_extras extras = SCI_REQUEST_EXTRAS_INIT;
  extras.lora_name = Str(lora);
  extras.cache_salt = Str(salt);
  size_t prefix = 99;
  ASSERT_EQ(sci_index_check_prefix_with_extras(index_.index, layout_, tokens.data(), tokens.size(), 16, &extras,
                                               &prefix),
            SCI_OK);
  EXPECT_EQ(prefix, 2u);
  EXPECT_EQ(Prefix(tokens), 0u);
  extras.cache_salt = sci_str{nullptr, 0};  // no salt: other hashes
  ASSERT_EQ(sci_index_check_prefix_with_extras(index_.index, layout_, tokens.data(), tokens.size(), 16, &extras,
                                               &prefix),
            SCI_OK);
  EXPECT_EQ(prefix, 0u);
  std::vector<uint8_t> hits(2, 9);
  sci_page_result result = SCI_PAGE_RESULT_INIT;
  extras.cache_salt = Str(salt);
  ASSERT_EQ(sci_index_check_pages_with_extras(index_.index, layout_, tokens.data(), tokens.size(), 16, &extras,
                                              hits.data(), hits.size(), &result),
            SCI_OK);
  EXPECT_EQ(hits, (std::vector<uint8_t>{1, 1}));
  extras.lora_name = sci_str{nullptr, 4};
  EXPECT_EQ(sci_index_check_prefix_with_extras(index_.index, layout_, tokens.data(), tokens.size(), 16, &extras,
                                               &prefix),
            SCI_ERR_INVALID_ARGUMENT);
}

TEST_F(CapiVllm, SGLangLayoutsAnswerNoHitForARequestWithExtras) {
  sci_layout* sglang = nullptr;
  const std::string config = R"({"page_size": 16})";
  ASSERT_EQ(sci_layout_new_json(Str(config), &sglang), SCI_OK);
  const std::vector<uint32_t> tokens = Iota(32);
  std::vector<sci_event> events;
  const std::string lora = "lora-a";
  sci_request_extras extras = SCI_REQUEST_EXTRAS_INIT;
  extras.lora_name = Str(lora);
  size_t prefix = 99;
  ASSERT_EQ(sci_index_check_prefix_with_extras(index_.index, sglang, tokens.data(), tokens.size(), 16, &extras,
                                               &prefix),
            SCI_OK);
  EXPECT_EQ(prefix, 0u);
  std::vector<uint8_t> hits(2, 9);
  sci_page_result result = SCI_PAGE_RESULT_INIT;
  ASSERT_EQ(sci_index_check_pages_with_extras(index_.index, sglang, tokens.data(), tokens.size(), 16, &extras,
                                              hits.data(), hits.size(), &result),
            SCI_OK);
  EXPECT_EQ(hits, (std::vector<uint8_t>{0, 0}));
  EXPECT_EQ(result.n_pages, 2u);
  sci_layout_free(sglang);
}

TEST_F(CapiVllm, BlockHashesByDigestOrEventHash) {
  for (int chunk = 0; chunk < 3; ++chunk) StoreChunk(kChain[chunk]);
  std::vector<uint8_t> digests;
  for (const char* hex : kChain) {
    const std::vector<uint8_t> bytes = Bytes(hex);
    digests.insert(digests.end(), bytes.begin(), bytes.end());
  }
  sci_block_hashes hashes = SCI_BLOCK_HASHES_INIT;
  hashes.digests = digests.data();
  hashes.n_hashes = 4;
  hashes.n_tokens = 64;
  size_t prefix = 99;
  ASSERT_EQ(sci_index_check_block_hashes(index_.index, layout_, &hashes, 16, &prefix), SCI_OK) << sci_last_error();
  EXPECT_EQ(prefix, 3u);
  hashes.digests = nullptr;
  hashes.event_hashes = kEventHashes;
  hashes.n_tokens = 0;  // 4 x 16 + 1: every block creditable
  ASSERT_EQ(sci_index_check_block_hashes(index_.index, layout_, &hashes, 16, &prefix), SCI_OK) << sci_last_error();
  EXPECT_EQ(prefix, 3u);
  StoreChunk(kChain[3]);
  ASSERT_EQ(sci_index_check_block_hashes(index_.index, layout_, &hashes, 16, &prefix), SCI_OK);
  EXPECT_EQ(prefix, 4u);
  // Both kinds, or too few tokens: refused, *prefix_blocks untouched.
  hashes.digests = digests.data();
  prefix = 99;
  EXPECT_EQ(sci_index_check_block_hashes(index_.index, layout_, &hashes, 16, &prefix), SCI_ERR_INVALID_ARGUMENT);
  hashes.event_hashes = nullptr;
  hashes.n_tokens = 63;
  EXPECT_EQ(sci_index_check_block_hashes(index_.index, layout_, &hashes, 16, &prefix), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(prefix, 99u);
}

// A caller's n_tokens bounds nothing a query allocates or walks: with one
// digest and a request "of" 2^50 tokens, the answer is that digest's chunk,
// at once (no candidate past the hashes given is tried).
TEST_F(CapiVllm, AHugeTokenCountWithFewHashesIsAnsweredAtOnce) {
  StoreChunk(kChain[0]);
  const std::vector<uint8_t> digest = Bytes(kChain[0]);
  sci_block_hashes hashes = SCI_BLOCK_HASHES_INIT;
  hashes.digests = digest.data();
  hashes.n_hashes = 1;
  hashes.n_tokens = size_t{1} << 50;
  size_t prefix = 99;
  ASSERT_EQ(sci_index_check_block_hashes(index_.index, layout_, &hashes, 16, &prefix), SCI_OK) << sci_last_error();
  EXPECT_EQ(prefix, 1u);
  hashes.digests = nullptr;
  hashes.event_hashes = kEventHashes;
  ASSERT_EQ(sci_index_check_block_hashes(index_.index, layout_, &hashes, 16, &prefix), SCI_OK) << sci_last_error();
  EXPECT_EQ(prefix, 1u);
}

// Tiers (1.3): per block, the slowest chunk covering it; per tier, Dynamo's
// prefix counting only chunks at that tier or faster.
TEST_F(CapiVllm, TiersGiveEachBlocksTierAndDynamosPrefixPerTier) {
  sci_index_options options = SCI_INDEX_OPTIONS_INIT;
  options.residency = SCI_RESIDENCY_PER_MEDIUM;
  sci_index* index = nullptr;
  ASSERT_EQ(sci_index_new(&options, &index), SCI_OK) << sci_last_error();
  StoreChunk(kChain[0], SCI_EVENT_STORED, "cpu", -1, index);
  StoreChunk(kChain[1], SCI_EVENT_STORED, "cpu", -1, index);
  StoreChunk(kChain[1], SCI_EVENT_STORED, "disk", 1, index);
  StoreChunk(kChain[1], SCI_EVENT_REMOVED, "cpu", 1, index);  // chunk 1: rank 1 on disk only
  StoreChunk(kChain[2], SCI_EVENT_STORED, "cpu", -1, index);
  StoreChunk(kChain[3], SCI_EVENT_STORED, "disk", -1, index);
  const std::vector<uint32_t> tokens = Iota(64);
  std::vector<uint8_t> tiers(4, 0xEE);
  sci_tier_result result = SCI_TIER_RESULT_INIT;
  ASSERT_EQ(sci_index_check_tiers(index, layout_, tokens.data(), tokens.size(), 16, nullptr, tiers.data(),
                                  tiers.size(), &result),
            SCI_OK)
      << sci_last_error();
  EXPECT_EQ(tiers, (std::vector<uint8_t>{0, 1, 0, 1}));
  EXPECT_EQ(result.n_tiers, 2u);
  EXPECT_EQ(result.n_pages, 4u);
  EXPECT_EQ(result.prefix_pages[0], 1u) << "chunk 1 is on disk";
  EXPECT_EQ(result.prefix_pages[1], 3u) << "the last token is never credited";
  EXPECT_EQ(result.prefix_pages[2], 0u);
  EXPECT_EQ(result.pages_at[0], 2u);
  EXPECT_EQ(result.pages_at[1], 2u);
  size_t prefix = 99;
  ASSERT_EQ(sci_index_check_prefix(index, layout_, tokens.data(), tokens.size(), 16, &prefix), SCI_OK);
  EXPECT_EQ(prefix, result.prefix_pages[1]) << "the slowest tier's prefix is the plain answer";
  // A chunk gone: absent at every tier, and the prefixes stop before it.
  StoreChunk(kChain[0], SCI_EVENT_REMOVED, "cpu", 0, index);
  ASSERT_EQ(sci_index_check_tiers(index, layout_, tokens.data(), tokens.size(), 16, nullptr, tiers.data(),
                                  tiers.size(), &result),
            SCI_OK);
  EXPECT_EQ(tiers, (std::vector<uint8_t>{SCI_TIER_ABSENT, 1, 0, 1}));
  EXPECT_EQ(result.prefix_pages[0], 0u);
  EXPECT_EQ(result.prefix_pages[1], 0u);
  // Extras are the request's: a LoRA request of the same tokens has other hashes.
  const std::string lora = "lora-a";
  sci_request_extras extras = SCI_REQUEST_EXTRAS_INIT;
  extras.lora_name = Str(lora);
  ASSERT_EQ(sci_index_check_tiers(index, layout_, tokens.data(), tokens.size(), 16, &extras, tiers.data(),
                                  tiers.size(), &result),
            SCI_OK);
  EXPECT_EQ(tiers, (std::vector<uint8_t>(4, SCI_TIER_ABSENT)));
  sci_index_free(index);
}

// Credit in tokens (1.4), the DCP shape scaled down: a router block of 64
// tokens over chunks of 16 (Dynamo's DEP #14944: 12,288 over 128). The
// router credits whole blocks; the engine loads whole chunks past them.
TEST_F(CapiVllm, PrefixTokensCountWholeChunksPastTheLastWholeRouterBlock) {
  std::string descriptor = kDescriptor;
  for (const char* field : {"\"main_event_block_size\": 16", "\"lcm_block_size\": 16"}) {
    const size_t at = descriptor.find(field);
    ASSERT_NE(at, std::string::npos) << field;
    descriptor.replace(at + std::strlen(field) - 2, 2, "64");
  }
  sci_layout* wide = nullptr;
  ASSERT_EQ(sci_layout_new_json(Str(descriptor), &wide), SCI_OK) << sci_last_error();
  ASSERT_EQ(sci_layout_block_size(wide), 64u);
  const auto check = [&](size_t n_tokens, sci_page_result* result) {
    const std::vector<uint32_t> tokens = Iota(n_tokens);
    std::vector<uint8_t> hits(n_tokens / 64 + 1, 9);
    *result = SCI_PAGE_RESULT_INIT;
    ASSERT_EQ(sci_index_check_pages(index_.index, wide, tokens.data(), tokens.size(), 64, hits.data(), hits.size(),
                                    result),
              SCI_OK)
        << sci_last_error();
  };
  for (int chunk = 0; chunk < 3; ++chunk) StoreChunk(kChain[chunk]);
  sci_page_result result;
  check(64, &result);
  EXPECT_EQ(result.prefix_hits, 0u) << "no whole router block leaves the last token";
  EXPECT_EQ(result.prefix_tokens, 48u) << "three whole chunks load";
  check(40, &result);
  EXPECT_EQ(result.prefix_tokens, 32u) << "chunks wholly inside the request, never its last token";
  StoreChunk(kChain[3]);
  check(64, &result);
  EXPECT_EQ(result.prefix_tokens, 48u) << "the last token is never loaded: chunk 3 holds it";
  check(65, &result);
  EXPECT_EQ(result.prefix_hits, 1u);
  EXPECT_EQ(result.prefix_tokens, 64u);
  // The prefix walk answers the same, in pages and tokens.
  {
    const std::vector<uint32_t> tokens = Iota(64);
    size_t pages = 99, loaded = 99;
    ASSERT_EQ(sci_index_check_prefix_tokens(index_.index, wide, tokens.data(), tokens.size(), 64, nullptr, &pages,
                                            &loaded),
              SCI_OK)
        << sci_last_error();
    EXPECT_EQ(pages, 0u);
    EXPECT_EQ(loaded, 48u);
    loaded = 99;
    ASSERT_EQ(sci_index_check_prefix_tokens(index_.index, wide, tokens.data(), tokens.size(), 64, nullptr, nullptr,
                                            &loaded),
              SCI_OK);
    EXPECT_EQ(loaded, 48u) << "either output may be NULL";
    EXPECT_EQ(sci_index_check_prefix_tokens(index_.index, wide, tokens.data(), tokens.size(), 64, nullptr, nullptr,
                                            nullptr),
              SCI_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(sci_last_error(), "sci_index_check_prefix_tokens: prefix_pages and prefix_tokens are both NULL");
    const std::string lora = "lora-a";
    sci_request_extras extras = SCI_REQUEST_EXTRAS_INIT;
    extras.lora_name = Str(lora);
    ASSERT_EQ(sci_index_check_prefix_tokens(index_.index, wide, tokens.data(), tokens.size(), 64, &extras, &pages,
                                            &loaded),
              SCI_OK);
    EXPECT_EQ(loaded, 0u) << "a LoRA request has other block hashes";
    sci_request_extras small = SCI_REQUEST_EXTRAS_INIT;
    small.struct_size = 4;
    loaded = 99;
    EXPECT_EQ(sci_index_check_prefix_tokens(index_.index, wide, tokens.data(), tokens.size(), 64, &small, &pages,
                                            &loaded),
              SCI_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(loaded, 99u) << "nothing written on an error";
  }
  StoreChunk(kChain[1], SCI_EVENT_REMOVED, {}, 1);
  check(65, &result);
  EXPECT_EQ(result.prefix_hits, 0u);
  EXPECT_EQ(result.prefix_tokens, 16u) << "the run stops at chunk 1, one of its objects gone";

  // The tier answer carries the same count per tier.
  std::vector<uint8_t> tiers(2, 0xEE);
  sci_tier_result tiered = SCI_TIER_RESULT_INIT;
  const std::vector<uint32_t> tokens = Iota(65);
  ASSERT_EQ(sci_index_check_tiers(index_.index, wide, tokens.data(), tokens.size(), 64, nullptr, tiers.data(),
                                  tiers.size(), &tiered),
            SCI_OK);
  EXPECT_EQ(tiered.prefix_tokens[tiered.n_tiers - 1], 16u);
  for (uint32_t t = tiered.n_tiers; t < SCI_TIERS_MAX; ++t) EXPECT_EQ(tiered.prefix_tokens[t], 0u);

  // A caller built against the 1.3 header passes the smaller struct: the
  // field is not written.
  std::vector<uint8_t> hits(2, 9);
  sci_page_result old{};
  old.struct_size = offsetof(sci_page_result, prefix_tokens);
  old.prefix_tokens = 12345;
  ASSERT_EQ(sci_index_check_pages(index_.index, wide, tokens.data(), tokens.size(), 64, hits.data(), hits.size(), &old),
            SCI_OK);
  EXPECT_EQ(old.prefix_tokens, 12345u);
  EXPECT_EQ(old.n_pages, 1u);
  sci_tier_result old_tiers{};
  old_tiers.struct_size = offsetof(sci_tier_result, prefix_tokens);
  old_tiers.prefix_tokens[0] = 12345;
  ASSERT_EQ(sci_index_check_tiers(index_.index, wide, tokens.data(), tokens.size(), 64, nullptr, tiers.data(),
                                  tiers.size(), &old_tiers),
            SCI_OK);
  EXPECT_EQ(old_tiers.prefix_tokens[0], 12345u);
  EXPECT_EQ(old_tiers.n_pages, 1u);
  sci_layout_free(wide);
}

// On the usual layout (chunk = router block) and on a hybrid, the engine
// loads the aligned answer: prefix_tokens = prefix_hits x block size.
TEST_F(CapiVllm, PrefixTokensOfTheUsualLayoutAreTheCreditedBlocks) {
  for (int chunk = 0; chunk < 3; ++chunk) StoreChunk(kChain[chunk]);
  const std::vector<uint32_t> tokens = Iota(60);
  std::vector<uint8_t> hits(3, 9);
  sci_page_result result = SCI_PAGE_RESULT_INIT;
  ASSERT_EQ(sci_index_check_pages(index_.index, layout_, tokens.data(), tokens.size(), 16, hits.data(), hits.size(),
                                  &result),
            SCI_OK);
  EXPECT_EQ(result.prefix_hits, 3u);
  EXPECT_EQ(result.prefix_tokens, 48u);
}

TEST_F(CapiVllm, TierQueryArgumentsAreCheckedAsAPageQuerys) {
  const std::vector<uint32_t> tokens = Iota(64);
  std::vector<uint8_t> tiers(4, 0xEE);
  sci_tier_result result = SCI_TIER_RESULT_INIT;
  EXPECT_EQ(sci_index_check_tiers(nullptr, layout_, tokens.data(), 64, 16, nullptr, tiers.data(), 4, &result),
            SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sci_index_check_tiers(index_.index, nullptr, tokens.data(), 64, 16, nullptr, tiers.data(), 4, &result),
            SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sci_index_check_tiers(index_.index, layout_, tokens.data(), 64, 16, nullptr, tiers.data(), 4, nullptr),
            SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sci_last_error()).find("result is NULL"), std::string::npos) << sci_last_error();
  EXPECT_EQ(sci_index_check_tiers(index_.index, layout_, nullptr, 64, 16, nullptr, tiers.data(), 4, &result),
            SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sci_index_check_tiers(index_.index, layout_, tokens.data(), 64, 16, nullptr, tiers.data(), 3, &result),
            SCI_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(sci_index_check_tiers(index_.index, layout_, tokens.data(), 64, 16, nullptr, nullptr, 4, &result),
            SCI_ERR_INVALID_ARGUMENT);
  sci_tier_result small = SCI_TIER_RESULT_INIT;
  small.struct_size = offsetof(sci_tier_result, pages_at);
  EXPECT_EQ(sci_index_check_tiers(index_.index, layout_, tokens.data(), 64, 16, nullptr, tiers.data(), 4, &small),
            SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sci_last_error()).find("struct_size"), std::string::npos) << sci_last_error();
  sci_request_extras extras = SCI_REQUEST_EXTRAS_INIT;
  extras.cache_salt = sci_str{nullptr, 2};
  EXPECT_EQ(sci_index_check_tiers(index_.index, layout_, tokens.data(), 64, 16, &extras, tiers.data(), 4, &result),
            SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(tiers, (std::vector<uint8_t>(4, 0xEE))) << "a refused call writes nothing";
  // The wrong block size: no page, the tiers still named.
  result.n_tiers = 99;
  ASSERT_EQ(sci_index_check_tiers(index_.index, layout_, tokens.data(), 64, 64, nullptr, nullptr, 0, &result), SCI_OK);
  EXPECT_EQ(result.n_pages, 0u);
  EXPECT_EQ(result.n_tiers, 2u);
  // An SGLang request with extras: no page at any tier.
  sci_layout* sglang = nullptr;
  const std::string config = R"({"page_size": 16})";
  ASSERT_EQ(sci_layout_new_json(Str(config), &sglang), SCI_OK);
  const std::string lora = "lora-a";
  extras.cache_salt = sci_str{nullptr, 0};
  extras.lora_name = Str(lora);
  ASSERT_EQ(sci_index_check_tiers(index_.index, sglang, tokens.data(), 64, 16, &extras, tiers.data(), 4, &result),
            SCI_OK);
  EXPECT_EQ(tiers, (std::vector<uint8_t>(4, SCI_TIER_ABSENT)));
  EXPECT_EQ(result.n_pages, 4u);
  sci_layout_free(sglang);
}

TEST(CapiTierMap, AnIndexRefusesAMapThatIsNotOneNamingTheItem) {
  sci_index_options options = SCI_INDEX_OPTIONS_INIT;
  const std::string good = "hbm=0,cpu=1,disk=2";
  options.medium_tiers = Str(good);
  sci_index* index = nullptr;
  ASSERT_EQ(sci_index_new(&options, &index), SCI_OK) << sci_last_error();
  sci_layout* layout = nullptr;
  const std::string config = R"({"page_size": 16})";
  ASSERT_EQ(sci_layout_new_json(Str(config), &layout), SCI_OK);
  const std::vector<uint32_t> tokens = Iota(16);
  uint8_t tier = 0;
  sci_tier_result result = SCI_TIER_RESULT_INIT;
  ASSERT_EQ(sci_index_check_tiers(index, layout, tokens.data(), 16, 16, nullptr, &tier, 1, &result), SCI_OK);
  EXPECT_EQ(result.n_tiers, 3u);
  EXPECT_EQ(tier, SCI_TIER_ABSENT);
  sci_layout_free(layout);
  sci_index_free(index);
  const std::string bad = "cpu=0,disk=2";
  options.medium_tiers = Str(bad);
  index = reinterpret_cast<sci_index*>(0x1);
  EXPECT_EQ(sci_index_new(&options, &index), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(index, nullptr);
  EXPECT_NE(std::string(sci_last_error()).find("medium_tiers: tier 1 has no medium"), std::string::npos)
      << sci_last_error();
  options.medium_tiers = sci_str{nullptr, 3};
  EXPECT_EQ(sci_index_new(&options, &index), SCI_ERR_INVALID_ARGUMENT);
  // A 1.2 caller's struct stops before the map: the default.
  options.medium_tiers = Str(bad);
  options.struct_size = offsetof(sci_index_options, medium_tiers);
  ASSERT_EQ(sci_index_new(&options, &index), SCI_OK) << sci_last_error();
  sci_index_free(index);
}

}  // namespace
