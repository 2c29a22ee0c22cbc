// One or more tests per rule of docs/index-semantics.md, against
// the C++ index directly (no sockets, no decoder).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "index/index.h"
#include "index/slot_names.h"
#include "log_capture.h"

namespace sci {
namespace {

Event Stored(std::string_view key, std::string_view group = {}, std::string_view tenant = {},
             std::string_view medium = "cpu") {
  return Event{EventKind::kStored, key, group, tenant, medium};
}
Event Removed(std::string_view key, std::string_view group = {}, std::string_view tenant = {},
              std::string_view medium = "cpu") {
  return Event{EventKind::kRemoved, key, group, tenant, medium};
}
Event AllCleared() { return Event{EventKind::kAllCleared, {}, {}, {}, {}}; }


class IndexSemantics : public ::testing::Test {
 protected:
  void Apply(uint64_t sequence, std::vector<Event> events) { index_.ApplyBatch(sequence, events); }
  bool Has(std::string_view key, std::string_view tenant = {}) const { return index_.Contains(tenant, key); }
  static Fingerprint Group(std::string_view group, std::string_view tenant = {}) {
    return FingerprintOf(TenantSeed(tenant), group);
  }
  Stats stats() const { return index_.GetStats(); }

  Index index_;
};

// ---- the sequence cursor ----

TEST_F(IndexSemantics, FirstBatchIsAcceptedAtAnySequenceIncludingZero) {
  Apply(0, {Stored("a")});
  EXPECT_TRUE(Has("a"));
  EXPECT_TRUE(stats().has_sequence);
  EXPECT_EQ(stats().last_sequence, 0u);
  EXPECT_EQ(stats().sequence_gaps, 0u);
}

TEST_F(IndexSemantics, FirstBatchMayStartAnywhere) {
  Apply(1667, {Stored("a")});
  EXPECT_TRUE(Has("a"));
  EXPECT_EQ(stats().sequence_gaps, 0u);
  EXPECT_EQ(stats().last_sequence, 1667u);
}

TEST_F(IndexSemantics, NewIndexHasNoCursor) {
  EXPECT_FALSE(stats().has_sequence);
  EXPECT_EQ(stats().keys, 0u);
}

TEST_F(IndexSemantics, DuplicateBatchIsIgnoredEntirelyAndCounted) {
  Apply(1, {Stored("a")});
  Apply(1, {Stored("b"), Removed("a")});
  EXPECT_TRUE(Has("a"));
  EXPECT_FALSE(Has("b"));
  EXPECT_EQ(stats().duplicate_batches, 1u);
  EXPECT_EQ(stats().batches_applied, 1u);
  EXPECT_EQ(stats().events_applied, 1u);
}

TEST_F(IndexSemantics, ConsecutiveBatchesAdvanceTheCursor) {
  Apply(1, {Stored("a")});
  Apply(2, {Stored("b")});
  Apply(3, {Removed("a")});
  EXPECT_FALSE(Has("a"));
  EXPECT_TRUE(Has("b"));
  EXPECT_EQ(stats().last_sequence, 3u);
  EXPECT_EQ(stats().sequence_gaps, 0u);
  EXPECT_EQ(stats().clears, 0u);
  EXPECT_EQ(stats().batches_applied, 3u);
}

TEST_F(IndexSemantics, GapClearsKeysAndGroupsThenAppliesTheBatch) {
  Apply(1, {Stored("a", "g"), Stored("b", "h")});
  Apply(3, {Stored("c")});
  EXPECT_FALSE(Has("a"));
  EXPECT_FALSE(Has("b"));
  EXPECT_TRUE(Has("c"));
  EXPECT_EQ(stats().keys, 1u);
  EXPECT_EQ(stats().groups, 0u);
  EXPECT_EQ(stats().verified_groups, 0u);
  EXPECT_EQ(stats().sequence_gaps, 1u);
  EXPECT_EQ(stats().clears, 1u);
  EXPECT_EQ(stats().last_sequence, 3u);
}

TEST_F(IndexSemantics, SequenceRegressionIsAPublisherRestartAndClears) {
  Apply(41, {Stored("a")});
  Apply(42, {Stored("b")});
  Apply(1, {Stored("c")});
  EXPECT_FALSE(Has("a"));
  EXPECT_FALSE(Has("b"));
  EXPECT_TRUE(Has("c"));
  EXPECT_EQ(stats().sequence_gaps, 1u);
  EXPECT_EQ(stats().last_sequence, 1u);
}

TEST_F(IndexSemantics, BatchAfterAGapIsNotASecondGap) {
  Apply(1, {Stored("a")});
  Apply(5, {Stored("b")});
  Apply(6, {Stored("c")});
  EXPECT_EQ(stats().sequence_gaps, 1u);
  EXPECT_EQ(stats().clears, 1u);
  EXPECT_TRUE(Has("b"));
  EXPECT_TRUE(Has("c"));
}

TEST_F(IndexSemantics, ClearResetsTheCursorSoTheNextBatchIsNoGap) {
  Apply(10, {Stored("a")});
  index_.Clear();
  EXPECT_FALSE(Has("a"));
  EXPECT_FALSE(stats().has_sequence);
  Apply(99, {Stored("b")});
  EXPECT_TRUE(Has("b"));
  EXPECT_EQ(stats().sequence_gaps, 0u);
  EXPECT_EQ(stats().clears, 1u);
}

TEST_F(IndexSemantics, EmptyBatchAdvancesTheCursor) {
  Apply(1, {Stored("a")});
  Apply(2, {});
  Apply(3, {});
  EXPECT_EQ(stats().last_sequence, 3u);
  EXPECT_EQ(stats().sequence_gaps, 0u);
  EXPECT_TRUE(Has("a"));
}

// ---- events ----

TEST_F(IndexSemantics, StoredAddsTheKey) {
  Apply(1, {Stored("a")});
  EXPECT_TRUE(Has("a"));
  EXPECT_FALSE(Has("b"));
  EXPECT_EQ(stats().keys, 1u);
  EXPECT_EQ(stats().events_applied, 1u);
}

TEST_F(IndexSemantics, StoringTheSameKeyTwiceKeepsOneKey) {
  Apply(1, {Stored("a", "", "", "cpu"), Stored("a", "", "", "disk")});
  EXPECT_EQ(stats().keys, 1u);
}

TEST_F(IndexSemantics, MissingObjectKeyIsIgnoredAndCounted) {
  Apply(1, {Stored("", "g"), Removed("", "g")});
  EXPECT_EQ(stats().keys, 0u);
  EXPECT_EQ(stats().groups, 0u);
  EXPECT_EQ(stats().ignored_events, 2u);
  EXPECT_EQ(stats().events_applied, 0u);
  EXPECT_EQ(stats().last_sequence, 1u);
}

TEST_F(IndexSemantics, UnknownEventTypeIsIgnoredAndCounted) {
  Apply(1, {Stored("a"), Event{EventKind::kIgnored, "b", "g", {}, {}}});
  EXPECT_TRUE(Has("a"));
  EXPECT_FALSE(Has("b"));
  EXPECT_EQ(stats().groups, 0u);
  EXPECT_EQ(stats().ignored_events, 1u);
}

TEST_F(IndexSemantics, RemovedRemovesTheKeyWhateverTheMedium) {
  Apply(1, {Stored("a", "", "", "disk")});
  Apply(2, {Removed("a", "", "", "cpu")});
  EXPECT_FALSE(Has("a"));
  EXPECT_EQ(stats().keys, 0u);
}

TEST_F(IndexSemantics, RemovingAnAbsentKeyChangesNothing) {
  Apply(1, {Stored("a")});
  Apply(2, {Removed("zzz")});
  EXPECT_TRUE(Has("a"));
  EXPECT_EQ(stats().keys, 1u);
}

TEST_F(IndexSemantics, AllClearedEventClearsKeysAndGroupsAndLaterEventsStillApply) {
  Apply(1, {Stored("a", "g")});
  Apply(2, {Stored("b"), AllCleared(), Stored("c")});
  EXPECT_FALSE(Has("a"));
  EXPECT_FALSE(Has("b"));
  EXPECT_TRUE(Has("c"));
  EXPECT_EQ(stats().groups, 0u);
  EXPECT_EQ(stats().verified_groups, 0u);
  EXPECT_EQ(stats().clears, 1u);
  EXPECT_EQ(stats().sequence_gaps, 0u);
  // The cursor moved to the batch's sequence: the next batch is no gap.
  Apply(3, {Stored("d")});
  EXPECT_EQ(stats().sequence_gaps, 0u);
  EXPECT_TRUE(Has("c"));
}

// ---- tenants ----

TEST_F(IndexSemantics, KeysAreScopedByTenant) {
  Apply(1, {Stored("12345", "", "tenant-a")});
  EXPECT_TRUE(Has("12345", "tenant-a"));
  EXPECT_FALSE(Has("12345", "tenant-b"));
  EXPECT_FALSE(Has("12345"));
  Apply(2, {Removed("12345", "", "tenant-b")});
  EXPECT_TRUE(Has("12345", "tenant-a"));
}

TEST_F(IndexSemantics, EmptyTenantMeansDefault) {
  Apply(1, {Stored("a", "", "default"), Stored("b", "", "")});
  EXPECT_TRUE(Has("a", ""));
  EXPECT_TRUE(Has("b", "default"));
}

// ---- bounds ----

TEST(IndexCapacity, FullIndexRefusesNewEntriesWithoutWipingAndCounts) {
  Index index(IndexOptions{.max_entries = 3});
  std::vector<Event> batch = {Stored("a"), Stored("b"), Stored("c", "g"), Stored("d"), Stored("e"), Stored("a")};
  index.ApplyBatch(1, batch);
  // a, b and c fill the three keys (since 1.4 a group takes none); d and e
  // are refused; a, stored again, is no new key.
  EXPECT_TRUE(index.Contains("", "a"));
  EXPECT_TRUE(index.Contains("", "b"));
  EXPECT_TRUE(index.Contains("", "c"));
  EXPECT_FALSE(index.Contains("", "d"));
  EXPECT_FALSE(index.Contains("", "e"));
  const Stats s = index.GetStats();
  EXPECT_EQ(s.keys, 3u);
  EXPECT_EQ(s.capacity_refusals, 2u);
  EXPECT_EQ(s.clears, 0u);
}

TEST(IndexCapacity, RemovalMakesRoomAgain) {
  Index index(IndexOptions{.max_entries = 2});
  std::vector<Event> first = {Stored("a"), Stored("b"), Stored("c")};
  index.ApplyBatch(1, first);
  std::vector<Event> second = {Removed("a"), Stored("c")};
  index.ApplyBatch(2, second);
  EXPECT_TRUE(index.Contains("", "b"));
  EXPECT_TRUE(index.Contains("", "c"));
  EXPECT_EQ(index.GetStats().capacity_refusals, 1u);
}

TEST(IndexCapacity, ZeroMeansTheDefault) {
  Index index(IndexOptions{.max_entries = 0});
  EXPECT_EQ(index.max_entries(), IndexOptions::kDefaultMaxEntries);
}

// ---- counters ----

TEST_F(IndexSemantics, CountersTrackBatchesEventsAndGauges) {
  Apply(1, {Stored("a", "g"), Stored("b", "g"), Stored("c", "h")});
  Apply(2, {Removed("c", "h")});
  const Stats s = stats();
  EXPECT_EQ(s.batches_applied, 2u);
  EXPECT_EQ(s.events_applied, 4u);
  EXPECT_EQ(s.keys, 2u);
  EXPECT_EQ(s.groups, 0u);  // page entries: none of these keys carries a digest
  EXPECT_EQ(s.duplicate_batches, 0u);
  EXPECT_EQ(s.malformed_messages, 0u);
}

TEST_F(IndexSemantics, ManyKeysAcrossShardsAreAllFoundAndAllCleared) {
  std::vector<std::string> keys;
  for (int i = 0; i < 5000; ++i) keys.push_back("key-" + std::to_string(i));
  std::vector<Event> batch;
  for (const std::string& k : keys) batch.push_back(Stored(k, k));
  Apply(1, batch);
  EXPECT_EQ(stats().keys, 5000u);
  EXPECT_EQ(stats().groups, 0u);
  for (const std::string& k : keys) ASSERT_TRUE(Has(k)) << k;
  Apply(3, {});
  EXPECT_EQ(stats().keys, 0u);
  EXPECT_EQ(stats().groups, 0u);
  for (const std::string& k : keys) ASSERT_FALSE(Has(k)) << k;
}

// ---- slot numbers running out (1.4) ----

// A writer naming each page's keys with a new prefix uses one slot number
// per key: past the last, keys are stored whole -- still exact -- counted
// in stores_past_slot_capacity and warned about once.
TEST_F(IndexSemantics, KeysPastTheLastSlotNumberAreStoredWholeCountedAndWarnedOnce) {
  sci::testing::LogCapture log;
  const std::string digest(64, 'a');
  constexpr uint32_t kPast = 10;
  std::vector<std::string> keys;
  for (uint32_t i = 0; i < SlotNames::kCapacity + kPast; ++i) keys.push_back("p" + std::to_string(i) + "_" + digest);
  uint64_t sequence = 1;
  for (size_t first = 0; first < keys.size(); first += 256) {
    std::vector<Event> batch;
    for (size_t i = first; i < std::min(keys.size(), first + 256); ++i) batch.push_back(Stored(keys[i]));
    Apply(sequence++, batch);
  }
  EXPECT_EQ(stats().keys, keys.size());
  EXPECT_EQ(stats().stores_past_slot_capacity, kPast);
  for (const std::string& k : keys) ASSERT_TRUE(Has(k)) << k;
  EXPECT_EQ(log.Count(LogLevel::kWarn, "slot numbers are taken"), 1u);
  // Removed, they are gone; stored again, counted again (a store, not a key).
  Apply(sequence++, {Removed(keys.back())});
  EXPECT_FALSE(Has(keys.back()));
  Apply(sequence++, {Stored(keys.back())});
  EXPECT_TRUE(Has(keys.back()));
  EXPECT_EQ(stats().stores_past_slot_capacity, kPast + 1);
  EXPECT_EQ(index_.Inconsistency(), "");
  EXPECT_EQ(log.Count(LogLevel::kWarn, "slot numbers are taken"), 1u);
}

// Index::LoadKeys names keys ahead of their stores (to prefetch their
// lines). A key named before an earlier key of the same call numbered its
// slot must still be found where it now is: a snapshot repeating a key (a
// publisher listing a key twice, or a store racing its listing) counts it
// once, and the store stays consistent.
TEST_F(IndexSemantics, ASnapshotKeyNamedBeforeItsSlotWasNumberedIsStoredOnce) {
  const std::string a(64, 'a'), b(64, 'b');
  // Slots "_0_k" and "x_" are new when the call starts; every key is
  // within the naming distance of its earlier copy.
  const std::vector<std::string> keys = {a + "_0_k", b + "_0_k", a + "_0_k", "x_" + a, "x_" + a, b + "_0_k"};
  const std::vector<std::string_view> views(keys.begin(), keys.end());
  index_.LoadKeys(views);
  EXPECT_EQ(stats().keys, 3u);
  for (const std::string& k : keys) EXPECT_TRUE(Has(k)) << k;
  EXPECT_EQ(index_.Inconsistency(), "");
  // Each key removed once is gone: none was left behind as a second copy.
  Apply(1, {Removed(keys[0]), Removed(keys[1]), Removed(keys[3])});
  EXPECT_EQ(stats().keys, 0u);
  for (const std::string& k : keys) EXPECT_FALSE(Has(k)) << k;
  EXPECT_EQ(index_.Inconsistency(), "");
}

// Past the last slot number, snapshot keys are stored whole, each once.
TEST_F(IndexSemantics, SnapshotKeysPastTheLastSlotNumberAreStoredWholeOnce) {
  const std::string digest(64, 'c');
  std::vector<std::string> keys;
  for (uint32_t i = 0; i < SlotNames::kCapacity + 20; ++i) keys.push_back("p" + std::to_string(i) + "_" + digest);
  const size_t distinct = keys.size();
  for (size_t i = 0; i < 20; ++i) keys.push_back(keys[distinct - 1 - i]);  // the whole ones again
  const std::vector<std::string_view> views(keys.begin(), keys.end());
  index_.LoadKeys(views);
  EXPECT_EQ(stats().keys, distinct);
  EXPECT_EQ(stats().stores_past_slot_capacity, 20u);
  for (const std::string& k : keys) ASSERT_TRUE(Has(k)) << k;
  EXPECT_EQ(index_.Inconsistency(), "");
}

}  // namespace
}  // namespace sci
