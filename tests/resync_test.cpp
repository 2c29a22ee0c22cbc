// Resync from a snapshot, end to end over real sockets: a real ZeroMQ
// publisher sending production-format bytes and a real HTTP server serving
// `GET /get_all_keys` on loopback, the subscriber between them.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "feed/subscriber.h"
#include "index/index.h"
#include "master_stand_in.h"
#include "sglang/layout.h"
#include "sglang/page_hash.h"
#include "sglang/page_query.h"

namespace sci {
namespace {

using namespace std::chrono_literals;
using testing::LoopbackPublisher;
using testing::SnapshotServer;
using testing::WaitFor;
using testing::Master;
using testing::TickUntil;
using testing::AbsentKeyReader;

SubscriberOptions ResyncOptions(Master& master) {
  SubscriberOptions options;
  options.endpoint = master.publisher().endpoint();
  options.snapshot_url = master.snapshot().url();
  options.resync_min_interval_ms = 20;
  options.snapshot_timeout_ms = 5000;
  return options;
}

std::unique_ptr<Subscriber> StartSubscriber(Index& index, const SubscriberOptions& options) {
  SubscriberError code;
  std::string error;
  auto subscriber = Subscriber::Start(index, options, &code, &error);
  EXPECT_NE(subscriber, nullptr) << error;
  return subscriber;
}

TEST(IndexHold, AHeldIndexAnswersMissOnEveryReadPathUntilReleased) {
  Index index;
  const std::string_view keys[] = {"a", "b"};
  index.Hold();
  index.LoadKeys(keys);
  const uint64_t seed = TenantSeed({});
  const Fingerprint both[] = {FingerprintOf(seed, "a"), FingerprintOf(seed, "b")};
  EXPECT_EQ(index.GetStats().keys, 2u);  // loaded, not shown
  EXPECT_FALSE(index.Contains({}, "a"));
  EXPECT_FALSE(index.ContainsAll(both));
  {
    Index::Reader reader(index);
    EXPECT_FALSE(reader.ContainsKey(both[0]));
    EXPECT_FALSE(reader.ContainsAll(both));
  }
  EXPECT_FALSE(index.GetStats().has_sequence);  // the replay's first batch begins a run
  index.Release();
  EXPECT_TRUE(index.Contains({}, "a"));
  EXPECT_TRUE(index.ContainsAll(both));
}

TEST(ResyncTest, LateJoinSeesObjectsStoredBeforeItStarted) {
  Master master;
  for (int i = 0; i < 100; ++i) master.StoreLost("early-" + std::to_string(i));  // nobody listening yet
  Index index;
  auto subscriber = StartSubscriber(index, ResyncOptions(master));
  ASSERT_TRUE(master.publisher().AwaitSubscription());
  EXPECT_TRUE(index.GetStats().resyncing);
  EXPECT_FALSE(index.Contains({}, "early-0"));

  master.Store("late-0");  // the first message: proves the subscription, starts the download
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resyncs == 1; }));
  const Stats s = index.GetStats();
  EXPECT_FALSE(s.resyncing);
  EXPECT_EQ(s.snapshot_keys, 101u);
  EXPECT_EQ(s.resync_failures, 0u);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(index.Contains({}, "early-" + std::to_string(i))) << i;
  EXPECT_TRUE(index.Contains({}, "late-0"));  // in the snapshot (its own batch began the run)

  master.Store("late-1");  // live again
  ASSERT_TRUE(WaitFor([&] { return index.Contains({}, "late-1"); }));
}

// Snapshot keys carry no group, so a resynced page is proven key by key;
// the first query that proves it asks for its group back, and the
// subscriber's thread adopts it -- with its next message, or, on a quiet
// stream as here (a new leader announces nothing), within a few ms: from
// then on the page takes the fast path, as if the stream had announced it.
TEST(ResyncTest, ResyncedPagesTakeTheFastPathAgainAfterTheirFirstQuery) {
  LayoutSpec spec;
  spec.page_size = 16;
  spec.tp_size = 8;
  std::string error;
  const std::unique_ptr<const Layout> layout = Layout::Create(spec, &error);
  ASSERT_NE(layout, nullptr) << error;
  std::vector<uint32_t> tokens(4 * 16);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint32_t>(1000 + i);
  const std::vector<std::string> hashes = PageHashesHex(tokens, 16, false);

  Master master;
  for (size_t page = 0; page < hashes.size(); ++page) {
    for (const std::string& key : layout->KeysFor(hashes[page], page, hashes.size())) master.StoreLost(key);
  }
  Index index;
  auto subscriber = StartSubscriber(index, ResyncOptions(master));
  ASSERT_TRUE(master.publisher().AwaitSubscription());
  master.Tick();
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resyncs == 1; }));
  EXPECT_EQ(index.GetStats().snapshot_keys, 64u);

  std::vector<uint8_t> hits(hashes.size());
  PageQueryResult r = CheckPages(index, *layout, tokens, 16, hits);
  EXPECT_EQ(r.total_hits, 4u);
  EXPECT_EQ(r.fast_path, 0u);
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().groups_adopted == 4; }));  // no message sent
  r = CheckPages(index, *layout, tokens, 16, hits);
  EXPECT_EQ(r.total_hits, 4u);
  EXPECT_EQ(r.fast_path, 4u);

  // A removal off the stream (no group, as Mooncake sends it) reaches the page.
  master.Remove(layout->KeysFor(hashes[2], 2, hashes.size())[5]);
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().keys == 63; }));
  r = CheckPages(index, *layout, tokens, 16, hits);
  EXPECT_EQ(std::vector<int>(hits.begin(), hits.end()), (std::vector<int>{1, 1, 0, 1}));
  EXPECT_EQ(r.fast_path, 3u);
}

TEST(ResyncTest, RemovalArrivingWhileTheSnapshotDownloadsWins) {
  Master master;
  for (int i = 0; i < 50; ++i) master.StoreLost("k" + std::to_string(i));
  master.snapshot().Hold();  // the snapshot answers only when the test says
  Index index;
  auto subscriber = StartSubscriber(index, ResyncOptions(master));
  ASSERT_TRUE(master.publisher().AwaitSubscription());
  master.Tick();
  ASSERT_TRUE(WaitFor([&] { return master.snapshot().requests() == 1; }));

  // Removed while the download is under way, but the snapshot (a slow
  // master) still lists the key: the buffered removal must win.
  AbsentKeyReader reader(index, {"k7", "never-stored"});
  master.Send({testing::RemovedEvent(1000, "k7")});
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().messages_received == 2; }));
  master.snapshot().Release();

  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resyncs == 1; }));
  master.Store("after");
  ASSERT_TRUE(WaitFor([&] { return index.Contains({}, "after"); }));
  reader.Stop();
  EXPECT_EQ(reader.false_hits(), 0);
  EXPECT_GT(reader.queries(), 0u);
  EXPECT_TRUE(index.Contains({}, "k6"));
  EXPECT_FALSE(index.Contains({}, "k7"));
}

// Each failure leaves the index empty and answering miss, is counted, and
// the next attempt (once the master behaves) restores the keys.
class ResyncFailureTest : public ::testing::TestWithParam<SnapshotServer::Fault> {};

TEST_P(ResyncFailureTest, StaysConservativeThenRecovers) {
  Master master;
  for (int i = 0; i < 20; ++i) master.StoreLost("k" + std::to_string(i));
  master.snapshot().SetFault(GetParam());
  Index index;
  auto subscriber = StartSubscriber(index, ResyncOptions(master));
  ASSERT_TRUE(master.publisher().AwaitSubscription());
  ASSERT_TRUE(TickUntil(master, [&] { return index.GetStats().resync_failures >= 1; }));
  Stats s = index.GetStats();
  EXPECT_TRUE(s.resyncing);
  EXPECT_EQ(s.resyncs, 0u);
  EXPECT_EQ(s.keys, 0u);
  EXPECT_FALSE(index.Contains({}, "k0"));

  master.snapshot().SetFault(SnapshotServer::Fault::kNone);
  ASSERT_TRUE(TickUntil(master, [&] { return index.GetStats().resyncs == 1; }));
  s = index.GetStats();
  EXPECT_FALSE(s.resyncing);
  EXPECT_EQ(s.snapshot_keys, 20u);
  EXPECT_TRUE(index.Contains({}, "k19"));
}

INSTANTIATE_TEST_SUITE_P(Faults, ResyncFailureTest,
                         ::testing::Values(SnapshotServer::Fault::kStatus500, SnapshotServer::Fault::kShortBody,
                                           SnapshotServer::Fault::kNoFinalNewline,
                                           SnapshotServer::Fault::kLineTooLong));

TEST(ResyncTest, TimeOutFailsThenRecovers) {
  Master master;
  master.StoreLost("k");
  master.snapshot().Hold();
  Index index;
  SubscriberOptions options = ResyncOptions(master);
  options.snapshot_timeout_ms = 200;
  auto subscriber = StartSubscriber(index, options);
  ASSERT_TRUE(master.publisher().AwaitSubscription());
  ASSERT_TRUE(TickUntil(master, [&] { return index.GetStats().resync_failures >= 1; }));
  EXPECT_FALSE(index.Contains({}, "k"));
  EXPECT_TRUE(index.GetStats().resyncing);
  master.snapshot().Release();
  ASSERT_TRUE(TickUntil(master, [&] { return index.GetStats().resyncs == 1; }));
  EXPECT_TRUE(index.Contains({}, "k"));
}

TEST(ResyncTest, BufferOverflowFailsThenRecovers) {
  Master master;
  master.StoreLost("k");
  master.snapshot().Hold();
  Index index;
  SubscriberOptions options = ResyncOptions(master);
  options.resync_buffer_bytes = 4096;  // a few messages
  auto subscriber = StartSubscriber(index, options);
  ASSERT_TRUE(master.publisher().AwaitSubscription());
  ASSERT_TRUE(TickUntil(master, [&] { return index.GetStats().resync_failures >= 1; }));
  EXPECT_FALSE(index.Contains({}, "k"));
  master.snapshot().Release();
  ASSERT_TRUE(TickUntil(master, [&] { return index.GetStats().resyncs == 1; }));
  EXPECT_TRUE(index.Contains({}, "k"));
}

TEST(ResyncTest, GapInsideTheBufferFailsThenRecovers) {
  Master master;
  master.StoreLost("k");
  master.snapshot().Hold();
  Index index;
  auto subscriber = StartSubscriber(index, ResyncOptions(master));
  ASSERT_TRUE(master.publisher().AwaitSubscription());
  master.Tick();
  ASSERT_TRUE(WaitFor([&] { return master.snapshot().requests() == 1; }));
  master.SkipSequence();
  master.Tick();  // a gap inside the buffer
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resync_failures == 1; }));
  EXPECT_FALSE(index.Contains({}, "k"));
  master.snapshot().Release();
  ASSERT_TRUE(TickUntil(master, [&] { return index.GetStats().resyncs == 1; }));
  EXPECT_TRUE(index.Contains({}, "k"));
}

TEST(ResyncTest, AGapResyncs) {
  Master master;
  master.StoreLost("k");
  Index index;
  auto subscriber = StartSubscriber(index, ResyncOptions(master));
  ASSERT_TRUE(master.publisher().AwaitSubscription());
  ASSERT_TRUE(TickUntil(master, [&] { return index.GetStats().resyncs == 1; }));
  ASSERT_TRUE(index.Contains({}, "k"));

  AbsentKeyReader reader(index, {"lost-removal"});
  master.Store("lost-removal");
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().keys == 2; }));
  reader.Stop();  // present now, legitimately
  // Its removal is lost: only the snapshot can tell.
  master.snapshot().Erase("lost-removal");
  master.SkipSequence();
  master.StoreLost("stored-in-the-gap");
  AbsentKeyReader after(index, {"lost-removal"});
  ASSERT_TRUE(TickUntil(master, [&] { return index.GetStats().resyncs == 2; }));
  after.Stop();
  EXPECT_GE(index.GetStats().sequence_gaps, 1u);
  EXPECT_TRUE(index.Contains({}, "k"));
  EXPECT_TRUE(index.Contains({}, "stored-in-the-gap"));
  EXPECT_FALSE(index.Contains({}, "lost-removal"));
}

TEST(ResyncTest, RetargetMovesToAnotherMaster) {
  Master first, second;
  first.StoreLost("on-first");
  second.StoreLost("on-second");
  Index index;
  auto subscriber = StartSubscriber(index, ResyncOptions(first));
  ASSERT_TRUE(first.publisher().AwaitSubscription());
  ASSERT_TRUE(TickUntil(first, [&] { return index.GetStats().resyncs == 1; }));
  ASSERT_TRUE(index.Contains({}, "on-first"));

  std::string error;
  ASSERT_EQ(subscriber->Retarget(second.publisher().endpoint(), second.snapshot().url(), &error),
            SubscriberError::kNone)
      << error;
  EXPECT_FALSE(index.Contains({}, "on-first"));  // a new sequence space: cleared at once
  ASSERT_TRUE(second.publisher().AwaitSubscription());
  ASSERT_TRUE(TickUntil(second, [&] { return index.GetStats().resyncs == 2; }));
  EXPECT_TRUE(index.Contains({}, "on-second"));
  EXPECT_FALSE(index.Contains({}, "on-first"));

  EXPECT_EQ(subscriber->Retarget("bogus://x", "", &error), SubscriberError::kInvalidArgument);
  EXPECT_EQ(subscriber->Retarget(second.publisher().endpoint(), "ftp://x/", &error),
            SubscriberError::kInvalidArgument);
  EXPECT_TRUE(index.Contains({}, "on-second"));  // a refused retarget changes nothing
}

TEST(ResyncTest, StopDuringADownloadIsPromptAndLeavesNoHalfSnapshot) {
  Master master;
  for (int i = 0; i < 10; ++i) master.StoreLost("k" + std::to_string(i));
  master.snapshot().Hold();  // the download hangs until the end of the test
  Index index;
  SubscriberOptions options = ResyncOptions(master);
  options.snapshot_timeout_ms = 60000;
  auto subscriber = StartSubscriber(index, options);
  ASSERT_TRUE(master.publisher().AwaitSubscription());
  master.Tick();
  ASSERT_TRUE(WaitFor([&] { return master.snapshot().requests() == 1; }));
  const auto started = std::chrono::steady_clock::now();
  subscriber->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 2s);  // not the 60 s time-out
  const Stats s = index.GetStats();
  EXPECT_FALSE(s.resyncing);
  EXPECT_EQ(s.keys, 0u);
  EXPECT_EQ(s.resyncs, 0u);
}

TEST(ResyncTest, OptionsAreValidated) {
  Index index;
  SubscriberError code;
  std::string error;
  SubscriberOptions options;
  options.endpoint = "tcp://127.0.0.1:1";
  options.snapshot_url = "file:///etc/passwd";
  EXPECT_EQ(Subscriber::Start(index, options, &code, &error), nullptr);
  EXPECT_NE(error.find("snapshot_url"), std::string::npos) << error;
  options.snapshot_url = "http://127.0.0.1:1/get_all_keys";
  options.resync_min_interval_ms = 0;
  EXPECT_EQ(Subscriber::Start(index, options, &code, &error), nullptr);
  EXPECT_NE(error.find("resync_min_interval_ms"), std::string::npos) << error;
  options = {};
  options.etcd_endpoints = {"http://127.0.0.1:1"};
  EXPECT_EQ(Subscriber::Start(index, options, &code, &error), nullptr);
  EXPECT_NE(error.find("event_port"), std::string::npos) << error;
  options.event_port = 5557;
  options.endpoint = "tcp://127.0.0.1:1";
  EXPECT_EQ(Subscriber::Start(index, options, &code, &error), nullptr);
  EXPECT_NE(error.find("endpoint"), std::string::npos) << error;
  EXPECT_EQ(code, SubscriberError::kInvalidArgument);
}

}  // namespace
}  // namespace sci
