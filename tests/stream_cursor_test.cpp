// The sequence rules on their own (src/index/stream_cursor.h): each verdict
// a batch can get, and what the cursor keeps of it. The index's tests apply
// the same rules through real batches; these name each rule once.
#include <gtest/gtest.h>

#include "index/stream_cursor.h"

namespace sci {
namespace {

using Seq = BatchOutcome::Sequence;

BatchEventIds Ids(uint64_t first, uint64_t last) { return BatchEventIds{true, first, last}; }

// Judges and, unless a duplicate, applies as the index does (a clear resets).
StreamCursor::Verdict Apply(StreamCursor& cursor, uint64_t sequence, bool has_events, const BatchEventIds& ids = {},
                            SequenceRules rules = SequenceRules::kPlain) {
  const StreamCursor::Verdict verdict = cursor.Judge(sequence, has_events, ids, rules);
  if (verdict.sequence == Seq::kDuplicate) return verdict;
  if (verdict.clears()) cursor.Reset();
  cursor.Advance(sequence, has_events, ids);
  return verdict;
}

TEST(StreamCursor, FirstContinuedDuplicateAndGap) {
  StreamCursor cursor;
  EXPECT_FALSE(cursor.position().has_sequence);
  EXPECT_EQ(Apply(cursor, 7, true).sequence, Seq::kFirst);  // any sequence begins a history
  EXPECT_EQ(Apply(cursor, 8, true).sequence, Seq::kContinued);
  EXPECT_EQ(Apply(cursor, 8, true).sequence, Seq::kDuplicate);
  EXPECT_EQ(cursor.position().last_sequence, 8u);
  EXPECT_EQ(Apply(cursor, 10, true).sequence, Seq::kGap);
  EXPECT_EQ(Apply(cursor, 3, true).sequence, Seq::kGap);  // backwards is a gap too
  EXPECT_TRUE(cursor.has_sequence_now());
  EXPECT_EQ(cursor.last_sequence_now(), 3u);
}

TEST(StreamCursor, EventIdsThatDoNotContinueAreARestart) {
  StreamCursor cursor;
  Apply(cursor, 1, true, Ids(1, 10));
  EXPECT_EQ(Apply(cursor, 2, true, Ids(11, 20)).sequence, Seq::kContinued);
  EXPECT_EQ(Apply(cursor, 3, true, Ids(1, 5)).sequence, Seq::kRestart);
  EXPECT_TRUE((StreamCursor::Verdict{Seq::kRestart, false}.clears()));
  // An empty batch carries no id and breaks no chain.
  EXPECT_EQ(Apply(cursor, 4, false).sequence, Seq::kContinued);
  EXPECT_EQ(Apply(cursor, 5, true, Ids(6, 9)).sequence, Seq::kContinued);
}

TEST(StreamCursor, AfterAReconnectOnlyIdsShowTheSamePublisher) {
  StreamCursor cursor;
  Apply(cursor, 1, true, Ids(1, 10));
  cursor.RequireContinuity();
  EXPECT_EQ(Apply(cursor, 2, false).sequence, Seq::kContinued);  // no events: not judged yet
  EXPECT_EQ(Apply(cursor, 3, true, Ids(11, 12)).sequence, Seq::kContinued);  // judged: the same
  cursor.RequireContinuity();
  EXPECT_EQ(Apply(cursor, 4, true).sequence, Seq::kRestart);  // no ids: cannot show it
  // Without the requirement a batch without ids continues.
  EXPECT_EQ(Apply(cursor, 5, true).sequence, Seq::kContinued);
  // A gap makes the requirement moot.
  cursor.RequireContinuity();
  EXPECT_EQ(Apply(cursor, 9, true).sequence, Seq::kGap);
  EXPECT_EQ(Apply(cursor, 10, true).sequence, Seq::kContinued);
}

TEST(StreamCursor, TheProductionFormatWithholdsTheStoresOfABatchThatBeginsARun) {
  StreamCursor cursor;
  const auto production = SequenceRules::kMooncakeProduction;
  EXPECT_TRUE(Apply(cursor, 5, true, {}, production).withhold_stores);   // first, not 1
  EXPECT_FALSE(Apply(cursor, 6, true, {}, production).withhold_stores);  // continued
  EXPECT_TRUE(Apply(cursor, 9, true, {}, production).withhold_stores);   // gap
  EXPECT_FALSE(Apply(cursor, 1, true, {}, production).withhold_stores);  // a gap to 1: nothing before it
  EXPECT_FALSE(Apply(cursor, 7, true, {}, SequenceRules::kPlain).withhold_stores);  // plain rules never
  cursor.Reset();
  EXPECT_TRUE(Apply(cursor, 2, true, {}, production).withhold_stores);  // first after a clear
}

TEST(StreamCursor, ResumeAtSetsThePositionAsIfItsBatchWereApplied) {
  StreamCursor cursor;
  cursor.ResumeAt(StreamPosition{true, 41, true, 400});
  EXPECT_EQ(cursor.position().last_sequence, 41u);
  EXPECT_EQ(cursor.last_sequence_now(), 41u);
  EXPECT_EQ(Apply(cursor, 42, true, Ids(401, 401)).sequence, Seq::kContinued);
  cursor.ResumeAt(StreamPosition{true, 50, false, 0});
  EXPECT_EQ(Apply(cursor, 51, true, Ids(7, 7)).sequence, Seq::kContinued);  // unknown ids: nothing to contradict
  cursor.Reset();
  EXPECT_FALSE(cursor.has_sequence_now());
}

}  // namespace
}  // namespace sci
