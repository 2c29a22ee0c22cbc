// Per-medium residency on the wrong publisher generation (issue #35, §1).
// A first-generation master (Mooncake main) announces `removed` once no
// replica is left and may name another medium than the one stored; a
// second-generation one (the conductor line) removes one medium at a time.
// Each event shows which sent it (its map's dp_rank: nil or an integer), so
// under every residency option a first-generation removal drops the whole
// key: no option can keep a key such a master removed. The messages are
// the publishers' bytes: real captures, and the encoder of src/encode/.
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <tuple>
#include <vector>

#include "encode/mooncake_encoder.h"
#include "encoded_batches.h"
#include "golden_capture.h"
#include "index/index.h"
#include "log_capture.h"
#include "wire/message_apply.h"

namespace sci {
namespace {

// A publisher of one generation: its events' fields, numbered as it numbers them.
class Publisher {
 public:
  explicit Publisher(bool second_generation) : second_generation_(second_generation) {}

  void Send(Index& index, std::vector<MooncakeEvent> events) {
    for (MooncakeEvent& e : events) {
      e.second_generation = second_generation_;
      e.event_id = ++event_id_;
    }
    batches_.Send(index, events);
  }

 private:
  const bool second_generation_;
  uint64_t event_id_ = 0;
  sci::testing::EncodedBatches batches_;
};

MooncakeEvent Stored(std::string_view key, std::string_view medium) {
  MooncakeEvent e;
  e.stored = true;
  e.object_key = key;
  e.medium = medium;
  return e;
}

MooncakeEvent Removed(std::string_view key, std::string_view medium) {
  MooncakeEvent e = Stored(key, medium);
  e.stored = false;
  return e;
}

Index IndexUnder(Residency residency) {
  IndexOptions options;
  options.residency = residency;
  return Index(options);
}

using Case = std::tuple<Residency, int /* generation */>;

class ResidencyGeneration : public ::testing::TestWithParam<Case> {};

// A key on cpu and disk, then `removed cpu`. Second generation: the disk
// copy is still there (present under per-medium; the object rule misses it).
// First generation: no replica is left (a master that stored on disk and
// removes "cpu", its fallback): absent under every option.
TEST_P(ResidencyGeneration, ARemovalIsReadAsThePublisherMeantIt) {
  const auto [residency, generation] = GetParam();
  const bool second = generation == 2;
  testing::LogCapture log;
  Index index = IndexUnder(residency);
  Publisher publisher(second);
  publisher.Send(index, {Stored("k", "cpu"), Stored("k", "disk"), Stored("other", "cpu")});
  publisher.Send(index, {Removed("k", "cpu")});

  const bool truly_present = second;
  const bool kept = residency == Residency::kPerMedium && truly_present;
  EXPECT_EQ(index.Contains({}, "k"), kept);
  EXPECT_TRUE(index.Contains({}, "other"));
  const Stats stats = index.GetStats();
  EXPECT_EQ(stats.stream_generation, static_cast<uint64_t>(generation));
  EXPECT_EQ(stats.removals_per_medium, residency == Residency::kPerMedium && second ? 1u : 0u);
  EXPECT_EQ(stats.removals_whole_key, residency == Residency::kPerMedium && second ? 0u : 1u);
  // A contradiction: per-medium on the first generation, the object rule on
  // the second. Said once per index.
  const bool mismatch = (residency == Residency::kPerMedium) != second;
  EXPECT_EQ(stats.residency_mismatches, mismatch ? 1u : 0u);
  publisher.Send(index, {Stored("k2", "disk"), Removed("k2", "cpu"), Removed("k", "disk")});
  EXPECT_FALSE(index.Contains({}, "k"));
  EXPECT_EQ(index.Contains({}, "k2"), residency == Residency::kPerMedium && second);
  const size_t warned = log.Count(LogLevel::kWarn, "the stream is first-generation");
  const size_t noted = log.Count(LogLevel::kInfo, "the stream is second-generation");
  EXPECT_EQ(warned, residency == Residency::kPerMedium && !second ? 1u : 0u);
  EXPECT_EQ(noted, residency == Residency::kObject && second ? 1u : 0u);
}

INSTANTIATE_TEST_SUITE_P(EveryOption, ResidencyGeneration,
                         ::testing::Combine(::testing::Values(Residency::kObject, Residency::kPerMedium),
                                            ::testing::Values(1, 2)),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(std::get<0>(info.param) == Residency::kObject ? "Object" : "PerMedium") +
                                  "_Generation" + std::to_string(std::get<1>(info.param));
                         });

// Applies a real capture's messages in order.
void ReplayCapture(Index& index, const std::string& capture) {
  DecodedMessage scratch;
  for (const sci_test::GoldenMessage& message : sci_test::LoadCapture(capture)) {
    const auto frames = message.FrameSpans();
    std::string error;
    ASSERT_TRUE(ApplyMessage(index, frames, scratch, &error)) << message.name << ": " << error;
  }
}

// The real first-generation capture under per-medium residency: every
// removal is applied to the whole key, and the stream is named first-generation.
TEST(ResidencyGenerationCaptures, MainsCaptureUnderPerMediumDropsEveryRemovedKey) {
  Index index = IndexUnder(Residency::kPerMedium);
  ReplayCapture(index, "basic");
  const Stats stats = index.GetStats();
  EXPECT_EQ(stats.stream_generation, 1u);
  EXPECT_EQ(stats.removals_whole_key, 2u);
  EXPECT_EQ(stats.removals_per_medium, 0u);
  EXPECT_EQ(stats.residency_mismatches, 2u);
  EXPECT_FALSE(index.Contains({}, "cf97adeedb59e05bfd73a2b4c2a8885708c4f4f70c84c64b27120e72ab733b72_0_v"));
  EXPECT_TRUE(index.Contains({}, "cf97adeedb59e05bfd73a2b4c2a8885708c4f4f70c84c64b27120e72ab733b72_0_k"));
}

TEST(ResidencyGenerationCaptures, TheConductorCaptureIsSecondGeneration) {
  Index index = IndexUnder(Residency::kPerMedium);
  ReplayCapture(index, "media-and-cleared");
  const Stats stats = index.GetStats();
  EXPECT_EQ(stats.stream_generation, 2u);
  EXPECT_EQ(stats.residency_mismatches, 0u);
  EXPECT_GT(stats.removals_per_medium, 0u);
}

}  // namespace
}  // namespace sci
