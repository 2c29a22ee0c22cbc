// The second-generation publisher's bytes (testdata/mooncake-publisher/
// media-and-cleared: per-medium stored / removed, upserts, deletions, a vLLM
// connector key, tenant `cleared`): every message decodes to what
// expected.jsonl says, and applied under either residency rule, every key and
// the SGLang page after every message are what truth.jsonl says.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "golden_capture.h"
#include "index/index.h"
#include "sglang/layout.h"
#include "sglang/page_query.h"
#include "vllm/block_hash.h"
#include "vllm/chunk_query.h"
#include "vllm/layout.h"
#include "wire/message_apply.h"
#include "wire/wire_decoder.h"

namespace sci {
namespace {

constexpr const char* kCapture = "media-and-cleared";
// The capture's SGLang page: the first page of tokens 1..10 at page size 4,
// tp 2 MHA (its README).
constexpr std::string_view kPageHash = "cf97adeedb59e05bfd73a2b4c2a8885708c4f4f70c84c64b27120e72ab733b72";

std::string StringOrEmpty(const nlohmann::json& value) { return value.is_null() ? "" : value.get<std::string>(); }

std::vector<nlohmann::json> ParseLines(const std::string& file) {
  std::vector<nlohmann::json> lines;
  std::string text;
  EXPECT_TRUE(sci_test::ReadFile(sci_test::CaptureDir(kCapture) + "/" + file, &text)) << file;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) lines.push_back(nlohmann::json::parse(text.substr(start, end - start)));
    start = end + 1;
  }
  return lines;
}

TEST(MediaAndCleared, EveryMessageDecodesToTheExpectedEvents) {
  const std::vector<sci_test::GoldenMessage> messages = sci_test::LoadCapture(kCapture);
  const std::vector<nlohmann::json> expected = ParseLines("expected.jsonl");
  ASSERT_EQ(messages.size(), 13u);
  ASSERT_EQ(expected.size(), messages.size());
  DecodedMessage decoded;
  for (size_t m = 0; m < messages.size(); ++m) {
    SCOPED_TRACE(messages[m].name);
    const auto frames = messages[m].FrameSpans();
    std::string error;
    ASSERT_TRUE(DecodeMessage(frames, &decoded, &error)) << error;
    EXPECT_EQ(decoded.format, WireFormat::kMooncake);
    EXPECT_EQ(decoded.sequence, expected[m]["sequence"].get<uint64_t>());
    EXPECT_EQ(decoded.unknown_event_types, 0u);
    const nlohmann::json& events = expected[m]["events"];
    ASSERT_EQ(decoded.events.size(), events.size());
    for (size_t e = 0; e < events.size(); ++e) {
      const Event& got = decoded.events[e];
      const std::string type = events[e]["event_type"].get<std::string>();
      const EventKind want = type == "stored"    ? EventKind::kStored
                             : type == "removed" ? EventKind::kRemoved
                             : type == "cleared" ? EventKind::kTenantCleared
                                                 : EventKind::kIgnored;
      EXPECT_EQ(got.kind, want) << type;
      EXPECT_EQ(got.object_key, StringOrEmpty(events[e]["object_key"]));
      EXPECT_EQ(got.group_id, StringOrEmpty(events[e]["group_id"]));
      EXPECT_EQ(got.tenant_id, StringOrEmpty(events[e]["tenant_id"]));
      EXPECT_EQ(got.medium, StringOrEmpty(events[e]["medium"]));
    }
  }
}

struct Rule {
  Residency residency;
  const char* truth_field;      // truth.jsonl's key set under this rule
  uint64_t medium_removals_kept;  // removals of one medium that left another
};

class MediaAndClearedRule : public ::testing::TestWithParam<Rule> {};

// After every message: each key named anywhere in the capture is present
// exactly when the truth says so, the key count agrees, and the SGLang page
// (its four keys) is a hit exactly when all four are in the truth.
TEST_P(MediaAndClearedRule, EveryKeyAndThePageMatchTheTruthAfterEveryMessage) {
  const Rule rule = GetParam();
  const std::vector<sci_test::GoldenMessage> messages = sci_test::LoadCapture(kCapture);
  const std::vector<nlohmann::json> expected = ParseLines("expected.jsonl");
  const std::vector<nlohmann::json> truth = ParseLines("truth.jsonl");
  ASSERT_EQ(truth.size(), messages.size());

  std::set<std::pair<std::string, std::string>> named;  // (tenant, key)
  for (const nlohmann::json& line : expected) {
    for (const nlohmann::json& e : line["events"]) {
      if (!e["object_key"].is_null()) named.insert({e["tenant_id"].get<std::string>(), e["object_key"].get<std::string>()});
    }
  }
  ASSERT_EQ(named.size(), 6u);

  LayoutSpec spec;
  spec.page_size = 4;
  spec.tp_size = 2;
  std::string error;
  const std::unique_ptr<const Layout> layout = Layout::Create(spec, &error);
  ASSERT_NE(layout, nullptr) << error;
  ASSERT_EQ(layout->KeysFor(std::string(kPageHash), 0, 1).size(), 4u);
  const std::vector<uint32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};

  IndexOptions options;
  options.residency = rule.residency;
  Index index(options);
  DecodedMessage scratch;
  for (size_t m = 0; m < messages.size(); ++m) {
    SCOPED_TRACE(messages[m].name);
    const auto frames = messages[m].FrameSpans();
    ASSERT_TRUE(ApplyMessage(index, frames, scratch, &error)) << error;

    std::set<std::string> present;  // "<tenant>/<key>"
    const nlohmann::json& want = truth[m][rule.truth_field];
    if (want.is_array()) {
      for (const nlohmann::json& key : want) present.insert(key.get<std::string>());
    } else {
      for (const auto& [key, media] : want.items()) present.insert(key);
    }
    for (const auto& [tenant, key] : named) {
      EXPECT_EQ(index.Contains(tenant, key), present.count(tenant + "/" + key) == 1) << tenant << "/" << key;
    }
    EXPECT_EQ(index.GetStats().keys, present.size());

    bool page_present = true;
    for (const std::string& key : layout->KeysFor(std::string(kPageHash), 0, 1)) {
      page_present = page_present && present.count("default/" + key) == 1;
    }
    uint8_t hits[2] = {};
    const PageQueryResult result = CheckPages(index, *layout, tokens, 4, hits);
    ASSERT_EQ(result.n_pages, 2u);
    EXPECT_EQ(hits[0] == 1, page_present);
    EXPECT_EQ(hits[1], 0);  // tokens 5..8: nobody stored it
    // The prefix query says the same of the first page.
    EXPECT_EQ(CheckPrefix(index, *layout, tokens, 4).prefix_hits, page_present ? 1u : 0u);
  }
  const Stats stats = index.GetStats();
  EXPECT_EQ(stats.tenant_clears, 2u);
  EXPECT_EQ(stats.medium_removals_kept, rule.medium_removals_kept);
  EXPECT_EQ(stats.sequence_gaps, 0u);
  EXPECT_EQ(stats.malformed_messages, 0u);
}

// msg0008 carries a key of vLLM's MooncakeStoreConnector (tenant-a, TP rank
// 1, the chunk of tokens 0..15 hashed with sha256 and PYTHONHASHSEED 0: the
// doc's worked example 1). Its group_id on the wire is "0", the KV-group
// index the second-generation master writes over the connector's
// "vllm-mooncake-store:..." label: a vLLM layout whose one key prefix is
// that key's answers the chunk from the key alone, after every message,
// under either residency rule; a layout needing TP rank 0 too, or asking in
// the default tenant, never hits; and while the key is present the index
// resolves the digest from the event's 64-bit hash (seq_hashes).
TEST(MediaAndCleared, TheVllmConnectorKeyAnswersItsChunkFromTheKey) {
  const std::vector<sci_test::GoldenMessage> messages = sci_test::LoadCapture(kCapture);
  const std::vector<nlohmann::json> expected = ParseLines("expected.jsonl");
  const std::vector<nlohmann::json> truth = ParseLines("truth.jsonl");
  ASSERT_EQ(messages.size(), 13u);

  // The one event with the connector's fields.
  nlohmann::json vllm_event;
  size_t vllm_message = messages.size();
  for (size_t m = 0; m < expected.size(); ++m) {
    for (const nlohmann::json& e : expected[m]["events"]) {
      if (e.contains("connector_block_hash")) vllm_event = e, vllm_message = m;
    }
  }
  ASSERT_EQ(vllm_message, 8u);
  ASSERT_EQ(messages[vllm_message].name, "msg0008");
  const std::string key = vllm_event["object_key"].get<std::string>();
  const std::string tenant = vllm_event["tenant_id"].get<std::string>();
  const std::string chunk_hex = vllm_event["connector_block_hash"].get<std::string>();
  const uint64_t event_hash = vllm_event["seq_hashes"][0].get<uint64_t>();
  EXPECT_EQ(vllm_event["group_id"].get<std::string>(), "0") << "the KV-group index, not the connector's label";
  EXPECT_EQ(tenant, "tenant-a");
  ASSERT_EQ(key.size(), key.rfind('@') + 1 + 64);
  const std::string prefix = key.substr(0, key.rfind('@'));
  EXPECT_EQ(prefix, "prod@Qwen3-8B@tp_rank:1@pcp0@dcp0@pp_rank:0@group:0");
  EXPECT_EQ(key.substr(prefix.size() + 1), chunk_hex);

  // The chunk is that of tokens 0..15.
  std::vector<uint32_t> tokens(17);
  std::iota(tokens.begin(), tokens.end(), 0u);
  const std::vector<vllm::BlockDigest> chain = vllm::HashChain(vllm::HashAlgorithm::kSha256, "0", tokens, 16);
  ASSERT_EQ(chain.size(), 1u);
  std::string hex(64, '\0');
  ToHex(chain[0], hex.data());
  ASSERT_EQ(hex, chunk_hex);
  ASSERT_EQ(vllm::EventHashOf(chain[0]), event_hash);

  auto make = [](std::vector<std::string> prefixes, std::string layout_tenant) {
    vllm::LayoutSpec spec;
    spec.main_event_block_size = 16;
    spec.tenant_id = std::move(layout_tenant);
    vllm::GroupSpec group;
    group.block_size = 16;
    group.hash_block_size = 16;
    group.key_prefixes = std::move(prefixes);
    spec.groups.push_back(group);
    std::string error;
    auto layout = vllm::Layout::Create(spec, &error);
    EXPECT_NE(layout, nullptr) << error;
    return layout;
  };
  const auto rank1 = make({prefix}, tenant);
  const auto both_ranks = make({"prod@Qwen3-8B@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0", prefix}, tenant);
  const auto default_tenant = make({prefix}, "");
  ASSERT_TRUE(rank1 && both_ranks && default_tenant);
  const std::vector<uint64_t> event_hashes = {event_hash};

  for (const Residency residency : {Residency::kObject, Residency::kPerMedium}) {
    SCOPED_TRACE(residency == Residency::kObject ? "object rule" : "per-medium rule");
    IndexOptions options = vllm::VllmIndexOptions();
    options.residency = residency;
    Index index(options);
    DecodedMessage scratch;
    std::string error;
    bool ever_present = false;
    for (size_t m = 0; m < messages.size(); ++m) {
      SCOPED_TRACE(messages[m].name);
      const auto frames = messages[m].FrameSpans();
      ASSERT_TRUE(ApplyMessage(index, frames, scratch, &error)) << error;
      const nlohmann::json& want = truth[m][residency == Residency::kObject ? "present_object_rule" : "present_per_medium"];
      const std::string named = tenant + "/" + key;
      const bool present = want.is_array() ? std::find(want.begin(), want.end(), named) != want.end() : want.contains(named);
      ever_present = ever_present || present;
      EXPECT_EQ(present, m == vllm_message) << "the truth: stored by msg0008, cleared with tenant-a by msg0009";

      const size_t want_blocks = present ? 1 : 0;
      EXPECT_EQ(vllm::CheckPrefix(index, *rank1, vllm::ChainSource::Tokens(tokens), 16).prefix_hits, want_blocks);
      EXPECT_EQ(vllm::CheckPrefix(index, *rank1, vllm::ChainSource::EventHashes(event_hashes, 17), 16).prefix_hits,
                want_blocks);
      EXPECT_EQ(vllm::CheckPrefix(index, *rank1, vllm::ChainSource::Digests(chain[0].data(), 1, 17), 16).prefix_hits,
                want_blocks);
      uint8_t hits[1] = {9};
      vllm::CheckBlocks(index, *rank1, vllm::ChainSource::Tokens(tokens), 16, hits);
      EXPECT_EQ(hits[0], present ? 1 : 0);
      // TP rank 0's object was never stored; the key is tenant-a's.
      EXPECT_EQ(vllm::CheckPrefix(index, *both_ranks, vllm::ChainSource::Tokens(tokens), 16).prefix_hits, 0u);
      EXPECT_EQ(vllm::CheckPrefix(index, *default_tenant, vllm::ChainSource::Tokens(tokens), 16).prefix_hits, 0u);

      if (present) {
        std::array<uint8_t, 32> digest{};
        ASSERT_TRUE(index.DigestOfEventHash(TenantSeed("tenant-a"), event_hash, &digest)) << "the key's digest, by its low 64 bits";
        EXPECT_EQ(digest, chain[0]);
      } else if (m < vllm_message) {
        std::array<uint8_t, 32> digest{};
        EXPECT_FALSE(index.DigestOfEventHash(TenantSeed("tenant-a"), event_hash, &digest)) << "no key carries it yet";
      }
    }
    EXPECT_TRUE(ever_present);
  }
}

INSTANTIATE_TEST_SUITE_P(
    BothRules, MediaAndClearedRule,
    ::testing::Values(Rule{Residency::kObject, "present_object_rule", 0},
                      // _0_k and _0_v evicted from memory (kept on disk), the
                      // first removal of the upsert of _1_k and of the deletion
                      // of _1_v, and plain-key-1's "removed cpu".
                      Rule{Residency::kPerMedium, "present_per_medium", 5}),
    [](const ::testing::TestParamInfo<Rule>& info) {
      return info.param.residency == Residency::kObject ? std::string("ObjectRule") : std::string("PerMediumRule");
    });

}  // namespace
}  // namespace sci
