// The second-generation publisher's bytes (testdata/mooncake-publisher/
// media-and-cleared: per-medium stored / removed, upserts, deletions, a vLLM
// connector key, tenant `cleared`): every message decodes to what
// expected.jsonl says, and applied under either residency rule, every key and
// the SGLang page after every message are what truth.jsonl says.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "golden_capture.h"
#include "index/index.h"
#include "sglang/layout.h"
#include "sglang/page_query.h"
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
