// The real publisher's bytes: every golden message decodes to exactly what
// expected.jsonl says, and applying a capture leaves the index in the state
// docs/index-semantics.md implies.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "golden_capture.h"
#include "index/index.h"
#include "wire/message_apply.h"
#include "wire/wire_decoder.h"

namespace sci {
namespace {

using sci_test::GoldenMessage;
using sci_test::LoadCapture;
using sci_test::LoadExpectedLines;

constexpr std::string_view kPageHash = "cf97adeedb59e05bfd73a2b4c2a8885708c4f4f70c84c64b27120e72ab733b72";

std::string Hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : bytes) {
    hex.push_back(digits[c >> 4]);
    hex.push_back(digits[c & 15]);
  }
  return hex;
}

std::string_view KindName(EventKind kind) {
  switch (kind) {
    case EventKind::kStored: return "stored";
    case EventKind::kRemoved: return "removed";
    case EventKind::kAllCleared: return "all-cleared";
    case EventKind::kTenantCleared: return "cleared";
    case EventKind::kIgnored: return "ignored";
  }
  return "?";
}

std::string StringOrEmpty(const nlohmann::json& value) { return value.is_null() ? "" : value.get<std::string>(); }

class GoldenCapture : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenCapture, EveryMessageDecodesToExactlyTheExpectedEvents) {
  const std::vector<GoldenMessage> messages = LoadCapture(GetParam());
  const std::vector<std::string> expected = LoadExpectedLines(GetParam());
  ASSERT_FALSE(messages.empty()) << "no capture in " << sci_test::CaptureDir(GetParam());
  ASSERT_EQ(messages.size(), expected.size());

  DecodedMessage decoded;
  for (size_t m = 0; m < messages.size(); ++m) {
    SCOPED_TRACE(messages[m].name);
    const nlohmann::json want = nlohmann::json::parse(expected[m]);
    ASSERT_EQ(want["message"], messages[m].name);
    const auto frames = messages[m].FrameSpans();
    std::string error;
    ASSERT_TRUE(DecodeMessage(frames, &decoded, &error)) << error;

    EXPECT_EQ(decoded.format, WireFormat::kMooncake);
    EXPECT_EQ(Hex(decoded.topic), want["topic_hex"].get<std::string>());
    EXPECT_EQ(decoded.sequence, want["sequence"].get<uint64_t>());
    EXPECT_EQ(decoded.timestamp_ms, want["timestamp_ms"].get<int64_t>());
    EXPECT_TRUE(decoded.has_dp_rank);
    EXPECT_EQ(decoded.dp_rank, want["dp_rank"].get<uint64_t>());
    EXPECT_EQ(decoded.unknown_event_types, 0u);

    const nlohmann::json& events = want["events"];
    ASSERT_EQ(decoded.events.size(), events.size());
    for (size_t e = 0; e < events.size(); ++e) {
      SCOPED_TRACE(e);
      const Event& got = decoded.events[e];
      EXPECT_EQ(KindName(got.kind), events[e]["event_type"].get<std::string>());
      EXPECT_EQ(got.object_key, StringOrEmpty(events[e]["object_key"]));
      EXPECT_EQ(got.group_id, StringOrEmpty(events[e]["group_id"]));
      EXPECT_EQ(got.tenant_id, StringOrEmpty(events[e]["tenant_id"]));
      EXPECT_EQ(got.medium, StringOrEmpty(events[e]["medium"]));
    }
  }
}

// A model of the semantics small enough to trust by reading: a set of
// (tenant, key), cleared by a gap, with the stores of a run's first batch
// withheld.
TEST_P(GoldenCapture, ApplyingTheCaptureLeavesWhatASimpleModelPredicts) {
  const std::vector<GoldenMessage> messages = LoadCapture(GetParam());
  const std::vector<std::string> expected = LoadExpectedLines(GetParam());
  ASSERT_EQ(messages.size(), expected.size());

  std::set<std::pair<std::string, std::string>> model, ever_named;
  bool has_last = false;
  uint64_t last = 0, gaps = 0;
  Index index;
  DecodedMessage scratch;
  for (size_t m = 0; m < messages.size(); ++m) {
    const nlohmann::json want = nlohmann::json::parse(expected[m]);
    const uint64_t sequence = want["sequence"].get<uint64_t>();
    const bool gap = has_last && sequence != last + 1 && sequence != last;
    if (gap) {
      ++gaps;
      model.clear();
    }
    // The batch that begins a run applies only its removals, unless it is a
    // publisher's first (index-semantics.md: the early gap signal).
    const bool withhold_stores = (gap || !has_last) && sequence != 1;
    if (!has_last || sequence != last) {
      for (const nlohmann::json& e : want["events"]) {
        std::pair<std::string, std::string> key{e["tenant_id"].get<std::string>(), e["object_key"].get<std::string>()};
        ever_named.insert(key);
        if (e["event_type"] == "stored" && !withhold_stores) model.insert(key);
        if (e["event_type"] == "removed") model.erase(key);
      }
    }
    has_last = true;
    last = sequence;

    const auto frames = messages[m].FrameSpans();
    std::string error;
    ASSERT_TRUE(ApplyMessage(index, frames, scratch, &error)) << messages[m].name << ": " << error;
  }

  const Stats stats = index.GetStats();
  EXPECT_EQ(stats.keys, model.size());
  EXPECT_EQ(stats.sequence_gaps, gaps);
  EXPECT_EQ(stats.malformed_messages, 0u);
  EXPECT_EQ(stats.last_sequence, last);
  for (const auto& [tenant, key] : ever_named) {
    EXPECT_EQ(index.Contains(tenant, key), model.count({tenant, key}) == 1) << tenant << "/" << key;
  }
}

INSTANTIATE_TEST_SUITE_P(AllCaptures, GoldenCapture, ::testing::ValuesIn(sci_test::kCaptures),
                         [](const ::testing::TestParamInfo<const char*>& info) { return sci_test::CaptureTestName(info.param); });

// ---- the captures one by one, against the semantics ----

class GoldenApply : public ::testing::Test {
 protected:
  void ApplyAll(const std::string& capture) {
    for (const GoldenMessage& message : LoadCapture(capture)) Apply(message);
  }
  void Apply(const GoldenMessage& message) {
    const auto frames = message.FrameSpans();
    std::string error;
    ASSERT_TRUE(ApplyMessage(index_, frames, scratch_, &error)) << message.name << ": " << error;
  }
  static Fingerprint Group(std::string_view group, std::string_view tenant = {}) {
    return FingerprintOf(TenantSeed(tenant), group);
  }

  Index index_;
  DecodedMessage scratch_;
};

TEST_F(GoldenApply, BasicLeavesExactlyTheExpectedKeysPerTenant) {
  ApplyAll("basic");
  const std::string page_key = std::string(kPageHash) + "_0_k";
  EXPECT_TRUE(index_.Contains("default", page_key));
  EXPECT_TRUE(index_.Contains("", page_key));
  EXPECT_TRUE(index_.Contains("tenant-a", "12345"));
  EXPECT_FALSE(index_.Contains("default", std::string(kPageHash) + "_0_v"));  // removed
  EXPECT_FALSE(index_.Contains("default", "0x2a"));                           // removed, never stored
  // Tenants are separate key spaces.
  EXPECT_FALSE(index_.Contains("default", "12345"));
  EXPECT_FALSE(index_.Contains("tenant-a", page_key));

  const Stats stats = index_.GetStats();
  EXPECT_EQ(stats.keys, 2u);
  EXPECT_EQ(stats.groups, 1u);  // the page's entry: k is still present
  EXPECT_EQ(stats.verified_groups, 0u);
  EXPECT_EQ(stats.batches_applied, 5u);
  EXPECT_EQ(stats.events_applied, 5u);
  EXPECT_EQ(stats.sequence_gaps, 0u);
  EXPECT_EQ(stats.last_sequence, 5u);
}

// The page store after each message of the capture: k and v are slots of
// one page's entry (the `groups` row since 1.4), which stays while either
// is present; the other tenant's key has no digest and is kept whole.
TEST_F(GoldenApply, BasicPageEntryFollowsEachMessage) {
  const std::vector<GoldenMessage> messages = LoadCapture("basic");
  ASSERT_EQ(messages.size(), 5u);
  const uint64_t expected_keys[] = {1, 2, 3, 2, 2};
  for (size_t m = 0; m < messages.size(); ++m) {
    Apply(messages[m]);
    const Stats stats = index_.GetStats();
    EXPECT_EQ(stats.groups, 1u) << "after message " << m;
    EXPECT_EQ(stats.keys, expected_keys[m]) << "after message " << m;
    EXPECT_EQ(index_.Inconsistency(), "") << "after message " << m;
  }
}

TEST_F(GoldenApply, OverflowCountsExactlyTwentyFiveGaps) {
  const std::vector<GoldenMessage> messages = LoadCapture("overflow");
  ASSERT_EQ(messages.size(), 27u);
  ApplyAll("overflow");
  const Stats stats = index_.GetStats();
  EXPECT_EQ(stats.sequence_gaps, 25u);
  EXPECT_EQ(stats.clears, 25u);
  EXPECT_EQ(stats.batches_applied, 27u);
  EXPECT_EQ(stats.duplicate_batches, 0u);
  EXPECT_EQ(stats.last_sequence, 0x4d63u);
}

TEST_F(GoldenApply, BurstLeavesAThousandKeys) {
  const std::vector<GoldenMessage> messages = LoadCapture("burst");
  ASSERT_EQ(messages.size(), 16u);
  ApplyAll("burst");
  const Stats stats = index_.GetStats();
  EXPECT_EQ(stats.keys, 1000u);
  EXPECT_EQ(stats.events_applied, 1000u);
  EXPECT_EQ(stats.batches_applied, 16u);
  EXPECT_EQ(stats.sequence_gaps, 0u);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_TRUE(index_.Contains("default", "key-" + std::to_string(i) + "_0_k")) << i;
  }
}

TEST_F(GoldenApply, ReplayingACaptureIsIgnoredAsDuplicatesOnlyForTheLastBatch) {
  // The same last batch twice is a duplicate; the whole capture again is a
  // publisher restart (sequence 1 after 16): a gap that clears, then refills.
  ApplyAll("burst");
  const std::vector<GoldenMessage> messages = LoadCapture("burst");
  Apply(messages.back());
  EXPECT_EQ(index_.GetStats().duplicate_batches, 1u);
  ApplyAll("burst");
  const Stats stats = index_.GetStats();
  EXPECT_EQ(stats.sequence_gaps, 1u);
  EXPECT_EQ(stats.keys, 1000u);
}

}  // namespace
}  // namespace sci
