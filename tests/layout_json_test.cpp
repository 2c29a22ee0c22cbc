// The layouts the library reads from the JSON workers publish: vLLM's
// descriptor (vllm/layout_spec.h) and SGLang's runtime config
// (sglang/runtime_config.h) -- what each field becomes, and that every
// value the library cannot honour is refused by its JSON path.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "log_capture.h"
#include "common/unknown_fields.h"
#include "sglang/runtime_config.h"
#include "vllm/layout_spec.h"

namespace sci {
namespace {

using nlohmann::json;

// docs/vllm-mooncake-store.md, section 5, as Dynamo's worker extension publishes it.
constexpr const char* kDescriptor = R"({"schema_version": 1, "adapter": "vllm-1085b644", "vllm_revision": "1085b644",
 "hash": {"algorithm": "sha256", "digest_encoding": "hex", "gpu_event_hash": "low64",
          "seed_policy": "pythonhashseed-0", "key_separator": "@"},
 "input": {"text_only": true, "normalized_namespaces": true, "lora": true},
 "main_event_group": 0, "main_event_block_size": 16, "gpu_to_store_group": [0],
 "coordinator": {"lcm_block_size": 16, "speculative": false, "drop_blocks": false, "partial_hash_hits": false},
 "groups": [{"group_id": 0, "kind": "full_attention", "block_size": 16, "hash_block_size": 16,
             "key_prefixes": ["prod@Qwen3-8B@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0",
                              "prod@Qwen3-8B@tp_rank:1@pcp0@dcp0@pp_rank:0@group:0"],
             "sliding_window": null, "mamba_cache_mode": null}]})";

// The document's hybrid (section 4, example 3): full attention in blocks of
// 16, Mamba in blocks of 64, one chain hashed in blocks of 16.
constexpr const char* kHybrid = R"({"schema_version": 1,
 "hash": {"algorithm": "sha256", "seed_policy": "pythonhashseed-0"},
 "main_event_block_size": 16,
 "coordinator": {"lcm_block_size": 64},
 "groups": [
   {"group_id": 0, "kind": "full_attention", "block_size": 16, "hash_block_size": 16,
    "key_prefixes": ["prod@M@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0", "prod@M@tp_rank:1@pcp0@dcp0@pp_rank:0@group:0",
                     "prod@M@tp_rank:0@pcp0@dcp0@pp_rank:1@group:0", "prod@M@tp_rank:1@pcp0@dcp0@pp_rank:1@group:0"]},
   {"group_id": 1, "kind": "mamba", "block_size": 64, "hash_block_size": 16, "mamba_cache_mode": "align",
    "key_prefixes": ["prod@M@tp_rank:0@pcp0@dcp0@pp_rank:0@group:1", "prod@M@tp_rank:1@pcp0@dcp0@pp_rank:0@group:1",
                     "prod@M@tp_rank:0@pcp0@dcp0@pp_rank:1@group:1", "prod@M@tp_rank:1@pcp0@dcp0@pp_rank:1@group:1"]}]})";

json Descriptor() { return json::parse(kDescriptor); }

void ExpectQwenDescriptor(const vllm::LayoutSpec& spec) {
  EXPECT_EQ(spec.algorithm, vllm::HashAlgorithm::kSha256);
  EXPECT_EQ(spec.python_hash_seed, "0");
  EXPECT_EQ(spec.main_event_block_size, 16u);
  EXPECT_EQ(spec.lcm_block_size, 16u);
  EXPECT_EQ(spec.tenant_id, "");
  ASSERT_EQ(spec.groups.size(), 1u);
  const vllm::GroupSpec& group = spec.groups[0];
  EXPECT_EQ(group.group_id, 0u);
  EXPECT_EQ(group.kind, vllm::GroupKind::kFullAttention);
  EXPECT_EQ(group.block_size, 16u);
  EXPECT_EQ(group.hash_block_size, 16u);
  EXPECT_EQ(group.sliding_window, 0u);
  EXPECT_EQ(group.key_prefixes, (std::vector<std::string>{"prod@Qwen3-8B@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0",
                                                          "prod@Qwen3-8B@tp_rank:1@pcp0@dcp0@pp_rank:0@group:0"}));
}

// The descriptor's error for `descriptor`, which must be refused.
std::string DescriptorError(const std::string& descriptor) {
  vllm::LayoutSpec spec;
  std::string error;
  EXPECT_FALSE(vllm::ParseDescriptorJson(descriptor, &spec, &error)) << descriptor;
  EXPECT_FALSE(error.empty());
  return error;
}
std::string DescriptorError(const json& descriptor) { return DescriptorError(descriptor.dump()); }

vllm::LayoutSpec ReadDescriptor(const std::string& descriptor) {
  vllm::LayoutSpec spec;
  std::string error;
  EXPECT_TRUE(vllm::ParseDescriptorJson(descriptor, &spec, &error)) << error << "\n" << descriptor;
  return spec;
}

#define EXPECT_NAMES(error, path) EXPECT_NE((error).find(path), std::string::npos) << (error)

TEST(VllmDescriptor, CanonicalDescriptorGivesItsSpec) { ExpectQwenDescriptor(ReadDescriptor(kDescriptor)); }

TEST(VllmDescriptor, WrappedDescriptorGivesTheSameSpec) {
  ExpectQwenDescriptor(ReadDescriptor(json{{"vllm_mooncake_store", Descriptor()}}.dump()));
}

TEST(VllmDescriptor, HybridOfFullAttentionAndAlignedMamba) {
  const vllm::LayoutSpec spec = ReadDescriptor(kHybrid);
  EXPECT_EQ(spec.main_event_block_size, 16u);
  EXPECT_EQ(spec.lcm_block_size, 64u);
  ASSERT_EQ(spec.groups.size(), 2u);
  EXPECT_EQ(spec.groups[0].kind, vllm::GroupKind::kFullAttention);
  EXPECT_EQ(spec.groups[0].block_size, 16u);
  EXPECT_EQ(spec.groups[1].group_id, 1u);
  EXPECT_EQ(spec.groups[1].kind, vllm::GroupKind::kMamba);
  EXPECT_EQ(spec.groups[1].block_size, 64u);
  EXPECT_EQ(spec.groups[1].hash_block_size, 16u);
  EXPECT_EQ(spec.groups[1].key_prefixes.size(), 4u);
  EXPECT_EQ(spec.groups[1].key_prefixes[3], "prod@M@tp_rank:1@pcp0@dcp0@pp_rank:1@group:1");
}

TEST(VllmDescriptor, SlidingWindowGroupKeepsItsWindow) {
  json d = Descriptor();
  d["groups"].push_back({{"kind", "sliding_window"}, {"block_size", 32}, {"hash_block_size", 16},
                         {"sliding_window", 4096}, {"key_prefixes", {"p@group:1"}}});
  const vllm::LayoutSpec spec = ReadDescriptor(d.dump());
  ASSERT_EQ(spec.groups.size(), 2u);
  EXPECT_EQ(spec.groups[1].kind, vllm::GroupKind::kSlidingWindow);
  EXPECT_EQ(spec.groups[1].sliding_window, 4096u);
  EXPECT_EQ(spec.groups[1].group_id, 1u);  // its index: the descriptor gave none
}

TEST(VllmDescriptor, DefaultsLcmSeedAndTenant) {
  json d = Descriptor();
  d.erase("coordinator");
  d["hash"].erase("seed_policy");
  const vllm::LayoutSpec spec = ReadDescriptor(d.dump());
  EXPECT_EQ(spec.lcm_block_size, 0u);  // = main_event_block_size
  EXPECT_EQ(spec.python_hash_seed, "0");
  EXPECT_EQ(spec.tenant_id, "");
}

TEST(VllmDescriptor, SeedPolicyNamesTheSeedAndTenantIdIsRead) {
  json d = Descriptor();
  d["hash"]["seed_policy"] = "pythonhashseed-4294967295";
  d["hash"]["algorithm"] = "sha256_cbor";
  d["tenant_id"] = "team-a";
  const vllm::LayoutSpec spec = ReadDescriptor(d.dump());
  EXPECT_EQ(spec.python_hash_seed, "4294967295");
  EXPECT_EQ(spec.algorithm, vllm::HashAlgorithm::kSha256Cbor);
  EXPECT_EQ(spec.tenant_id, "team-a");
}

TEST(VllmDescriptor, NullOptionalFieldsAreAbsent) {
  json d = Descriptor();
  d["coordinator"]["lcm_block_size"] = nullptr;
  d["coordinator"]["speculative"] = nullptr;
  d["hash"]["seed_policy"] = nullptr;
  d["hash"]["digest_encoding"] = nullptr;
  d["hash"]["key_separator"] = nullptr;
  d["tenant_id"] = nullptr;
  d["groups"][0]["group_id"] = nullptr;
  const vllm::LayoutSpec spec = ReadDescriptor(d.dump());
  EXPECT_EQ(spec.lcm_block_size, 0u);
  EXPECT_EQ(spec.python_hash_seed, "0");
  EXPECT_EQ(spec.groups[0].group_id, 0u);
  json no_coordinator = Descriptor();
  no_coordinator["coordinator"] = nullptr;
  EXPECT_EQ(ReadDescriptor(no_coordinator.dump()).lcm_block_size, 0u);
}

TEST(VllmDescriptor, UnknownFieldsAreIgnored) {
  json d = Descriptor();
  d["future_top_level"] = {{"anything", {1, 2, 3}}};
  d["hash"]["future_hash_field"] = "x";
  d["groups"][0]["future_group_field"] = nullptr;
  d["coordinator"]["future_coordinator_field"] = true;
  ExpectQwenDescriptor(ReadDescriptor(d.dump()));
}

TEST(VllmDescriptor, InvalidJsonSaysSoWithTheParsersMessage) {
  const std::string error = DescriptorError(std::string(R"({"schema_version": 1)"));
  EXPECT_EQ(error.rfind("not valid JSON: ", 0), 0u) << error;
  EXPECT_NAMES(error, "parse error");
  EXPECT_NAMES(DescriptorError(std::string("[1]")), "expected a JSON object");
}

TEST(LayoutJsonFamily, TextWithANulByteIsNotJson) {
  // nlohmann alone would stop reading at the NUL and accept the descriptor before it.
  const std::string text = std::string(kDescriptor) + std::string("\0garbage", 8);
  EXPECT_EQ(DescriptorError(text), "not valid JSON: a NUL byte at offset " + std::to_string(std::string(kDescriptor).size()));
  EXPECT_FALSE(vllm::LooksLikeDescriptor(text));
  LayoutSpec spec;
  std::string error;
  EXPECT_FALSE(ParseRuntimeConfigJson(std::string("{\"page_size\": 16}\0", 18), &spec, &error));
  EXPECT_EQ(error, "not valid JSON: a NUL byte at offset 17");
}

TEST(VllmDescriptor, SchemaVersionOtherThanOneIsRefused) {
  json d = Descriptor();
  d["schema_version"] = 2;
  EXPECT_NAMES(DescriptorError(d), "schema_version: 2 is not supported");
  d.erase("schema_version");
  EXPECT_NAMES(DescriptorError(d), "schema_version: is missing");
}

TEST(VllmDescriptor, MissingHashAlgorithmIsRefused) {
  json d = Descriptor();
  d["hash"].erase("algorithm");
  EXPECT_NAMES(DescriptorError(d), "hash.algorithm: is missing");
  d.erase("hash");
  EXPECT_NAMES(DescriptorError(d), "hash: is missing");
}

TEST(VllmDescriptor, XxhashIsNotSupported) {
  for (const char* algorithm : {"xxhash", "xxhash_cbor"}) {
    json d = Descriptor();
    d["hash"]["algorithm"] = algorithm;
    const std::string error = DescriptorError(d);
    EXPECT_NAMES(error, "hash.algorithm: \"" + std::string(algorithm) + "\" is not supported");
  }
  json d = Descriptor();
  d["hash"]["algorithm"] = "md5";
  EXPECT_NAMES(DescriptorError(d), "hash.algorithm: \"md5\" is not a known algorithm");
}

TEST(VllmDescriptor, DigestEncodingOtherThanHexIsRefused) {
  json d = Descriptor();
  d["hash"]["digest_encoding"] = "base64";
  EXPECT_NAMES(DescriptorError(d), "hash.digest_encoding: \"base64\" is not supported");
}

TEST(VllmDescriptor, KeySeparatorOtherThanAtIsRefused) {
  json d = Descriptor();
  d["hash"]["key_separator"] = ":";
  EXPECT_NAMES(DescriptorError(d), "hash.key_separator: \":\" is not supported");
}

TEST(VllmDescriptor, EventHashesOtherThanTheLow64BitsAreRefused) {
  json d = Descriptor();
  d["hash"]["gpu_event_hash"] = "high64";
  EXPECT_NAMES(DescriptorError(d), "hash.gpu_event_hash: \"high64\" is not supported");
}

TEST(VllmDescriptor, SeedPolicyOfAnotherFormIsRefused) {
  for (const char* policy : {"random", "pythonhashseed-", "pythonhashseed--1", "pythonhashseed-1a",
                             "pythonhashseed-4294967296", "PYTHONHASHSEED-0"}) {
    json d = Descriptor();
    d["hash"]["seed_policy"] = policy;
    EXPECT_NAMES(DescriptorError(d), "hash.seed_policy: ");
  }
}

TEST(VllmDescriptor, SpeculativeCoordinatorIsRefused) {
  json d = Descriptor();
  d["coordinator"]["speculative"] = true;
  EXPECT_NAMES(DescriptorError(d), "coordinator.speculative: true is not supported");
}

TEST(VllmDescriptor, DropBlocksCoordinatorIsRefused) {
  json d = Descriptor();
  d["coordinator"]["drop_blocks"] = true;
  EXPECT_NAMES(DescriptorError(d), "coordinator.drop_blocks: true is not supported");
}

TEST(VllmDescriptor, UnknownKindIsRefused) {
  json d = Descriptor();
  d["groups"].push_back(d["groups"][0]);
  d["groups"][1]["kind"] = "linear";
  EXPECT_EQ(DescriptorError(d),
            "groups[1].kind: \"linear\" is not a known kind (full_attention, sliding_window, mamba)");
}

TEST(VllmDescriptor, BlockSizeNotAMultipleOfHashBlockSizeIsRefused) {
  json d = Descriptor();
  d["groups"][0]["block_size"] = 24;
  EXPECT_NAMES(DescriptorError(d), "groups[0].block_size: 24 is not a multiple of hash_block_size 16");
}

TEST(VllmDescriptor, GroupsWithDifferentHashBlockSizesAreRefused) {
  json d = json::parse(kHybrid);
  d["groups"][1]["hash_block_size"] = 32;
  EXPECT_NAMES(DescriptorError(d), "groups[1].hash_block_size: 32 differs");
}

TEST(VllmDescriptor, MainEventBlockSizeNotAMultipleOfHashBlockSizeIsRefused) {
  json d = Descriptor();
  d["main_event_block_size"] = 8;
  EXPECT_NAMES(DescriptorError(d), "main_event_block_size: 8 is not a multiple of hash_block_size 16");
}

TEST(VllmDescriptor, ZeroSizesAreRefused) {
  for (const char* field : {"block_size", "hash_block_size"}) {
    json d = Descriptor();
    d["groups"][0][field] = 0;
    EXPECT_NAMES(DescriptorError(d), "groups[0]." + std::string(field) + ": must be at least 1");
  }
  json d = Descriptor();
  d["main_event_block_size"] = 0;
  EXPECT_NAMES(DescriptorError(d), "main_event_block_size: must be at least 1");
  d.erase("main_event_block_size");
  EXPECT_NAMES(DescriptorError(d), "main_event_block_size: is missing");
}

TEST(VllmDescriptor, GroupsMustBeANonEmptyArray) {
  json d = Descriptor();
  d["groups"] = json::array();
  EXPECT_NAMES(DescriptorError(d), "groups: is empty");
  d["groups"] = {{"x", 1}};
  EXPECT_NAMES(DescriptorError(d), "groups: must be an array");
  d.erase("groups");
  EXPECT_NAMES(DescriptorError(d), "groups: is missing");
  d["groups"] = {1};
  EXPECT_NAMES(DescriptorError(d), "groups[0]: must be an object, got 1");
}

TEST(VllmDescriptor, KeyPrefixesMustBeNonEmptyStrings) {
  json d = Descriptor();
  d["groups"][0]["key_prefixes"] = json::array();
  EXPECT_NAMES(DescriptorError(d), "groups[0].key_prefixes: is empty");
  d["groups"][0]["key_prefixes"] = {"a", ""};
  EXPECT_NAMES(DescriptorError(d), "groups[0].key_prefixes[1]: is empty");
  d["groups"][0]["key_prefixes"] = {"a", 7};
  EXPECT_NAMES(DescriptorError(d), "groups[0].key_prefixes[1]: must be a string, got 7");
  d["groups"][0].erase("key_prefixes");
  EXPECT_NAMES(DescriptorError(d), "groups[0].key_prefixes: is missing");
}

TEST(VllmDescriptor, SlidingWindowGroupNeedsItsWindow) {
  json d = Descriptor();
  d["groups"][0]["kind"] = "sliding_window";
  EXPECT_NAMES(DescriptorError(d), "groups[0].sliding_window: is missing");
  d["groups"][0]["sliding_window"] = 0;
  EXPECT_NAMES(DescriptorError(d), "groups[0].sliding_window: must be at least 1");
}

TEST(VllmDescriptor, MambaGroupNeedsAlignMode) {
  json d = json::parse(kHybrid);
  d["groups"][1]["mamba_cache_mode"] = "all";
  EXPECT_NAMES(DescriptorError(d), "groups[1].mamba_cache_mode: \"all\" is not supported (want \"align\")");
  d["groups"][1]["mamba_cache_mode"] = nullptr;
  EXPECT_NAMES(DescriptorError(d), "groups[1].mamba_cache_mode: is missing");
}

TEST(VllmDescriptor, WrongTypesNameTheFieldAndTheValue) {
  const struct {
    const char* pointer;  // JSON pointer into the canonical descriptor
    json value;
    const char* expected;
  } cases[] = {
      {"/groups/0/block_size", "16", "groups[0].block_size: must be an unsigned 32-bit integer, got \"16\""},
      {"/groups/0/block_size", -16, "groups[0].block_size: must be an unsigned 32-bit integer, got -16"},
      {"/groups/0/block_size", 16.5, "groups[0].block_size: must be an unsigned 32-bit integer, got 16.5"},
      {"/groups/0/block_size", 4294967296, "groups[0].block_size: must be an unsigned 32-bit integer, got 4294967296"},
      {"/main_event_block_size", true, "main_event_block_size: must be an unsigned 32-bit integer, got true"},
      {"/schema_version", "1", "schema_version: must be an unsigned 32-bit integer, got \"1\""},
      {"/hash", "sha256", "hash: must be an object, got \"sha256\""},
      {"/hash/algorithm", 256, "hash.algorithm: must be a string, got 256"},
      {"/hash/seed_policy", 0, "hash.seed_policy: must be a string, got 0"},
      {"/coordinator", json::array(), "coordinator: must be an object, got []"},
      {"/coordinator/speculative", "no", "coordinator.speculative: must be true or false, got \"no\""},
      {"/coordinator/lcm_block_size", -1, "coordinator.lcm_block_size: must be an unsigned 32-bit integer, got -1"},
      {"/groups/0/kind", 0, "groups[0].kind: must be a string, got 0"},
      {"/groups/0/group_id", "0", "groups[0].group_id: must be an unsigned 32-bit integer, got \"0\""},
      {"/groups/0/key_prefixes", "p", "groups[0].key_prefixes: must be an array, got \"p\""},
      {"/groups/0/sliding_window", "4096", "groups[0].sliding_window: must be an unsigned 32-bit integer"},
      {"/groups/0/mamba_cache_mode", 1, "groups[0].mamba_cache_mode: must be a string, got 1"},
      {"/tenant_id", 5, "tenant_id: must be a string, got 5"},
  };
  for (const auto& c : cases) {
    json d = Descriptor();
    d[json::json_pointer(c.pointer)] = c.value;
    EXPECT_NAMES(DescriptorError(d), c.expected);
  }
}

TEST(VllmDescriptor, WrappedDescriptorsErrorsStartWithTheWrapper) {
  json d = Descriptor();
  d["groups"][0]["kind"] = "linear";
  const std::string error = DescriptorError(json{{"vllm_mooncake_store", d}});
  EXPECT_EQ(error.rfind("vllm_mooncake_store.groups[0].kind: ", 0), 0u) << error;
  EXPECT_NAMES(DescriptorError(json{{"vllm_mooncake_store", 3}}), "vllm_mooncake_store: must be an object, got 3");
}

TEST(VllmDescriptor, RefusedDescriptorLeavesTheSpecAlone) {
  vllm::LayoutSpec spec;
  spec.tenant_id = "kept";
  std::string error;
  json d = Descriptor();
  d["groups"][0]["kind"] = "linear";
  EXPECT_FALSE(vllm::ParseDescriptorJson(d.dump(), &spec, &error));
  EXPECT_EQ(spec.tenant_id, "kept");
  EXPECT_TRUE(spec.groups.empty());
}

constexpr const char* kSglangConfig = R"({"page_size": 64, "tp_size": 8, "pp_size": 2, "tp_lcm_size": 16,
  "is_mla_model": true, "is_eagle": true, "should_split_heads": true,
  "extra_backend_tag": "tag", "key_prefix": "kp", "tenant_id": "t1",
  "model_path": "ignored/unknown", "pools": [
    {"suffixes": ["__k", "__v"]},
    {"suffixes": ["__swa"], "hit_policy": "trailing_pages", "trailing_pages": 4},
    {"suffixes": ["__x"], "hit_policy": "all_pages", "trailing_pages": null}]})";

LayoutSpec ReadConfig(const std::string& text) {
  LayoutSpec spec;
  std::string error;
  EXPECT_TRUE(ParseRuntimeConfigJson(text, &spec, &error)) << error << "\n" << text;
  return spec;
}

std::string ConfigError(const std::string& text) {
  LayoutSpec spec;
  std::string error;
  EXPECT_FALSE(ParseRuntimeConfigJson(text, &spec, &error)) << text;
  EXPECT_FALSE(error.empty());
  return error;
}

TEST(SglangRuntimeConfig, ReadsEveryField) {
  const LayoutSpec spec = ReadConfig(kSglangConfig);
  EXPECT_EQ(spec.page_size, 64u);
  EXPECT_EQ(spec.tp_size, 8u);
  EXPECT_EQ(spec.pp_size, 2u);
  EXPECT_EQ(spec.tp_lcm_size, 16u);
  EXPECT_TRUE(spec.is_mla_model);
  EXPECT_TRUE(spec.is_eagle);
  EXPECT_TRUE(spec.should_split_heads);
  EXPECT_EQ(spec.extra_backend_tag, "tag");
  EXPECT_EQ(spec.key_prefix, "kp");
  EXPECT_EQ(spec.tenant_id, "t1");
  ASSERT_EQ(spec.pools.size(), 3u);
  EXPECT_EQ(spec.pools[0].suffixes, (std::vector<std::string>{"__k", "__v"}));
  EXPECT_EQ(spec.pools[0].hit_policy, HitPolicy::kAllPages);
  EXPECT_EQ(spec.pools[1].suffixes, (std::vector<std::string>{"__swa"}));
  EXPECT_EQ(spec.pools[1].hit_policy, HitPolicy::kTrailingPages);
  EXPECT_EQ(spec.pools[1].trailing_pages, 4u);
  EXPECT_EQ(spec.pools[2].hit_policy, HitPolicy::kAllPages);
}

TEST(SglangRuntimeConfig, NullsAndAbsentFieldsKeepTheDefaults) {
  const LayoutSpec spec =
      ReadConfig(R"({"page_size": 16, "tp_size": null, "tp_lcm_size": null, "extra_backend_tag": null, "pools": null})");
  const LayoutSpec defaults;
  EXPECT_EQ(spec.page_size, 16u);
  EXPECT_EQ(spec.tp_size, defaults.tp_size);
  EXPECT_EQ(spec.pp_size, defaults.pp_size);
  EXPECT_EQ(spec.tp_lcm_size, 0u);
  EXPECT_FALSE(spec.is_mla_model);
  EXPECT_EQ(spec.extra_backend_tag, "");
  EXPECT_TRUE(spec.pools.empty());
}

TEST(SglangRuntimeConfig, MergesOntoAGivenSpec) {
  LayoutSpec spec;
  spec.page_size = 32;
  spec.tp_size = 4;
  spec.tenant_id = "kept";
  spec.pools.push_back(PoolSpec{{"__old"}, HitPolicy::kAllPages, 0});
  std::string error;
  ASSERT_TRUE(ParseRuntimeConfigJson(R"({"tp_size": 2, "pools": [{"suffixes": ["__new"]}]})", &spec, &error)) << error;
  EXPECT_EQ(spec.page_size, 32u);  // a page size already given satisfies the requirement
  EXPECT_EQ(spec.tp_size, 2u);
  EXPECT_EQ(spec.tenant_id, "kept");
  ASSERT_EQ(spec.pools.size(), 1u);  // given pools replace the spec's
  EXPECT_EQ(spec.pools[0].suffixes, std::vector<std::string>{"__new"});
}

TEST(SglangRuntimeConfig, RefusedConfigLeavesTheSpecAlone) {
  LayoutSpec spec;
  spec.page_size = 32;
  std::string error;
  EXPECT_FALSE(ParseRuntimeConfigJson(R"({"page_size": 64, "tenant_id": 1})", &spec, &error));
  EXPECT_EQ(spec.page_size, 32u);
}

TEST(SglangRuntimeConfig, BadJsonAndBadFieldsNameTheField) {
  const struct {
    const char* json;
    const char* expected;
  } cases[] = {
      {R"({"page_size": 64)", "not valid JSON: "},
      {R"([64])", "expected a JSON object"},
      {R"({})", "page_size is missing"},
      {R"({"page_size": null})", "page_size is missing"},
      {R"({"page_size": -1})", "page_size must be an unsigned 32-bit integer, got -1"},
      {R"({"page_size": 4294967296})", "page_size must be an unsigned 32-bit integer, got 4294967296"},
      {R"({"page_size": 1.5})", "page_size must be an unsigned 32-bit integer, got 1.5"},
      {R"({"page_size": 64, "tp_size": "8"})", "tp_size must be an unsigned 32-bit integer, got \"8\""},
      {R"({"page_size": 64, "pp_size": false})", "pp_size must be an unsigned 32-bit integer, got false"},
      {R"({"page_size": 64, "tp_lcm_size": [16]})", "tp_lcm_size must be an unsigned 32-bit integer, got [...]"},
      {R"({"page_size": 64, "is_mla_model": 1})", "is_mla_model must be true or false, got 1"},
      {R"({"page_size": 64, "is_eagle": "yes"})", "is_eagle must be true or false, got \"yes\""},
      {R"({"page_size": 64, "should_split_heads": 0})", "should_split_heads must be true or false, got 0"},
      {R"({"page_size": 64, "extra_backend_tag": {}})", "extra_backend_tag must be a string, got {}"},
      {R"({"page_size": 64, "key_prefix": 7})", "key_prefix must be a string, got 7"},
      {R"({"page_size": 64, "tenant_id": true})", "tenant_id must be a string, got true"},
      {R"({"page_size": 64, "pools": {}})", "pools must be an array, got {}"},
      {R"({"page_size": 64, "pools": [3]})", "pools[0] must be an object, got 3"},
      {R"({"page_size": 64, "pools": [{}]})", "pools[0].suffixes is missing"},
      {R"({"page_size": 64, "pools": [{"suffixes": "__k"}]})",
       "pools[0].suffixes must be an array of strings, got \"__k\""},
      {R"({"page_size": 64, "pools": [{"suffixes": ["a", 2]}]})", "pools[0].suffixes[1] must be a string, got 2"},
      {R"({"page_size": 64, "pools": [{"suffixes": ["a"]}, {"suffixes": ["b"], "hit_policy": "some"}]})",
       R"(pools[1].hit_policy must be "all_pages" or "trailing_pages", got "some")"},
      {R"({"page_size": 64, "pools": [{"suffixes": ["a"], "hit_policy": 1}]})",
       "pools[0].hit_policy must be a string, got 1"},
      {R"({"page_size": 64, "pools": [{"suffixes": ["a"]}, {"suffixes": ["b"], "hit_policy": "trailing_pages"}]})",
       R"(pools[1].trailing_pages is missing (required by hit_policy "trailing_pages"))"},
      // Checked whatever the policy, as the Rust reader does.
      {R"({"page_size": 64, "pools": [{"suffixes": ["a"], "trailing_pages": -2}]})",
       "pools[0].trailing_pages must be an unsigned 32-bit integer, got -2"},
  };
  for (const auto& c : cases) EXPECT_NAMES(ConfigError(c.json), c.expected) << c.json;
}

TEST(LayoutJsonFamily, DescriptorsLookLikeDescriptors) {
  EXPECT_TRUE(vllm::LooksLikeDescriptor(kDescriptor));
  EXPECT_TRUE(vllm::LooksLikeDescriptor(kHybrid));
  EXPECT_TRUE(vllm::LooksLikeDescriptor(json{{"vllm_mooncake_store", Descriptor()}}.dump()));
  EXPECT_TRUE(vllm::LooksLikeDescriptor(R"({"vllm_mooncake_store": {}})"));  // refused later, by name
  // A descriptor missing a required field is still one (refused as one, naming the field).
  EXPECT_TRUE(vllm::LooksLikeDescriptor(R"({"schema_version": 1})"));
  EXPECT_TRUE(vllm::LooksLikeDescriptor(R"({"main_event_block_size": 16, "groups": []})"));
}

TEST(LayoutJsonFamily, SglangConfigsAndGarbageDoNotLookLikeDescriptors) {
  EXPECT_FALSE(vllm::LooksLikeDescriptor(kSglangConfig));
  EXPECT_FALSE(vllm::LooksLikeDescriptor(R"({"page_size": 64})"));
  EXPECT_FALSE(vllm::LooksLikeDescriptor(R"({"page_size": 64, "groups": []})"));
  EXPECT_FALSE(vllm::LooksLikeDescriptor(R"([{"schema_version": 1, "groups": []}])"));
  EXPECT_FALSE(vllm::LooksLikeDescriptor(""));
  EXPECT_FALSE(vllm::LooksLikeDescriptor("not json"));
  EXPECT_FALSE(vllm::LooksLikeDescriptor(R"({"schema_version": 1, "groups": [)"));
  EXPECT_FALSE(vllm::LooksLikeDescriptor(std::string("\0\xff{", 3)));
}


// A field the reader does not know is ignored, as in 1.x, but named in one
// warning each, with the known field it most likely meant (#37).
TEST(LayoutJsonUnknownFields, EachIsNamedOnceWithTheFieldItMostLikelyMeant) {
  testing::LogCapture log;
  LayoutSpec spec;
  std::string error;
  ASSERT_TRUE(ParseRuntimeConfigJson(R"({"page_size": 64, "tp_sz": 8, "model_path": "m",
      "pools": [{"suffixes": ["__k"], "hit_polcy": "trailing_pages"}]})", &spec, &error)) << error;
  EXPECT_EQ(spec.tp_size, 1u);  // the typo changed nothing
  EXPECT_EQ(spec.pools.at(0).hit_policy, HitPolicy::kAllPages);
  const std::vector<std::string> warnings = log.At(LogLevel::kWarn);
  ASSERT_EQ(warnings.size(), 3u) << ::testing::PrintToString(warnings);
  EXPECT_EQ(log.Count(LogLevel::kWarn,
                      "SGLang runtime config: unknown field \"tp_sz\" ignored (did you mean \"tp_size\"?)"), 1u);
  EXPECT_EQ(log.Count(LogLevel::kWarn, "SGLang runtime config: unknown field \"model_path\" ignored"), 1u);
  EXPECT_EQ(log.Count(LogLevel::kWarn, "did you mean \"model"), 0u);
  EXPECT_EQ(log.Count(LogLevel::kWarn, "unknown field \"pools[0].hit_polcy\" ignored (did you mean \"hit_policy\"?)"),
            1u);
}

TEST(LayoutJsonUnknownFields, TheDocumentedDescriptorWarnsOfNothingAndATypoInItIsNamed) {
  {
    testing::LogCapture log;
    vllm::LayoutSpec spec;
    std::string error;
    ASSERT_TRUE(vllm::ParseDescriptorJson(kDescriptor, &spec, &error)) << error;
    EXPECT_TRUE(log.At(LogLevel::kWarn).empty()) << ::testing::PrintToString(log.At(LogLevel::kWarn));
  }
  json descriptor = Descriptor();
  descriptor["hash"]["seed_polcy"] = "pythonhashseed-7";
  descriptor["tenant_ids"] = "t";
  descriptor["groups"][0]["sliding_windw"] = 128;
  descriptor = json{{"vllm_mooncake_store", descriptor}, {"worker", "anything"}};
  testing::LogCapture log;
  vllm::LayoutSpec spec;
  std::string error;
  ASSERT_TRUE(vllm::ParseDescriptorJson(descriptor.dump(), &spec, &error)) << error;
  EXPECT_EQ(spec.python_hash_seed, "0");
  EXPECT_EQ(log.At(LogLevel::kWarn).size(), 3u) << ::testing::PrintToString(log.At(LogLevel::kWarn));
  EXPECT_EQ(log.Count(LogLevel::kWarn, "vLLM descriptor: unknown field \"vllm_mooncake_store.hash.seed_polcy\" "
                                       "ignored (did you mean \"seed_policy\"?)"), 1u);
  EXPECT_EQ(log.Count(LogLevel::kWarn, "\"vllm_mooncake_store.tenant_ids\" ignored (did you mean \"tenant_id\"?)"),
            1u);
  EXPECT_EQ(log.Count(LogLevel::kWarn,
                      "\"vllm_mooncake_store.groups[0].sliding_windw\" ignored (did you mean \"sliding_window\"?)"),
            1u);
}

TEST(LayoutJsonUnknownFields, AFloodOfThemIsCutShortAndCounted) {
  json config = {{"page_size", 16}};
  for (int i = 0; i < 40; ++i) config["field_" + std::to_string(i)] = i;
  testing::LogCapture log;
  LayoutSpec spec;
  std::string error;
  ASSERT_TRUE(ParseRuntimeConfigJson(config.dump(), &spec, &error)) << error;
  EXPECT_EQ(log.Count(LogLevel::kWarn, "unknown field \"field_"), 16u);
  EXPECT_EQ(log.Count(LogLevel::kWarn, "24 more unknown fields in the top level ignored"), 1u);
}

TEST(LayoutJsonUnknownFields, TheClosestFieldIsWithinTwoEditsAndHalfTheName) {
  EXPECT_EQ(EditDistance("tp_sz", "tp_size"), 2u);
  EXPECT_EQ(ClosestKnownField("tp_sz", {"tp_size", "pp_size"}), "tp_size");
  EXPECT_EQ(ClosestKnownField("pp_sise", {"tp_size", "pp_size"}), "pp_size");
  EXPECT_EQ(ClosestKnownField("ab", {"tp_size", "xy"}), "");  // 2 edits of 2 letters: a guess, not a typo
  EXPECT_EQ(ClosestKnownField("model_path", {"page_size", "key_prefix"}), "");
}

}  // namespace
}  // namespace sci
