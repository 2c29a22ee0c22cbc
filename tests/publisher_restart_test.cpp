// A publisher restart the sequence cannot show (issue #35 §2). A master
// that restarts on the same endpoint numbers its batches from 1 again; if
// it sent exactly as many as the index's cursor before the subscriber
// reconnected, its next batch looks like last + 1, and the old master's
// keys (which the new one never removes) would answer hit. The events'
// event_id, per publisher and per event, starts at 1 again too: after a
// lost connection the batch that continues the sequence must continue the
// ids, or the index is cleared (restarts_suspected). A blip that was not a
// restart costs nothing. Real ZeroMQ sockets on loopback, the publisher's
// encoding (loopback_publisher.h).
#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "encode/mooncake_encoder.h"
#include "encoded_batches.h"
#include "feed/subscriber.h"
#include "index/index.h"
#include "loopback_publisher.h"
#include "wait_for.h"
#include "wire/message_apply.h"

namespace sci {
namespace {

using sci::testing::LoopbackPublisher;
using sci::testing::RemovedEvent;
using sci::testing::StoredEvent;
using sci::testing::WaitFor;

MooncakeEvent WithoutId(MooncakeEvent e) {
  e.event_id_nil = true;
  return e;
}

TEST(PublisherRestart, ABatchThatContinuesTheSequenceButNotTheEventIdsClearsTheIndex) {
  Index index;
  sci::testing::EncodedBatches batches;
  batches.Apply(index, 1, {StoredEvent(1, "a"), StoredEvent(2, "b")});
  batches.Apply(index, 2, {StoredEvent(3, "c")});
  index.RequireEventContinuity();
  // The restarted master's third batch: its first event is its own number
  // 5, not the 4 that would follow ours (we last saw 3).
  batches.Apply(index, 3, {StoredEvent(5, "new"), RemovedEvent(6, "x")});
  EXPECT_FALSE(index.Contains({}, "a"));
  EXPECT_FALSE(index.Contains({}, "c"));
  EXPECT_FALSE(index.Contains({}, "new"));  // the run's first batch: stores withheld
  Stats stats = index.GetStats();
  EXPECT_EQ(stats.restarts_suspected, 1u);
  EXPECT_EQ(stats.sequence_gaps, 0u);
  EXPECT_EQ(stats.last_sequence, 3u);
  batches.Apply(index, 4, {StoredEvent(7, "d")});
  EXPECT_TRUE(index.Contains({}, "d"));
  EXPECT_EQ(index.GetStats().restarts_suspected, 1u);  // judged once
}

TEST(PublisherRestart, ABlipThatWasNotARestartCostsNothing) {
  Index index;
  sci::testing::EncodedBatches batches;
  batches.Apply(index, 1, {StoredEvent(1, "a"), StoredEvent(2, "b")});
  index.RequireEventContinuity();
  batches.Apply(index, 2, {});  // an empty batch shows nothing: still required
  batches.Apply(index, 3, {StoredEvent(3, "c")});
  EXPECT_TRUE(index.Contains({}, "a"));
  EXPECT_TRUE(index.Contains({}, "c"));
  EXPECT_EQ(index.GetStats().restarts_suspected, 0u);
  EXPECT_EQ(index.GetStats().clears, 0u);
}

TEST(PublisherRestart, WithoutEventIdsContinuityCannotBeShown) {
  for (const bool ids_before : {true, false}) {
    SCOPED_TRACE(ids_before ? "ids before, none after" : "none before, ids after");
    Index index;
    sci::testing::EncodedBatches batches;
    batches.Apply(index, 1, {ids_before ? StoredEvent(1, "a") : WithoutId(StoredEvent(1, "a"))});
    index.RequireEventContinuity();
    batches.Apply(index, 2, {ids_before ? WithoutId(StoredEvent(2, "b")) : StoredEvent(2, "b")});
    EXPECT_FALSE(index.Contains({}, "a"));
    EXPECT_EQ(index.GetStats().restarts_suspected, 1u);
  }
}

TEST(PublisherRestart, AGapOrAFreshRunIsJudgedByTheSequenceAlone) {
  Index index;
  sci::testing::EncodedBatches batches;
  batches.Apply(index, 1, {StoredEvent(1, "a")});
  index.RequireEventContinuity();
  batches.Apply(index, 5, {StoredEvent(9, "b")});  // a gap: cleared as a gap
  Stats stats = index.GetStats();
  EXPECT_EQ(stats.sequence_gaps, 1u);
  EXPECT_EQ(stats.restarts_suspected, 0u);
  batches.Apply(index, 6, {StoredEvent(10, "c")});  // the requirement went with the gap
  EXPECT_TRUE(index.Contains({}, "c"));
  EXPECT_EQ(index.GetStats().restarts_suspected, 0u);
}

// Through the subscriber: the master goes away and a new one binds the same
// endpoint, resuming at the old cursor + 1 with its own event ids.
std::unique_ptr<Subscriber> Follow(Index& index, const std::string& endpoint) {
  SubscriberOptions options;
  options.endpoint = endpoint;
  options.reconnect_ms = 20;
  options.reconnect_max_ms = 100;
  SubscriberError code = SubscriberError::kNone;
  std::string error;
  auto subscriber = Subscriber::Start(index, options, &code, &error);
  EXPECT_NE(subscriber, nullptr) << error;
  return subscriber;
}

class SubscriberRestart : public ::testing::TestWithParam<bool /* restarted */> {};

TEST_P(SubscriberRestart, TheNewMastersBatchIsTrustedOnlyIfItContinuesTheEventIds) {
  const bool restarted = GetParam();
  Index index;
  auto first = std::make_unique<LoopbackPublisher>(sci::testing::kAnyLoopbackTcpPort);
  const std::string endpoint = first->endpoint();
  auto subscriber = Follow(index, endpoint);
  ASSERT_NE(subscriber, nullptr);
  ASSERT_TRUE(first->AwaitSubscription());
  const MooncakeEvent one[] = {StoredEvent(1, "a"), StoredEvent(2, "b")};
  const MooncakeEvent two[] = {StoredEvent(3, "c")};
  first->SendBatch(1, one);
  first->SendBatch(2, two);
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().last_sequence == 2; }));

  // The master goes away (its socket closes) and comes back on the same
  // endpoint: restarted (event ids from 1) or the same one after a blip.
  first.reset();
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().subscriber_disconnects == 1; }));
  LoopbackPublisher second(endpoint);
  ASSERT_TRUE(second.AwaitSubscription());
  const uint64_t id = restarted ? 1 : 4;
  const MooncakeEvent three[] = {StoredEvent(id, "d"), RemovedEvent(id + 1, "zz")};
  second.SendBatch(3, three);
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().last_sequence == 3; }));

  const Stats stats = index.GetStats();
  EXPECT_EQ(stats.restarts_suspected, restarted ? 1u : 0u);
  EXPECT_EQ(index.Contains({}, "a"), !restarted);
  EXPECT_EQ(index.Contains({}, "c"), !restarted);
  EXPECT_EQ(index.Contains({}, "d"), !restarted);  // a restart's first batch withholds its stores
  EXPECT_EQ(stats.sequence_gaps, 0u);
}

INSTANTIATE_TEST_SUITE_P(BlipOrRestart, SubscriberRestart, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("Restarted") : std::string("SameMasterAfterABlip");
                         });

}  // namespace
}  // namespace sci
