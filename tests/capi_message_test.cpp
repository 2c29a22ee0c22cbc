// sci_index_apply_message as a C caller sees it: only the public header and
// the shared library. Golden messages apply; malformed ones return
// SCI_ERR_DECODE, are counted and change nothing; bad arguments return
// SCI_ERR_INVALID_ARGUMENT and are not even counted.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "golden_capture.h"
#include "capi_test_support.h"
#include "shared_cache_index.h"

namespace {

using sci_test::GoldenMessage;
using sci_test::LoadCapture;

sci_str S(const std::string& s) { return sci_str{s.data(), s.size()}; }

using sci_test::IndexHandle;
using sci_test::Stats;

bool Contains(const sci_index* index, const std::string& tenant, const std::string& key) {
  bool present = false;
  EXPECT_EQ(sci_index_contains(index, S(tenant), S(key), &present), SCI_OK);
  return present;
}

std::vector<sci_bytes> Frames(const GoldenMessage& message) {
  std::vector<sci_bytes> frames;
  for (const std::string& frame : message.frames) {
    // An empty frame may come with a NULL pointer, as from many C callers.
    frames.push_back(sci_bytes{frame.empty() ? nullptr : reinterpret_cast<const uint8_t*>(frame.data()),
                               frame.size()});
  }
  return frames;
}

sci_status Apply(sci_index* index, const GoldenMessage& message) {
  const std::vector<sci_bytes> frames = Frames(message);
  return sci_index_apply_message(index, frames.data(), frames.size());
}

const std::string kPageHash = "cf97adeedb59e05bfd73a2b4c2a8885708c4f4f70c84c64b27120e72ab733b72";

TEST(CapiApplyMessage, GoldenBasicLeavesTheExpectedKeys) {
  IndexHandle h;
  const std::vector<GoldenMessage> basic = LoadCapture("basic");
  ASSERT_EQ(basic.size(), 5u);
  for (const GoldenMessage& message : basic) ASSERT_EQ(Apply(h.index, message), SCI_OK) << sci_last_error();
  EXPECT_TRUE(Contains(h.index, "", kPageHash + "_0_k"));
  EXPECT_TRUE(Contains(h.index, "default", kPageHash + "_0_k"));
  EXPECT_FALSE(Contains(h.index, "", kPageHash + "_0_v"));
  EXPECT_TRUE(Contains(h.index, "tenant-a", "12345"));
  EXPECT_FALSE(Contains(h.index, "", "12345"));
  EXPECT_FALSE(Contains(h.index, "", "0x2a"));
  const sci_stats stats = Stats(h.index);
  EXPECT_EQ(stats.keys, 2u);
  EXPECT_EQ(stats.groups, 1u);  // k is still stored under the page's group
  EXPECT_EQ(stats.batches_applied, 5u);
  EXPECT_EQ(stats.malformed_messages, 0u);
  EXPECT_TRUE(stats.has_sequence);
  EXPECT_EQ(stats.last_sequence, 5u);
}

// One production batch under `sequence` whose one event stores `key` with
// no event id (nil): it cannot show which publisher sent it.
std::vector<std::string> UnnumberedStore(uint64_t sequence, const std::string& key) {
  std::string seq(8, '\0');
  for (int i = 0; i < 8; ++i) seq[7 - i] = static_cast<char>((sequence >> (8 * i)) & 0xff);
  std::string payload("\x93\x00\x91\x83", 4);  // [0, [{3 fields}], ...
  payload += "\xaa" "event_type" "\xa6" "stored";
  payload += "\xaa" "object_key" + std::string(1, static_cast<char>(0xa0 | key.size())) + key;
  payload += std::string("\xa8" "event_id") + '\xc0';
  payload += std::string(1, '\0');  // ... dp_rank 0]
  return {std::string(), seq, payload};
}

sci_status ApplyFrames(sci_index* index, const std::vector<std::string>& message) {
  std::vector<sci_bytes> frames;
  for (const std::string& f : message) frames.push_back(sci_bytes{reinterpret_cast<const uint8_t*>(f.data()), f.size()});
  return sci_index_apply_message(index, frames.data(), frames.size());
}

// 1.3.0: a caller reading its own socket says it reconnected; the next
// batch that continues the sequence must then show the same publisher by
// its event ids, which one without ids cannot. Without the call the same
// batch is taken as it comes (the ids of numbered batches are checked in
// any case).
TEST(CapiApplyMessage, AfterANotedReconnectABatchWithoutEventIdsIsARestart) {
  const std::vector<GoldenMessage> basic = LoadCapture("basic");
  ASSERT_EQ(basic.size(), 5u);
  for (const bool noted : {false, true}) {
    IndexHandle h;
    for (const GoldenMessage& message : basic) ASSERT_EQ(Apply(h.index, message), SCI_OK) << sci_last_error();
    if (noted) sci_index_note_reconnect(h.index);
    ASSERT_EQ(ApplyFrames(h.index, UnnumberedStore(6, "x")), SCI_OK) << sci_last_error();
    const sci_stats stats = Stats(h.index);
    EXPECT_EQ(stats.restarts_suspected, noted ? 1u : 0u);
    EXPECT_EQ(Contains(h.index, "", kPageHash + "_0_k"), !noted) << "noted " << noted;
    EXPECT_EQ(Contains(h.index, "", "x"), !noted) << "a restart's first batch withholds its stores";
    EXPECT_EQ(stats.last_sequence, 6u);
  }
  sci_index_note_reconnect(nullptr);  // a no-op
}

TEST(CapiApplyMessage, GoldenOverflowCountsItsGapsAndBurstItsKeys) {
  IndexHandle overflow, burst;
  for (const GoldenMessage& message : LoadCapture("overflow")) ASSERT_EQ(Apply(overflow.index, message), SCI_OK);
  for (const GoldenMessage& message : LoadCapture("burst")) ASSERT_EQ(Apply(burst.index, message), SCI_OK);
  EXPECT_EQ(Stats(overflow.index).sequence_gaps, 25u);
  EXPECT_EQ(Stats(burst.index).keys, 1000u);
  // Every overflow batch but the last begins a run after a gap (8 stores each).
  EXPECT_EQ(Stats(overflow.index).stores_withheld, 26u * 8u);
  EXPECT_EQ(Stats(overflow.index).keys, 8u);
  EXPECT_EQ(Stats(burst.index).stores_withheld, 0u);  // starts at sequence 1
}

TEST(CapiApplyMessage, GoldenDisplacedGapWithholdsTheStoresOfEachRunsFirstBatch) {
  IndexHandle h;
  for (const GoldenMessage& message : LoadCapture("displaced-gap")) {
    ASSERT_EQ(Apply(h.index, message), SCI_OK) << sci_last_error();
  }
  const sci_stats stats = Stats(h.index);
  EXPECT_EQ(stats.stores_withheld, 64u);
  EXPECT_EQ(stats.sequence_gaps, 1u);
  EXPECT_EQ(stats.keys, 35u);
  // The counters of the subscriber's resync are there, at zero.
  EXPECT_EQ(stats.resyncs, 0u);
  EXPECT_EQ(stats.resync_failures, 0u);
  EXPECT_EQ(stats.snapshot_keys, 0u);
  EXPECT_FALSE(stats.resyncing);
  EXPECT_EQ(stats.leader_changes, 0u);
}

// The same events through sci_index_apply_events keep the plain rules.
TEST(CapiApplyMessage, EventsFedByHandAreNeverWithheld) {
  IndexHandle h;
  const std::string key = "k";
  const sci_event stored{SCI_EVENT_STORED, S(key), {}, {}, {}};
  ASSERT_EQ(sci_index_apply_events(h.index, 7, &stored, 1), SCI_OK);
  EXPECT_TRUE(Contains(h.index, "", key));
  EXPECT_EQ(Stats(h.index).stores_withheld, 0u);
}

TEST(CapiApplyMessage, MalformedReturnsDecodeIsCountedAndChangesNothing) {
  IndexHandle h;
  const std::vector<GoldenMessage> basic = LoadCapture("basic");
  ASSERT_EQ(basic.size(), 5u);
  ASSERT_EQ(Apply(h.index, basic[0]), SCI_OK);
  const sci_stats before = Stats(h.index);

  // Message 1 (stores _0_v) cut short by one byte: none of it may land.
  GoldenMessage truncated = basic[1];
  truncated.frames[2].resize(truncated.frames[2].size() - 1);
  EXPECT_EQ(Apply(h.index, truncated), SCI_ERR_DECODE);
  const std::string error = sci_last_error();
  EXPECT_NE(error.find("sci_index_apply_message"), std::string::npos) << error;
  EXPECT_NE(error.find("truncated"), std::string::npos) << error;

  const sci_stats after = Stats(h.index);
  EXPECT_EQ(after.malformed_messages, before.malformed_messages + 1);
  EXPECT_EQ(after.keys, before.keys);
  EXPECT_EQ(after.groups, before.groups);
  EXPECT_EQ(after.batches_applied, before.batches_applied);
  EXPECT_EQ(after.last_sequence, before.last_sequence);
  EXPECT_EQ(after.clears, before.clears);
  EXPECT_FALSE(Contains(h.index, "", kPageHash + "_0_v"));

  // The good message 1 after it is the next sequence: no gap.
  ASSERT_EQ(Apply(h.index, basic[1]), SCI_OK);
  EXPECT_EQ(Stats(h.index).sequence_gaps, 0u);
  EXPECT_TRUE(Contains(h.index, "", kPageHash + "_0_v"));
}

TEST(CapiApplyMessage, WrongFrameShapesAreDecodeErrors) {
  IndexHandle h;
  const std::vector<GoldenMessage> basic = LoadCapture("basic");
  ASSERT_FALSE(basic.empty());
  std::vector<sci_bytes> frames = Frames(basic[0]);

  EXPECT_EQ(sci_index_apply_message(h.index, frames.data(), 2), SCI_ERR_DECODE);
  EXPECT_NE(std::string(sci_last_error()).find("2 frames"), std::string::npos) << sci_last_error();
  EXPECT_EQ(sci_index_apply_message(h.index, nullptr, 0), SCI_ERR_DECODE);

  frames[1].len = 5;
  EXPECT_EQ(sci_index_apply_message(h.index, frames.data(), frames.size()), SCI_ERR_DECODE);
  EXPECT_NE(std::string(sci_last_error()).find("frame 1 (sequence) has 5 bytes, expected 8"), std::string::npos)
      << sci_last_error();

  const sci_stats stats = Stats(h.index);
  EXPECT_EQ(stats.malformed_messages, 3u);
  EXPECT_FALSE(stats.has_sequence);
  EXPECT_EQ(stats.keys, 0u);
}

TEST(CapiApplyMessage, BadArgumentsAreRejectedUncountedAndChangeNothing) {
  IndexHandle h;
  const std::vector<GoldenMessage> basic = LoadCapture("basic");
  ASSERT_FALSE(basic.empty());
  std::vector<sci_bytes> frames = Frames(basic[0]);

  EXPECT_EQ(sci_index_apply_message(nullptr, frames.data(), frames.size()), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sci_last_error()).find("sci_index_apply_message: index is NULL"), std::string::npos);

  EXPECT_EQ(sci_index_apply_message(h.index, nullptr, 3), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sci_last_error()).find("sci_index_apply_message: frames is NULL"), std::string::npos);

  frames[2].ptr = nullptr;  // with its non-zero length
  EXPECT_EQ(sci_index_apply_message(h.index, frames.data(), frames.size()), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sci_last_error()).find("frames[2]"), std::string::npos) << sci_last_error();

  const sci_stats stats = Stats(h.index);
  EXPECT_EQ(stats.malformed_messages, 0u);
  EXPECT_EQ(stats.keys, 0u);
  EXPECT_FALSE(stats.has_sequence);
}

TEST(CapiApplyMessage, AMalformedMessageIsReportedThroughTheLogCallback) {
  IndexHandle h;
  std::vector<std::string> warnings;
  sci_set_log_callback(
      [](void* user, int32_t level, const char* msg, size_t len) {
        if (level == SCI_LOG_WARN) static_cast<std::vector<std::string>*>(user)->emplace_back(msg, len);
      },
      &warnings);
  const std::string payload("\xc1", 1);
  const uint8_t sequence[8] = {0, 0, 0, 0, 0, 0, 0, 1};
  const sci_bytes frames[3] = {{nullptr, 0}, {sequence, 8}, {reinterpret_cast<const uint8_t*>(payload.data()), 1}};
  EXPECT_EQ(sci_index_apply_message(h.index, frames, 3), SCI_ERR_DECODE);
  sci_set_log_callback(nullptr, nullptr);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("malformed"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("0xc1"), std::string::npos) << warnings[0];
}

}  // namespace
