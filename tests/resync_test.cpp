// Resync from a snapshot, end to end over real sockets: a real ZeroMQ
// publisher sending production-format bytes and a real HTTP server serving
// `GET /get_all_keys` on loopback, the subscriber between them.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "feed/resync_buffer.h"
#include "feed/subscriber.h"
#include "index/index.h"
#include "log_capture.h"
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

SubscriberOptions ResyncOptions(Master& master) { return sci::testing::OptionsToFollow(master); }

std::unique_ptr<Subscriber> StartSubscriber(Index& index, const SubscriberOptions& options) {
  SubscriberError code;
  std::string error;
  auto subscriber = Subscriber::Start(index, options, &code, &error);
  EXPECT_NE(subscriber, nullptr) << error;
  return subscriber;
}

// A subscriber whose first download has reached the master and is held
// there (until master.snapshot().Release()).
std::unique_ptr<Subscriber> StartWithTheDownloadHeld(Master& master, Index& index, const SubscriberOptions& options) {
  master.snapshot().Hold();
  auto subscriber = StartSubscriber(index, options);
  EXPECT_TRUE(master.publisher().AwaitSubscription());
  master.Tick();  // the first message: proves the subscription, starts the download
  EXPECT_TRUE(WaitFor([&] { return master.snapshot().requests() == 1; }));
  return subscriber;
}

TEST(IndexConcealed, AConcealedIndexAnswersMissOnEveryReadPathUntilRevealed) {
  Index index;
  const std::string_view keys[] = {"a", "b"};
  index.Conceal();
  index.LoadKeys(keys);
  const uint64_t seed = TenantSeed({});
  EXPECT_EQ(index.GetStats().keys, 2u);  // loaded, not shown
  EXPECT_FALSE(index.Contains({}, "a"));
  {
    Index::Reader reader(index);
    EXPECT_FALSE(reader.Contains(seed, "a"));
    EXPECT_EQ(reader.KeyTier(seed, "b"), MediumTiers::kAbsent);
  }
  EXPECT_FALSE(index.GetStats().has_sequence);  // the replay's first batch begins a run
  index.Reveal();
  EXPECT_TRUE(index.Contains({}, "a"));
  {
    Index::Reader reader(index);
    EXPECT_TRUE(reader.Contains(seed, "b"));
  }
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

// The conductor line's snapshot lists puts still in progress
// (docs/operations.md): after a resync on a master whose stream shows the
// second generation, a warning says so, once; on main's, nothing.
TEST(ResyncTest, ASecondGenerationMastersSnapshotIsWarnedOfOnce) {
  for (const bool second : {false, true}) {
    SCOPED_TRACE(second ? "second generation" : "first generation");
    testing::LogCapture log;
    Master master;
    master.StoreLost("early");
    Index index;
    auto subscriber = StartSubscriber(index, ResyncOptions(master));
    ASSERT_TRUE(master.publisher().AwaitSubscription());
    MooncakeEvent event = sci::testing::StoredEvent(master.NextEventId(), "late");
    event.second_generation = second;
    event.medium = "cpu";
    master.snapshot().Add("late");
    master.Send({event});
    ASSERT_TRUE(WaitFor([&] { return index.GetStats().resyncs == 1; }));
    EXPECT_EQ(index.GetStats().stream_generation, second ? 2u : 1u);
    EXPECT_EQ(log.Count(LogLevel::kWarn, "its snapshot may list puts still in progress"), second ? 1u : 0u);
  }
}

// Snapshot keys carry no group, and since 1.4 need none: they land in their
// pages' entries, so the first query of a resynced prompt reads one entry a
// page, as any query does (1.3 proved it key by key and adopted it after).
TEST(ResyncTest, AResyncedPromptsFirstQueryReadsOneEntryAPage) {
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
  // 1.4: snapshot keys are page entries like any; the first query of a
  // resynced prompt reads one entry a page, as every later one does.
  EXPECT_EQ(r.total_hits, 4u);
  EXPECT_EQ(r.fast_path, 4u);
  EXPECT_EQ(index.GetStats().groups, 4u);

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
  Index index;
  // The snapshot answers only when the test says.
  auto subscriber = StartWithTheDownloadHeld(master, index, ResyncOptions(master));
  ASSERT_FALSE(::testing::Test::HasFailure());

  // Removed while the download is under way, but the snapshot (a slow
  // master) still lists the key: the buffered removal must win.
  AbsentKeyReader reader(index, {"k7", "never-stored"});
  master.Send({testing::RemovedEvent(master.NextEventId(), "k7")});
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

// Mooncake changes its metadata before its publisher thread sends the
// event (a queue between them), so a snapshot can already reflect events
// that arrive after its download ends. Applied after it, a store the
// snapshot has already seen removed would bring the key back until its
// removal arrives: a false hit. The subscriber keeps buffering for a while
// after the download and replays what came before it serves.
TEST(ResyncTest, EventsArrivingAfterTheSnapshotThatItReflectsNeverShow) {
  Master master;
  for (int i = 0; i < 50; ++i) master.StoreLost("k" + std::to_string(i));
  Index index;
  SubscriberOptions options = ResyncOptions(master);
  // The events below follow the snapshot within this, however busy the
  // machine (Mooncake's publisher: within a few ms; the default is 100).
  options.resync_catch_up_ms = 1000;
  auto subscriber = StartWithTheDownloadHeld(master, index, options);
  ASSERT_FALSE(::testing::Test::HasFailure());

  // The metadata: "stale" stored and removed, the fillers stored; the
  // snapshot is read from it. Their events are still queued at the master.
  constexpr int kFillers = 3000;
  for (int i = 0; i < kFillers; ++i) master.snapshot().Add("filler-" + std::to_string(i));
  AbsentKeyReader reader(index, {"stale"});
  master.snapshot().Release();
  master.Send({testing::StoredEvent(master.NextEventId(), "stale")});
  for (int i = 0; i < kFillers; ++i) {
    master.Send({testing::StoredEvent(master.NextEventId(), "filler-" + std::to_string(i))});
  }
  master.Send({testing::RemovedEvent(master.NextEventId(), "stale")});

  ASSERT_TRUE(WaitFor([&] {
    return index.GetStats().resyncs == 1 && index.Contains({}, "filler-" + std::to_string(kFillers - 1));
  }));
  reader.Stop();
  EXPECT_EQ(reader.false_hits(), 0);
  EXPECT_GT(reader.queries(), 0u);
  EXPECT_FALSE(index.Contains({}, "stale"));
  EXPECT_TRUE(index.Contains({}, "k7"));
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

// A buffer that cannot hold the stream until the snapshot is released: the
// resync fails, then succeeds once the stream fits (`limit`: what the buffer
// may hold beyond its 4 KiB of memory).
void ExpectBufferOverflowThenRecovery(void (*limit)(SubscriberOptions&)) {
  Master master;
  master.StoreLost("k");
  master.snapshot().Hold();
  Index index;
  SubscriberOptions options = ResyncOptions(master);
  options.resync_buffer_bytes = 4096;  // a few messages
  limit(options);
  auto subscriber = StartSubscriber(index, options);
  ASSERT_TRUE(master.publisher().AwaitSubscription());
  ASSERT_TRUE(TickUntil(master, [&] { return index.GetStats().resync_failures >= 1; }));
  EXPECT_FALSE(index.Contains({}, "k"));
  master.snapshot().Release();
  ASSERT_TRUE(TickUntil(master, [&] { return index.GetStats().resyncs == 1; }));
  EXPECT_TRUE(index.Contains({}, "k"));
}

TEST(ResyncTest, BufferOverflowFailsThenRecovers) {
  ExpectBufferOverflowThenRecovery([](SubscriberOptions& options) { options.resync_spill_bytes = 0; });  // no file
}

// A stream longer than the memory buffer goes on in the spill file and is
// replayed in order after the snapshot: keys stored and removed while the
// download was held end as the stream left them, none of them lost.
TEST(ResyncTest, AStreamBeyondTheMemoryBufferSpillsToAFileAndReplaysInOrder) {
  Master master;
  master.StoreLost("k");
  master.snapshot().Hold();
  Index index;
  SubscriberOptions options = ResyncOptions(master);
  options.resync_buffer_bytes = 4096;  // a few messages; the rest spills
  options.resync_spill_dir = ::testing::TempDir();
  auto subscriber = StartSubscriber(index, options);
  ASSERT_TRUE(master.publisher().AwaitSubscription());
  master.Tick();
  ASSERT_TRUE(WaitFor([&] { return master.snapshot().requests() == 1; }));
  const uint64_t received = index.GetStats().messages_received;
  for (int i = 0; i < 200; ++i) master.Store("live-" + std::to_string(i));
  for (int i = 0; i < 200; i += 2) master.Remove("live-" + std::to_string(i));
  // All 300 in the buffer (most of them in the file) before the snapshot comes.
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().messages_received >= received + 300; }));
  master.snapshot().Erase("k");  // the snapshot is taken after the stream began: exact either way
  master.snapshot().Release();
  ASSERT_TRUE(TickUntil(master, [&] { return index.GetStats().resyncs == 1; }));
  EXPECT_EQ(index.GetStats().resync_failures, 0u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(index.Contains({}, "live-" + std::to_string(i)), i % 2 == 1) << i;
  EXPECT_FALSE(index.Contains({}, "k"));
  EXPECT_EQ(index.GetStats().keys, 100u);
}

// A spill directory that cannot hold a file: the buffer is full at its
// memory limit, as without a file, and the resync recovers once the stream
// fits.
TEST(ResyncTest, ASpillFileThatCannotBeMadeIsABufferOverflow) {
  ExpectBufferOverflowThenRecovery(
      [](SubscriberOptions& options) { options.resync_spill_dir = ::testing::TempDir() + "/no-such-directory"; });
}

TEST(ResyncBuffer, GivesBackEveryMessageInOrderFromMemoryThenTheFile) {
  ResyncBuffer buffer(ResyncBuffer::Limits{600, size_t{1} << 20, ::testing::TempDir()});
  std::vector<std::vector<std::string>> sent;
  for (int i = 0; i < 50; ++i) {
    std::vector<std::string> frames = {"topic", std::string(8, static_cast<char>(i)),
                                       std::string(static_cast<size_t>(i * 7), 'a' + static_cast<char>(i % 26))};
    std::vector<zmq::message_t> message;
    for (const std::string& f : frames) message.emplace_back(f.data(), f.size());
    std::string error;
    ASSERT_TRUE(buffer.Add(message, &error)) << error;
    sent.push_back(frames);
  }
  EXPECT_EQ(buffer.messages(), 50u);
  EXPECT_GT(buffer.memory_bytes(), 0u);
  EXPECT_GT(buffer.spilled_bytes(), 0u);
  for (int pass = 0; pass < 2; ++pass) {  // a failed resync keeps the buffer for the next download
    size_t i = 0;
    std::string error;
    ASSERT_TRUE(buffer.ForEach(
        [&](std::span<const std::span<const uint8_t>> frames) {
          EXPECT_LT(i, sent.size());
          if (i >= sent.size()) return false;
          EXPECT_EQ(frames.size(), sent[i].size());
          for (size_t f = 0; f < frames.size() && f < sent[i].size(); ++f) {
            EXPECT_EQ(std::string(reinterpret_cast<const char*>(frames[f].data()), frames[f].size()), sent[i][f]);
          }
          ++i;
          return true;
        },
        &error))
        << error;
    EXPECT_EQ(i, sent.size());
  }
  // Appending after a replay read part of the file (it stopped early): the
  // new message goes after all the others.
  {
    size_t seen = 0;
    std::string stopped;
    EXPECT_FALSE(buffer.ForEach([&](std::span<const std::span<const uint8_t>>) { return ++seen < 40; }, &stopped));
    EXPECT_EQ(seen, 40u);
    const std::string body(300, 'z');
    zmq::message_t message[] = {zmq::message_t(body.data(), body.size())};
    std::string error;
    ASSERT_TRUE(buffer.Add(message, &error)) << error;
    sent.push_back({body});
    size_t i = 0;
    ASSERT_TRUE(buffer.ForEach(
        [&](std::span<const std::span<const uint8_t>> frames) {
          const std::string last(reinterpret_cast<const char*>(frames.back().data()), frames.back().size());
          EXPECT_EQ(last, sent[i].back()) << i;
          ++i;
          return true;
        },
        &error))
        << error;
    EXPECT_EQ(i, sent.size());
  }
  buffer.Clear();
  EXPECT_TRUE(buffer.empty());
  EXPECT_EQ(buffer.spilled_bytes(), 0u);
}

TEST(ResyncBuffer, RefusesWhatFitsNeitherLimitAndStaysAsItWas) {
  ResyncBuffer buffer(ResyncBuffer::Limits{600, 1000, ::testing::TempDir()});
  std::string error;
  auto add = [&](size_t bytes) {
    const std::string body(bytes, 'x');
    zmq::message_t message[] = {zmq::message_t(body.data(), body.size())};
    return buffer.Add(message, &error);
  };
  EXPECT_TRUE(add(300));   // memory: 300 + overhead
  EXPECT_TRUE(add(500));   // spilled: memory is full
  EXPECT_FALSE(add(500));  // the file is too
  EXPECT_NE(error.find("spill file of 1000 bytes full"), std::string::npos) << error;
  EXPECT_EQ(buffer.messages(), 2u);
  size_t seen = 0;
  EXPECT_TRUE(buffer.ForEach([&](std::span<const std::span<const uint8_t>> frames) { return ++seen, frames.size() == 1; },
                             &error));
  EXPECT_EQ(seen, 2u);
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

// Issue 24, "a resync can wait for ever". The batches after a clear show
// the subscription live; from then on the resync buffers, and its download
// starts when the back-off ends -- on a timer, not on a later message -- so
// a master gone quiet after a burst is resynced all the same.

// How long the index took to be full again, for the test log.
void ReportRecovery(const char* what, std::chrono::steady_clock::duration took) {
  const auto ms = std::chrono::duration_cast<std::chrono::microseconds>(took).count() / 1000.0;
  ::testing::Test::RecordProperty(what, std::to_string(ms));
  std::printf("%s: %.1f ms\n", what, ms);
}

TEST(ResyncTest, AGapThenASilentMasterIsFullAgainWithinTheBackOffAndTheDownload) {
  constexpr auto kBackOff = 500ms;
  Master master;
  for (int i = 0; i < 100; ++i) master.StoreLost("k" + std::to_string(i));
  Index index;
  SubscriberOptions options = ResyncOptions(master);
  options.resync_min_interval_ms = kBackOff.count();
  auto subscriber = StartSubscriber(index, options);
  ASSERT_TRUE(master.publisher().AwaitSubscription());
  const auto before_first = std::chrono::steady_clock::now();  // the first download starts after this...
  master.Tick();
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resyncs == 1; }));
  const auto after_first = std::chrono::steady_clock::now();  // ... and before this

  // A burst that loses batches, within the first download's back-off; the
  // batch revealing the gap is the last the master sends.
  master.Store("before-the-gap");
  master.SkipSequence();
  master.Store("revealed-the-gap");  // begins a run: its store is withheld, the snapshot has it
  ASSERT_TRUE(WaitFor([&] {
    const Stats now = index.GetStats();
    return now.messages_received == 3 && now.resyncing;
  }));
  const auto gap_seen = std::chrono::steady_clock::now();
  Stats s = index.GetStats();
  EXPECT_EQ(s.sequence_gaps, 1u);
  EXPECT_TRUE(s.resyncing);
  EXPECT_FALSE(index.Contains({}, "k0"));
  if (std::chrono::steady_clock::now() < before_first + kBackOff) {
    EXPECT_EQ(master.snapshot().requests(), 1);  // the back-off holds the second download
  }

  // Silence from here on: no event, no batch.
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resyncs == 2; }));
  const auto full = std::chrono::steady_clock::now();
  EXPECT_GE(full - before_first, kBackOff);  // not before the back-off ended
  // Back-off + download time: 100 keys on loopback take a few ms; the rest
  // is slack for a busy machine (without the fix: never).
  const auto due = std::max(after_first + kBackOff, gap_seen);
  EXPECT_LE(full - due, 1s);
  ReportRecovery("gap_then_silence_recovery_after_gap_ms", full - gap_seen);
  s = index.GetStats();
  EXPECT_EQ(s.messages_received, 3u);  // nothing new was needed
  EXPECT_FALSE(s.resyncing);
  EXPECT_EQ(s.sequence_gaps, 1u);
  EXPECT_EQ(s.resync_failures, 0u);
  EXPECT_EQ(master.snapshot().requests(), 2);
  EXPECT_EQ(s.keys, 102u);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(index.Contains({}, "k" + std::to_string(i))) << i;
  EXPECT_TRUE(index.Contains({}, "before-the-gap"));
  EXPECT_TRUE(index.Contains({}, "revealed-the-gap"));

  // The stream goes on after the gap's batch: the next one is in sequence
  // (applied whole, not a run's first), and a lost one is still a gap.
  const uint64_t withheld = s.stores_withheld;
  master.Store("after");
  ASSERT_TRUE(WaitFor([&] { return index.Contains({}, "after"); }));
  EXPECT_EQ(index.GetStats().stores_withheld, withheld);
  EXPECT_EQ(index.GetStats().sequence_gaps, 1u);
  master.SkipSequence();
  master.Tick();
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().sequence_gaps == 2; }));
}

// The other run: the resync fails under the burst (a gap while its
// download runs), and the master is silent by the time the back-off ends.
TEST(ResyncTest, AResyncFailedByABurstRetriesWhenTheBackOffEndsThoughTheMasterIsSilent) {
  constexpr auto kBackOff = 200ms;  // doubled by the failure
  Master master;
  for (int i = 0; i < 20; ++i) master.StoreLost("k" + std::to_string(i));
  master.snapshot().Hold();
  Index index;
  SubscriberOptions options = ResyncOptions(master);
  options.resync_min_interval_ms = kBackOff.count();
  auto subscriber = StartSubscriber(index, options);
  ASSERT_TRUE(master.publisher().AwaitSubscription());
  master.Tick();
  ASSERT_TRUE(WaitFor([&] { return master.snapshot().requests() == 1; }));
  for (int i = 0; i < 50; ++i) {
    if (i == 10) master.SkipSequence();  // lost while the download runs
    master.Store("burst-" + std::to_string(i));
  }
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().messages_received == 51; }));
  const auto burst_seen = std::chrono::steady_clock::now();
  EXPECT_EQ(index.GetStats().resync_failures, 1u);
  EXPECT_EQ(index.GetStats().sequence_gaps, 1u);
  master.snapshot().Release();

  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resyncs == 1; }));
  const auto full = std::chrono::steady_clock::now();
  EXPECT_LE(full - burst_seen, 2 * kBackOff + 1s);
  ReportRecovery("failed_resync_then_silence_recovery_ms", full - burst_seen);
  const Stats s = index.GetStats();
  EXPECT_EQ(s.messages_received, 51u);
  EXPECT_EQ(s.keys, 70u);
  for (int i = 0; i < 50; ++i) EXPECT_TRUE(index.Contains({}, "burst-" + std::to_string(i))) << i;
  EXPECT_EQ(s.sequence_gaps, 1u);
}

// Every gap the stream shows is counted, once: while the download runs
// (which fails it), while the back-off runs (which restarts the buffer), and
// the one that clears a serving index (counted by the index, not again by
// the resync it starts).
TEST(ResyncTest, GapsWhileAResyncWaitsOrRunsAreEachCountedOnce) {
  constexpr auto kBackOff = 1000ms;  // 2 s after the failure: the gaps below fall well inside
  Master master;
  master.StoreLost("k");  // sequence 1, lost
  master.snapshot().Hold();
  Index index;
  SubscriberOptions options = ResyncOptions(master);
  options.resync_min_interval_ms = kBackOff.count();
  auto subscriber = StartSubscriber(index, options);
  ASSERT_TRUE(master.publisher().AwaitSubscription());
  const auto before_first = std::chrono::steady_clock::now();
  master.Tick();  // 2: starts the download (held)
  ASSERT_TRUE(WaitFor([&] { return master.snapshot().requests() == 1; }));
  master.SkipSequence();
  master.Tick();  // 4: a gap while the download runs
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resync_failures == 1; }));
  EXPECT_EQ(index.GetStats().sequence_gaps, 1u);
  master.SkipSequence();
  master.Tick();  // 6: a gap while the back-off runs
  master.SkipSequence();
  master.SkipSequence();
  master.Tick();  // 9: another
  master.Tick();  // 10: in sequence
  master.Tick();  // 11
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().messages_received == 6; }));
  Stats s = index.GetStats();
  EXPECT_EQ(s.sequence_gaps, 3u);
  EXPECT_EQ(s.resync_failures, 1u);
  if (std::chrono::steady_clock::now() < before_first + 2 * kBackOff) {
    EXPECT_EQ(master.snapshot().requests(), 1);  // those came during the back-off
  }
  master.snapshot().Release();
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resyncs == 1; }));  // no message needed
  s = index.GetStats();
  EXPECT_EQ(s.sequence_gaps, 3u);  // the replay counted nothing again
  EXPECT_EQ(s.last_sequence, 11u);
  EXPECT_TRUE(index.Contains({}, "k"));

  master.SkipSequence();
  master.Tick();  // 13: a gap on a serving index
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().sequence_gaps == 4; }));
  master.Tick();  // 14: buffered by the resync that gap started, in sequence
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resyncs == 2; }));
  s = index.GetStats();
  EXPECT_EQ(s.sequence_gaps, 4u);  // counted by the index alone
  EXPECT_EQ(s.last_sequence, 14u);
  EXPECT_TRUE(index.Contains({}, "k"));
}

// Messages during the back-off are buffered, and their replay after the
// (later) snapshot is exact: a removal made then is honoured even if the
// snapshot still lists the key (a lagging master), a key stored and removed
// then stays absent, a key stored then is present -- with no message after.
TEST(ResyncTest, MessagesDuringTheBackOffAreReplayedExactly) {
  constexpr auto kBackOff = 1000ms;
  Master master;
  for (int i = 0; i < 10; ++i) master.StoreLost("k" + std::to_string(i));
  Index index;
  SubscriberOptions options = ResyncOptions(master);
  options.resync_min_interval_ms = kBackOff.count();
  auto subscriber = StartSubscriber(index, options);
  ASSERT_TRUE(master.publisher().AwaitSubscription());
  const auto before_first = std::chrono::steady_clock::now();
  master.Tick();
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resyncs == 1; }));
  ASSERT_TRUE(index.Contains({}, "k3"));

  master.SkipSequence();
  master.Tick();  // a gap: cleared, resync waiting for the back-off
  ASSERT_TRUE(WaitFor([&] {
    const Stats now = index.GetStats();
    return now.sequence_gaps == 1 && now.resyncing;  // cleared, and held from here
  }));
  AbsentKeyReader reader(index, {"k3", "short-lived", "never-stored"});
  master.Store("stored-in-the-back-off");
  master.Send({testing::RemovedEvent(master.NextEventId(), "k3")});  // the snapshot still lists k3
  master.Store("short-lived");
  master.Remove("short-lived");
  master.Store("also-stored");
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().messages_received == 7; }));
  if (std::chrono::steady_clock::now() < before_first + kBackOff) {
    EXPECT_EQ(master.snapshot().requests(), 1);  // all of them came during the back-off
  }

  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resyncs == 2; }));  // silence: no message needed
  reader.Stop();
  EXPECT_EQ(reader.false_hits(), 0);
  EXPECT_GT(reader.queries(), 0u);
  const Stats s = index.GetStats();
  EXPECT_EQ(s.messages_received, 7u);
  EXPECT_EQ(s.resync_failures, 0u);
  EXPECT_EQ(s.sequence_gaps, 1u);
  EXPECT_FALSE(index.Contains({}, "k3"));
  EXPECT_FALSE(index.Contains({}, "short-lived"));
  EXPECT_TRUE(index.Contains({}, "stored-in-the-back-off"));
  EXPECT_TRUE(index.Contains({}, "also-stored"));
  for (int i = 0; i < 10; ++i) {
    if (i != 3) EXPECT_TRUE(index.Contains({}, "k" + std::to_string(i))) << i;
  }
  master.Store("after");
  ASSERT_TRUE(WaitFor([&] { return index.Contains({}, "after"); }));
}

// The burst, compressed: batches lost every now and then while
// resyncs come and go (a gap clears a serving index, another fails a running
// download or restarts a waiting buffer), then silence. Every lost run is
// counted exactly once, whoever saw it, and the index is full again within
// the (possibly doubled) back-off and a download, with no new event. With a
// 1 ms back-off the gaps mostly meet running downloads and serving indexes;
// with 50 ms, mostly a waiting buffer.
class ResyncBurstTest : public ::testing::TestWithParam<int> {};

TEST_P(ResyncBurstTest, ABurstLosingBatchesCountsEachGapOnceAndRecoversInSilence) {
  const std::chrono::milliseconds kBackOff(GetParam());  // up to 16 x after failures in a row
  Master master;
  for (int i = 0; i < 200; ++i) master.StoreLost("k" + std::to_string(i));
  Index index;
  SubscriberOptions options = ResyncOptions(master);
  options.resync_min_interval_ms = kBackOff.count();
  auto subscriber = StartSubscriber(index, options);
  ASSERT_TRUE(master.publisher().AwaitSubscription());
  master.Tick();
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resyncs == 1; }));

  constexpr int kBatches = 3000;
  int lost_runs = 0;
  for (int i = 0; i < kBatches; ++i) {
    if (i % 150 == 75) {  // a run of lost batches, one of them removing a key
      master.SkipSequence();
      master.SkipSequence();
      master.snapshot().Erase("k" + std::to_string(i / 150));
      ++lost_runs;
    }
    if (i % 150 == 100) {
      master.Remove("k" + std::to_string(100 + i / 150));
    } else {
      master.Store("b" + std::to_string(i));
    }
  }
  const uint64_t sent = 1 + kBatches;
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().messages_received == sent; }, 30s));
  const auto burst_seen = std::chrono::steady_clock::now();

  ASSERT_TRUE(WaitFor([&] {
    const Stats now = index.GetStats();
    return !now.resyncing && now.keys == 200 - 40 + kBatches - 20;
  }));
  const auto full = std::chrono::steady_clock::now();
  ReportRecovery("burst_then_silence_recovery_ms", full - burst_seen);
  EXPECT_LE(full - burst_seen, 16 * kBackOff + 1s);
  const Stats s = index.GetStats();
  EXPECT_EQ(s.messages_received, sent);
  EXPECT_EQ(s.sequence_gaps, static_cast<uint64_t>(lost_runs));
  EXPECT_EQ(s.last_sequence, 200 + 1 + kBatches + 2 * static_cast<uint64_t>(lost_runs));
  for (int r = 0; r < 20; ++r) {
    EXPECT_FALSE(index.Contains({}, "k" + std::to_string(r))) << r;         // removed in a lost batch
    EXPECT_FALSE(index.Contains({}, "k" + std::to_string(100 + r))) << r;   // removed on the stream
  }
  EXPECT_TRUE(index.Contains({}, "k99"));
  EXPECT_TRUE(index.Contains({}, "b0"));
  EXPECT_TRUE(index.Contains({}, "b" + std::to_string(kBatches - 1)));
  std::printf("burst: %d lost runs, sequence_gaps %llu, resyncs %llu, resync_failures %llu\n", lost_runs,
              static_cast<unsigned long long>(s.sequence_gaps), static_cast<unsigned long long>(s.resyncs),
              static_cast<unsigned long long>(s.resync_failures));
}

INSTANTIATE_TEST_SUITE_P(BackOffMs, ResyncBurstTest, ::testing::Values(1, 50));

// "A message received on this connection since the clear": a connection
// lost and made again proves nothing until a message comes on it (one
// published before the new subscription reached the publisher would be
// lost unseen), so the back-off's end does not start the download then;
// the next message does.
TEST(ResyncTest, AReconnectWithoutAMessageDoesNotProveTheSubscriptionLive) {
  constexpr auto kBackOff = 1000ms;
  SnapshotServer snapshot;
  for (int i = 0; i < 10; ++i) snapshot.Add("k" + std::to_string(i));
  const std::string endpoint = testing::UniqueIpcEndpoint("sci-resync");
  auto publisher = std::make_unique<LoopbackPublisher>(endpoint);
  Index index;
  SubscriberOptions options;
  options.endpoint = endpoint;
  options.snapshot_url = snapshot.url();
  options.resync_min_interval_ms = kBackOff.count();
  options.snapshot_timeout_ms = 5000;
  auto subscriber = StartSubscriber(index, options);
  ASSERT_TRUE(publisher->AwaitSubscription());
  const auto before_first = std::chrono::steady_clock::now();
  publisher->SendBatch(1, {});
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resyncs == 1; }));
  publisher->SendBatch(3, {});  // a gap: cleared; its batch proves this connection live
  ASSERT_TRUE(WaitFor([&] {
    const Stats now = index.GetStats();
    return now.sequence_gaps == 1 && now.resyncing;
  }));
  publisher.reset();  // the connection goes before the back-off ends
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().subscriber_disconnects == 1; }));
  if (std::chrono::steady_clock::now() >= before_first + kBackOff) {
    GTEST_SKIP() << "the machine was too slow to lose the connection within the back-off";
  }
  publisher = std::make_unique<LoopbackPublisher>(endpoint);
  ASSERT_TRUE(publisher->AwaitSubscription());
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().subscriber_connects == 2; }));

  // Past the back-off, still connected, no message: no download.
  const auto window = before_first + kBackOff + 300ms - std::chrono::steady_clock::now();
  EXPECT_FALSE(WaitFor([&] { return snapshot.requests() == 2; },
                       std::chrono::duration_cast<std::chrono::milliseconds>(window)));
  EXPECT_TRUE(index.GetStats().resyncing);
  EXPECT_FALSE(index.Contains({}, "k0"));

  publisher->SendBatch(4, {});  // in sequence after 3, on the new connection
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().resyncs == 2; }));
  const Stats s = index.GetStats();
  EXPECT_EQ(s.sequence_gaps, 1u);
  EXPECT_EQ(s.last_sequence, 4u);
  EXPECT_TRUE(index.Contains({}, "k9"));
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
  Index index;
  SubscriberOptions options = ResyncOptions(master);
  options.snapshot_timeout_ms = 60000;
  // The download hangs until the end of the test.
  auto subscriber = StartWithTheDownloadHeld(master, index, options);
  ASSERT_FALSE(::testing::Test::HasFailure());
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
