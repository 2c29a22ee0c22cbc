// "A loss the real Mooncake publisher signals one batch early"
// (docs/index-semantics.md): in the production format, the batch that begins
// a run -- it reveals a gap or a restart, or is the first accepted after a
// clear -- applies only its removals and all-cleared events, unless its
// sequence is 1; its stored events are withheld and counted. Checked on the
// real publisher's bytes (testdata/mooncake-publisher/displaced-gap), on a
// stream of our own encoded as the publisher encodes it, and rule by rule.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <fstream>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "encode/mooncake_encoder.h"
#include "golden_capture.h"
#include "index/index.h"
#include "wire/message_apply.h"

namespace sci {
namespace {

using sci_test::CaptureDir;
using sci_test::GoldenMessage;
using sci_test::LoadCapture;
using sci_test::LoadExpectedLines;

// ------------------------------------------------ the real publisher's bytes --

nlohmann::json LoadTruth() {
  std::ifstream in(CaptureDir("displaced-gap") + "/truth.json");
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

TEST(EarlyGapGolden, DisplacedGapLeavesNoKeyOutsideWhatIsTrulyPresent) {
  const std::vector<GoldenMessage> messages = LoadCapture("displaced-gap");
  ASSERT_EQ(messages.size(), 8u);
  const nlohmann::json truth = LoadTruth();
  ASSERT_TRUE(truth.is_object()) << "truth.json missing or malformed";
  std::set<std::string> present_after_window;
  for (const nlohmann::json& key : truth["present_after_window"]) present_after_window.insert(key.get<std::string>());
  ASSERT_EQ(present_after_window.size(), 35u);

  Index index;
  DecodedMessage scratch;
  for (const GoldenMessage& message : messages) {
    std::string error;
    ASSERT_TRUE(ApplyMessage(index, message.FrameSpans(), scratch, &error)) << message.name << ": " << error;
  }

  // Every key the window names: present only if truly present.
  std::set<std::string> named;
  for (const std::string& line : LoadExpectedLines("displaced-gap")) {
    const nlohmann::json message = nlohmann::json::parse(line);
    for (const nlohmann::json& e : message["events"]) named.insert(e["object_key"].get<std::string>());
  }
  size_t present = 0;
  for (const std::string& key : named) {
    if (!index.Contains("default", key)) continue;
    ++present;
    EXPECT_EQ(present_after_window.count(key), 1u) << key << " is present but was removed (a false hit)";
  }
  for (const nlohmann::json& key : truth["lost_removals_of_keys_stored_in_that_batch"]) {
    EXPECT_FALSE(index.Contains("default", key.get<std::string>())) << key;
  }
  const Stats stats = index.GetStats();
  EXPECT_EQ(stats.keys, present);
  EXPECT_EQ(stats.sequence_gaps, 1u);
  // Withheld: the stores of the first batch (the index was new) and of the
  // batch that revealed the gap, 32 each.
  EXPECT_EQ(stats.stores_withheld, 64u);
  EXPECT_GT(present, 0u) << "the batches in sequence after the gap still apply their stores";
}

// The same bytes fed by hand through the plain rules keep the false hits
// the issue reported: the rule belongs to the production format.
TEST(EarlyGapGolden, PlainRulesWouldHoldTheRemovedKeys) {
  const nlohmann::json truth = LoadTruth();
  ASSERT_TRUE(truth.is_object());
  Index index;
  DecodedMessage scratch;
  for (const GoldenMessage& message : LoadCapture("displaced-gap")) {
    std::string error;
    ASSERT_TRUE(DecodeMessage(message.FrameSpans(), &scratch, &error)) << error;
    index.ApplyBatch(scratch.sequence, scratch.events, SequenceRules::kPlain);
  }
  EXPECT_EQ(index.GetStats().keys, truth["plain_sequence_rules_would_hold"].size());
  EXPECT_EQ(index.GetStats().stores_withheld, 0u);
}

// ----------------------------------------- a stream encoded as the publisher --

// The publisher's single worker, as in the issue: it takes batch X off its
// queue and encodes it; meanwhile events dropped from the full queue (newer
// than X's) reserve their sequence numbers; then X takes the next number.
class DisplacingPublisher {
 public:
  // Sends `events` under the next number; returns whether the index accepted the message.
  bool Send(Index& index, const std::vector<MooncakeEvent>& events) {
    std::string payload;
    EncodeMooncakePayload(1700000000000 + static_cast<int64_t>(next_), events, &payload);
    const std::array<uint8_t, 8> sequence = EncodeSequence(next_++);
    const std::string topic;
    const std::array<std::span<const uint8_t>, 3> frames = {
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(topic.data()), topic.size()), sequence,
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(payload.data()), payload.size())};
    return ApplyMessage(index, frames, scratch_, nullptr);
  }
  // Events dropped from the queue: their numbers are taken, nothing is sent.
  void Drop(uint64_t batches) { next_ += batches; }
  uint64_t next() const { return next_; }

 private:
  uint64_t next_ = 1;
  DecodedMessage scratch_;
};

MooncakeEvent StoredEvent(const std::string& key, const std::string& group) {
  MooncakeEvent e;
  e.stored = true;
  e.object_key = key;
  e.group_id = group;
  e.medium = "cpu";
  return e;
}

MooncakeEvent RemovedEvent(const std::string& key, const std::string& group) {
  MooncakeEvent e = StoredEvent(key, group);
  e.stored = false;
  return e;
}

// Keys live in a vector that outlives the events viewing them.
struct Page {
  std::string group;
  std::vector<std::string> keys;
};

Page MakePage(int n) {
  Page page;
  page.group = "sglang-hicache:page" + std::to_string(n);
  for (int k = 0; k < 4; ++k) page.keys.push_back("page" + std::to_string(n) + "_" + std::to_string(k) + "_k");
  return page;
}

std::vector<MooncakeEvent> Stores(const Page& page) {
  std::vector<MooncakeEvent> events;
  for (const std::string& key : page.keys) events.push_back(StoredEvent(key, page.group));
  return events;
}

TEST(EarlyGapSynthetic, StoresOfTheBatchBeforeALostRemovalAreNeverHits) {
  std::vector<Page> pages;
  for (int n = 0; n < 8; ++n) pages.push_back(MakePage(n));
  Index index;
  DisplacingPublisher publisher;
  // A run from sequence 1: applied whole, the first batch included.
  ASSERT_TRUE(publisher.Send(index, Stores(pages[0])));
  ASSERT_TRUE(publisher.Send(index, Stores(pages[1])));
  EXPECT_EQ(index.GetStats().keys, 8u);
  EXPECT_EQ(index.GetStats().stores_withheld, 0u);

  // The queue overflows while X (page 2's stores plus page 0's removal) is
  // being encoded: the dropped events -- among them the removal of page 2 --
  // take numbers 3 and 4, X goes out as 5, the next batch as 6.
  std::vector<MooncakeEvent> x = Stores(pages[2]);
  x.push_back(RemovedEvent(pages[0].keys[0], pages[0].group));
  publisher.Drop(2);
  ASSERT_TRUE(publisher.Send(index, x));
  ASSERT_TRUE(publisher.Send(index, Stores(pages[3])));

  const Stats stats = index.GetStats();
  EXPECT_EQ(stats.sequence_gaps, 1u);
  EXPECT_EQ(stats.stores_withheld, 4u);
  EXPECT_EQ(stats.last_sequence, 6u);
  for (const std::string& key : pages[2].keys) EXPECT_FALSE(index.Contains("", key)) << key << " withheld";
  for (const std::string& key : pages[3].keys) EXPECT_TRUE(index.Contains("", key)) << key << " in sequence";
  EXPECT_FALSE(index.Contains("", pages[0].keys[0]));  // cleared by the gap, and removed by X anyway
  EXPECT_EQ(stats.keys, 4u);
}

TEST(EarlyGapSynthetic, ManyDisplacedGapsLeaveNoFalseHit) {
  // Truth is what the publisher meant, lost events included; the index may
  // miss keys but never hold one the truth lacks.
  std::vector<Page> pages;
  for (int n = 0; n < 64; ++n) pages.push_back(MakePage(n));
  std::set<std::string> truth;
  Index index;
  DisplacingPublisher publisher;
  uint64_t rng = 12345;
  auto next = [&rng] { return (rng = rng * 6364136223846793005ull + 1442695040888963407ull) >> 33; };
  for (int round = 0; round < 400; ++round) {
    const Page& stored = pages[next() % pages.size()];
    const Page& removed = pages[next() % pages.size()];
    std::vector<MooncakeEvent> batch = Stores(stored);
    for (const std::string& key : stored.keys) truth.insert(key);
    const bool overflow = next() % 5 == 0;
    if (overflow) {
      // Dropped while this batch was encoded: newer than it, so its effect
      // (removing what the batch stored, or another page) comes after.
      publisher.Drop(1);
      ASSERT_TRUE(publisher.Send(index, batch));
      for (const std::string& key : removed.keys) truth.erase(key);
      for (const std::string& key : stored.keys) truth.erase(key);
      continue;
    }
    for (const std::string& key : removed.keys) batch.push_back(RemovedEvent(key, removed.group));
    for (const std::string& key : removed.keys) truth.erase(key);
    ASSERT_TRUE(publisher.Send(index, batch));
    for (const Page& page : pages) {
      for (const std::string& key : page.keys) {
        ASSERT_FALSE(index.Contains("", key) && truth.count(key) == 0) << "round " << round << " " << key;
      }
    }
  }
  EXPECT_GT(index.GetStats().sequence_gaps, 10u);
  EXPECT_GT(index.GetStats().stores_withheld, 0u);
  EXPECT_GT(index.GetStats().keys, 0u);
}

// ------------------------------------------------------- the rule, one by one --

Event Stored(std::string_view key, std::string_view group = {}) {
  return Event{EventKind::kStored, key, group, {}, "cpu"};
}
Event Removed(std::string_view key) { return Event{EventKind::kRemoved, key, {}, {}, "cpu"}; }

constexpr SequenceRules kMooncake = SequenceRules::kMooncakeProduction;

TEST(EarlyGapRule, FirstBatchOfANewIndexAppliesOnlyRemovals) {
  Index index;
  index.ApplyBatch(7, std::vector<Event>{Stored("a", "g"), Removed("b")}, kMooncake);
  EXPECT_FALSE(index.Contains("", "a"));
  const Stats stats = index.GetStats();
  EXPECT_EQ(stats.stores_withheld, 1u);
  EXPECT_EQ(stats.groups, 0u);
  EXPECT_TRUE(stats.has_sequence);
  EXPECT_EQ(stats.last_sequence, 7u);
  // The next batch in sequence is applied whole.
  index.ApplyBatch(8, std::vector<Event>{Stored("a")}, kMooncake);
  EXPECT_TRUE(index.Contains("", "a"));
}

TEST(EarlyGapRule, SequenceOneIsAppliedWholeEvenAfterAGap) {
  Index index;
  index.ApplyBatch(1, std::vector<Event>{Stored("a")}, kMooncake);
  EXPECT_TRUE(index.Contains("", "a"));
  index.ApplyBatch(2, std::vector<Event>{Stored("b")}, kMooncake);
  // A restarted publisher starts again at 1: a restart, nothing lost before it.
  index.ApplyBatch(1, std::vector<Event>{Stored("c")}, kMooncake);
  EXPECT_EQ(index.GetStats().sequence_gaps, 1u);
  EXPECT_TRUE(index.Contains("", "c"));
  EXPECT_FALSE(index.Contains("", "a"));
  EXPECT_EQ(index.GetStats().stores_withheld, 0u);
}

TEST(EarlyGapRule, BatchRevealingAGapAppliesItsRemovalsAndAllCleared) {
  Index index;
  index.ApplyBatch(1, std::vector<Event>{Stored("a")}, kMooncake);
  index.ApplyBatch(5, std::vector<Event>{Stored("b"), Removed("a"), Event{EventKind::kAllCleared, {}, {}, {}, {}}},
                   kMooncake);
  const Stats stats = index.GetStats();
  EXPECT_EQ(stats.sequence_gaps, 1u);
  EXPECT_EQ(stats.stores_withheld, 1u);
  EXPECT_EQ(stats.events_applied, 3u);  // a; then the removal and the all-cleared
  EXPECT_EQ(stats.clears, 2u);          // the gap, the all-cleared event
  EXPECT_EQ(stats.keys, 0u);
  // The batch after an all-cleared event inside a batch is in sequence.
  index.ApplyBatch(6, std::vector<Event>{Stored("c")}, kMooncake);
  EXPECT_TRUE(index.Contains("", "c"));
}

TEST(EarlyGapRule, FirstBatchAfterAClearBeginsARun) {
  Index index;
  index.ApplyBatch(1, std::vector<Event>{Stored("a")}, kMooncake);
  index.Clear();
  index.ApplyBatch(2, std::vector<Event>{Stored("b")}, kMooncake);
  EXPECT_FALSE(index.Contains("", "b"));
  EXPECT_EQ(index.GetStats().stores_withheld, 1u);
}

TEST(EarlyGapRule, ADuplicateOfTheFirstBatchStaysIgnored) {
  Index index;
  index.ApplyBatch(9, std::vector<Event>{Stored("a")}, kMooncake);
  index.ApplyBatch(9, std::vector<Event>{Stored("a")}, kMooncake);
  EXPECT_FALSE(index.Contains("", "a"));
  EXPECT_EQ(index.GetStats().duplicate_batches, 1u);
  EXPECT_EQ(index.GetStats().stores_withheld, 1u);
}

TEST(EarlyGapRule, PlainRulesApplyTheWholeBatch) {
  Index index;
  index.ApplyBatch(7, std::vector<Event>{Stored("a")});
  index.ApplyBatch(12, std::vector<Event>{Stored("b")}, SequenceRules::kPlain);
  EXPECT_TRUE(index.Contains("", "b"));
  EXPECT_EQ(index.GetStats().stores_withheld, 0u);
}

// Other wire formats number a batch when they send it: plain rules.
TEST(EarlyGapRule, MooncakeV1MessagesKeepThePlainRules) {
  // [timestamp, [["BlockStoreEvent", "k1", [["cpu", "loc"]]]]] under sequence 7, topic "mooncake".
  const std::string payload = std::string("\x92\x01\x91\x93\xaf" "BlockStoreEvent" "\xa2" "k1" "\x91\x92\xa3" "cpu" "\xa3" "loc");
  const std::string topic = "mooncake";
  const std::array<uint8_t, 8> sequence = EncodeSequence(7);
  const std::array<std::span<const uint8_t>, 3> frames = {
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(topic.data()), topic.size()), sequence,
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(payload.data()), payload.size())};
  Index index;
  DecodedMessage scratch;
  std::string error;
  ASSERT_TRUE(ApplyMessage(index, frames, scratch, &error)) << error;
  ASSERT_EQ(scratch.format, WireFormat::kMooncakeV1);
  EXPECT_TRUE(index.Contains("", "k1"));
  EXPECT_EQ(index.GetStats().stores_withheld, 0u);
}

}  // namespace
}  // namespace sci
