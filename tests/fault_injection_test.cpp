// Faults injected into a live feed over real ZeroMQ sockets on loopback: a
// publisher killed and restarted, a publisher overrunning the subscriber's
// receive high-water mark, a subscriber stopped and started again and again,
// an endpoint nobody listens on yet, ten thousand malformed messages in a
// row, and an index that runs out of room. In every case the index keeps
// serving, its counters say what happened, and it never answers a hit for a
// page whose objects the publisher does not hold.
//
// Every wait is bounded and on a condition (testing::WaitFor, the
// publisher's subscription); nothing sleeps to synchronise.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zmq.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "index/index.h"
#include "sglang/layout.h"
#include "loopback_publisher.h"
#include "encode/mooncake_encoder.h"
#include "sglang/page_hash.h"
#include "sglang/page_query.h"
#include "feed/subscriber.h"

// Sanitizer runtimes keep freed memory in quarantine and map shadow memory:
// there RSS says nothing about leaks (LeakSanitizer checks those instead).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SCI_RSS_IS_MEANINGFUL 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SCI_RSS_IS_MEANINGFUL 0
#endif
#endif
#ifndef SCI_RSS_IS_MEANINGFUL
#define SCI_RSS_IS_MEANINGFUL 1
#endif

namespace sci {
namespace {

using namespace std::chrono_literals;
using testing::kAnyLoopbackTcpPort;
using testing::LoopbackPublisher;
using testing::RemovedEvent;
using testing::StoredEvent;
using testing::UniqueIpcEndpoint;
using testing::WaitFor;

constexpr uint32_t kPageSize = 4;

// Resident set size of this process, from /proc/self/statm.
size_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t total_pages = 0, resident_pages = 0;
  statm >> total_pages >> resident_pages;
  return resident_pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

size_t OpenFileDescriptors() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// A request's pages under an SGLang tp 1 layout, and the events that store
// or remove them as the Mooncake master reports them.
class RequestPages {
 public:
  explicit RequestPages(uint32_t first_token, size_t n_pages) {
    LayoutSpec spec;
    spec.page_size = kPageSize;
    spec.tp_size = 1;
    std::string error;
    layout_ = Layout::Create(spec, &error);
    EXPECT_NE(layout_, nullptr) << error;
    for (uint32_t t = 0; t < n_pages * kPageSize; ++t) tokens_.push_back(first_token + t);
    const std::vector<std::string> hashes = PageHashesHex(tokens_, kPageSize, false);
    for (size_t page = 0; page < hashes.size(); ++page) {
      groups_.push_back(layout_->GroupId(hashes[page]));
      keys_.push_back(layout_->KeysFor(hashes[page], page, hashes.size()));
    }
  }

  size_t pages() const { return keys_.size(); }
  const std::vector<std::vector<std::string>>& keys() const { return keys_; }

  std::vector<MooncakeEvent> Events(bool stored) const {
    std::vector<MooncakeEvent> events;
    for (size_t page = 0; page < keys_.size(); ++page) {
      for (const std::string& key : keys_[page]) {
        events.push_back(stored ? StoredEvent(events.size() + 1, key, groups_[page])
                                : RemovedEvent(events.size() + 1, key, groups_[page]));
      }
    }
    return events;
  }

  // Which pages the index reports present (answering twice, so a group
  // verified by the first answer is taken on the fast path by the second).
  std::vector<uint8_t> Query(Index& index) const {
    std::vector<uint8_t> hits(keys_.size());
    CheckPages(index, *layout_, tokens_, kPageSize, hits);
    CheckPages(index, *layout_, tokens_, kPageSize, hits);
    return hits;
  }

  size_t Hits(Index& index) const {
    size_t n = 0;
    for (uint8_t hit : Query(index)) n += hit;
    return n;
  }

 private:
  std::unique_ptr<const Layout> layout_;
  std::vector<uint32_t> tokens_;
  std::vector<std::string> groups_;
  std::vector<std::vector<std::string>> keys_;
};

// A publisher like the Mooncake master's: an XPUB (so the test can await
// the subscription) with a bounded send queue, which -- unlike
// LoopbackPublisher's unbounded one -- drops messages once the subscriber
// stops taking them. That is how a real publisher overruns a slow subscriber.
class BoundedPublisher {
 public:
  explicit BoundedPublisher(int send_hwm) : context_(1), socket_(context_, zmq::socket_type::xpub) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::sndhwm, send_hwm);
    socket_.set(zmq::sockopt::xpub_verbose, 1);
    socket_.bind(kAnyLoopbackTcpPort);
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
  }

  const std::string& endpoint() const { return endpoint_; }

  bool AwaitSubscription() {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
      zmq_pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, 100ms) == 0) continue;
      zmq::message_t message;
      if (socket_.recv(message, zmq::recv_flags::dontwait) && message.size() >= 1 &&
          static_cast<const uint8_t*>(message.data())[0] == 1) {
        return true;
      }
    }
    return false;
  }

  // Never blocks: a full queue drops the message, as the real publisher does.
  void Send(uint64_t sequence, const std::string& payload) {
    const std::array<uint8_t, 8> seq = EncodeSequence(sequence);
    socket_.send(zmq::const_buffer("", 0), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    socket_.send(zmq::buffer(seq), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    socket_.send(zmq::buffer(payload), zmq::send_flags::dontwait);
  }

 private:
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::string endpoint_;
};

std::string Payload(std::span<const MooncakeEvent> events) {
  std::string payload;
  EncodeMooncakePayload(1700000000000, events, &payload);
  return payload;
}

// The same payload without event ids (0: no publisher's number), for a
// test that sends one payload many times: a real publisher's ids would run
// on from batch to batch, which one encoding cannot.
std::string UnnumberedPayload(std::span<const MooncakeEvent> events) {
  std::vector<MooncakeEvent> unnumbered(events.begin(), events.end());
  for (MooncakeEvent& event : unnumbered) event.event_id = 0;
  return Payload(unnumbered);
}

class FaultInjection : public ::testing::Test {
 protected:
  ReconnectPolicy reconnect_policy_ = ReconnectPolicy::kResync;

  std::unique_ptr<Subscriber> StartSubscriber(const std::string& endpoint, int receive_hwm,
                                              Index* index = nullptr) {
    SubscriberOptions options;
    options.endpoint = endpoint;
    options.reconnect_ms = 20;  // restarted publishers are found quickly
    options.reconnect_max_ms = 100;
    options.stale_after_ms = 60000;  // staleness is subscriber_test's subject, not this one's
    options.receive_hwm = receive_hwm;
    options.reconnect_policy = reconnect_policy_;
    SubscriberError code = SubscriberError::kNone;
    std::string error;
    std::unique_ptr<Subscriber> subscriber = Subscriber::Start(index != nullptr ? *index : index_, options, &code, &error);
    EXPECT_NE(subscriber, nullptr) << error;
    return subscriber;
  }
  std::unique_ptr<Subscriber> StartSubscriber(const std::string& endpoint) {
    return StartSubscriber(endpoint, SubscriberOptions::kDefaultReceiveHwm);
  }

  Stats stats() const { return index_.GetStats(); }
  bool Has(std::string_view key) const { return index_.Contains({}, key); }
  bool AwaitLastSequence(uint64_t sequence) {
    return WaitFor([&] { return stats().has_sequence && stats().last_sequence == sequence; });
  }

  Index index_;
};

// ---- publisher killed and restarted ----

TEST_F(FaultInjection, RestartedPublisherClearsTheIndexThenItsNewStreamIsFollowed) {
  // The gap each restart shows (1.3's rule); by default each disconnect clears first (subscriber_test).
  reconnect_policy_ = ReconnectPolicy::kTrustEventIds;
  LoopbackPublisher first(kAnyLoopbackTcpPort);
  first.NumberEventsFrom(1);
  const std::string endpoint = first.endpoint();  // the restarted publishers bind the same port
  auto subscriber = StartSubscriber(endpoint);
  ASSERT_TRUE(first.AwaitSubscription());

  const RequestPages old_pages(1, 6);
  first.SendBatch(1, old_pages.Events(/*stored=*/true));
  for (uint64_t s = 2; s <= 5; ++s) {
    const std::string key = "life0-" + std::to_string(s);
    const MooncakeEvent batch[] = {StoredEvent(s, key)};
    first.SendBatch(s, batch);
  }
  ASSERT_TRUE(AwaitLastSequence(5));
  ASSERT_EQ(old_pages.Hits(index_), old_pages.pages());
  first.Close();  // killed mid-stream: no goodbye, sequence numbers start again at 1

  // Three lives in a row, each shorter than the last.
  std::vector<std::string> keys_of_life;
  for (int life = 1; life <= 3; ++life) {
    LoopbackPublisher restarted(endpoint);
    restarted.NumberEventsFrom(1);  // a restarted publisher counts from 1 again
    ASSERT_TRUE(restarted.AwaitSubscription()) << "life " << life;
    keys_of_life.clear();
    const uint64_t batches = static_cast<uint64_t>(5 - life);
    for (uint64_t s = 1; s <= batches; ++s) {
      keys_of_life.push_back("life" + std::to_string(life) + "-" + std::to_string(s));
      const MooncakeEvent batch[] = {StoredEvent(s, keys_of_life.back())};
      restarted.SendBatch(s, batch);
    }
    ASSERT_TRUE(AwaitLastSequence(batches)) << "life " << life;
    ASSERT_TRUE(WaitFor([&] { return Has(keys_of_life.back()); })) << "life " << life;
    EXPECT_EQ(stats().sequence_gaps, static_cast<uint64_t>(life)) << "restart " << life << " is one gap";
    EXPECT_EQ(stats().keys, batches) << "only the new life's objects remain";
    EXPECT_FALSE(Has("life0-5"));
    EXPECT_EQ(old_pages.Hits(index_), 0u) << "pages of a dead publisher must miss";
    restarted.Close();
  }
  EXPECT_EQ(stats().malformed_messages, 0u);
  EXPECT_GE(stats().subscriber_connects, 4u);
}

// ---- a publisher overrunning the subscriber's receive high-water mark ----

TEST_F(FaultInjection, OverrunReceiveQueueShowsAsAGapAndNeverLeavesARemovedPageHit) {
  BoundedPublisher publisher(/*send_hwm=*/64);
  auto subscriber = StartSubscriber(publisher.endpoint(), /*receive_hwm=*/8);
  ASSERT_TRUE(publisher.AwaitSubscription());

  const RequestPages pages(1, 8);
  uint64_t sequence = 1;
  publisher.Send(sequence, UnnumberedPayload(pages.Events(/*stored=*/true)));
  ASSERT_TRUE(AwaitLastSequence(sequence));
  ASSERT_EQ(pages.Hits(index_), pages.pages());

  // Heavy filler batches (64 events each, as big as the publisher makes them)
  // sent without pause: the subscriber falls behind, its 8-message queue
  // fills, TCP pushes back and the publisher's bounded queue drops. Early in
  // the flood the publisher removes every page object: whether the subscriber
  // gets that batch or loses it in a gap, the pages must miss afterwards.
  std::vector<std::string> filler_keys;
  for (int i = 0; i < 64; ++i) filler_keys.push_back("filler-" + std::to_string(i));
  std::vector<MooncakeEvent> filler_events;
  for (const std::string& key : filler_keys) filler_events.push_back(StoredEvent(filler_events.size() + 1, key));
  const std::string filler = UnnumberedPayload(filler_events);
  const std::string removal = UnnumberedPayload(pages.Events(/*stored=*/false));
  bool removal_sent = false;
  for (int round = 0; round < 40 && stats().sequence_gaps == 0; ++round) {
    for (int i = 0; i < 4000; ++i) {
      ++sequence;
      if (!removal_sent && i == 100) {
        publisher.Send(sequence, removal);
        removal_sent = true;
      } else {
        publisher.Send(sequence, filler);
      }
    }
  }
  ASSERT_TRUE(removal_sent);

  // Once the queues drain a message gets through again: send small ones
  // until the subscriber has applied one of them whole (the first after a
  // gap begins a run, and its store is withheld).
  const MooncakeEvent sync_event[] = {StoredEvent(1, "sync")};
  const std::string sync = UnnumberedPayload(sync_event);
  bool caught_up = false;
  for (int attempt = 0; attempt < 600 && !caught_up; ++attempt) {
    publisher.Send(++sequence, sync);
    const uint64_t sent = sequence;
    caught_up = WaitFor([&] { return stats().last_sequence == sent && Has("sync"); }, 50ms);
  }
  ASSERT_TRUE(caught_up) << "the subscriber never caught up with the publisher";

  const Stats s = stats();
  EXPECT_GT(s.sequence_gaps, 0u) << "the flood should have overrun the receive queue";
  EXPECT_GE(s.clears, s.sequence_gaps);
  EXPECT_LT(s.messages_received, sequence) << "some messages were dropped";
  EXPECT_EQ(s.malformed_messages, 0u);
  EXPECT_EQ(pages.Hits(index_), 0u) << "a page the publisher removed is reported present";
  for (const auto& page_keys : pages.keys()) {
    for (const std::string& key : page_keys) EXPECT_FALSE(Has(key)) << key;
  }
  EXPECT_TRUE(Has("sync"));
}

// ---- the subscriber stopped and started repeatedly ----

TEST_F(FaultInjection, SubscriberStoppedAndStartedRepeatedlyKeepsStateAndLeaksNothing) {
  LoopbackPublisher publisher(kAnyLoopbackTcpPort);
  publisher.NumberEventsFrom(1);
  const RequestPages pages(1, 4);
  uint64_t sequence = 0;
  size_t fds_before = 0, rss_before = 0;
  constexpr int kWarmup = 10, kCycles = 110;
  for (int cycle = 0; cycle < kCycles; ++cycle) {
    if (cycle == kWarmup) {
      fds_before = OpenFileDescriptors();
      rss_before = ResidentBytes();
    }
    auto subscriber = StartSubscriber(publisher.endpoint());
    ASSERT_TRUE(publisher.AwaitSubscription()) << "cycle " << cycle;
    ++sequence;
    if (sequence == 1) {
      publisher.SendBatch(sequence, pages.Events(/*stored=*/true));
    } else {
      const std::string key = "cycle-" + std::to_string(cycle);
      const MooncakeEvent batch[] = {StoredEvent(1, key)};
      publisher.SendBatch(sequence, batch);
    }
    ASSERT_TRUE(AwaitLastSequence(sequence)) << "cycle " << cycle;
    subscriber->Stop();
    EXPECT_FALSE(stats().subscriber_connected) << "cycle " << cycle;
  }
  // The cursor outlived every subscriber: each batch continued the last one.
  EXPECT_EQ(stats().sequence_gaps, 0u);
  EXPECT_EQ(stats().clears, 0u);
  EXPECT_EQ(stats().batches_applied, static_cast<uint64_t>(kCycles));
  EXPECT_EQ(stats().subscriber_connects, static_cast<uint64_t>(kCycles));
  EXPECT_EQ(stats().keys, pages.pages() * 2 + kCycles - 1);
  EXPECT_EQ(pages.Hits(index_), pages.pages());
  // Sockets and threads are released: the publisher's side of each closed
  // connection may take a moment to close its descriptor.
  EXPECT_TRUE(WaitFor([&] { return OpenFileDescriptors() <= fds_before; }))
      << OpenFileDescriptors() << " descriptors open, " << fds_before << " before";
  if (SCI_RSS_IS_MEANINGFUL) {
    const size_t rss_after = ResidentBytes();
    EXPECT_LT(rss_after, rss_before + (8u << 20)) << "RSS grew from " << rss_before << " to " << rss_after;
  }
}

// ---- endpoint unreachable at start ----

TEST_F(FaultInjection, UnreachableEndpointAtStartIsNotAnErrorAndConnectsWhenAPublisherAppears) {
  for (const bool tcp : {true, false}) {
    SCOPED_TRACE(tcp ? "tcp" : "ipc");
    Index index;
    std::string endpoint;
    if (tcp) {
      // A loopback port that was free a moment ago and has no listener now.
      LoopbackPublisher probe(kAnyLoopbackTcpPort);
      endpoint = probe.endpoint();
      probe.Close();
    } else {
      endpoint = UniqueIpcEndpoint("sci-fault");
    }
    auto subscriber = StartSubscriber(endpoint, SubscriberOptions::kDefaultReceiveHwm, &index);
    ASSERT_NE(subscriber, nullptr);
    // Nothing to connect to: keeps trying, says it is not connected, holds nothing.
    EXPECT_FALSE(WaitFor([&] { return index.GetStats().subscriber_connected; }, 300ms));
    EXPECT_EQ(index.GetStats().subscriber_connects, 0u);
    EXPECT_FALSE(index.GetStats().has_sequence);

    LoopbackPublisher publisher(endpoint);
    ASSERT_TRUE(publisher.AwaitSubscription());
    ASSERT_TRUE(WaitFor([&] { return index.GetStats().subscriber_connected; }));
    const MooncakeEvent batch[] = {StoredEvent(1, "late")};
    publisher.SendBatch(1, batch);  // the publisher's first batch
    ASSERT_TRUE(WaitFor([&] { return index.GetStats().has_sequence && index.GetStats().last_sequence == 1; }));
    EXPECT_TRUE(index.Contains({}, "late"));
    EXPECT_EQ(index.GetStats().subscriber_connects, 1u);
  }
}

// ---- a long run of malformed messages ----

TEST_F(FaultInjection, TenThousandMalformedMessagesInARowAreCountedAndChangeNothing) {
  LoopbackPublisher publisher(UniqueIpcEndpoint("sci-fault"));
  auto subscriber = StartSubscriber(publisher.endpoint());
  ASSERT_TRUE(publisher.AwaitSubscription());
  const RequestPages pages(1, 4);
  publisher.SendBatch(1, pages.Events(/*stored=*/true));
  ASSERT_TRUE(AwaitLastSequence(1));
  ASSERT_EQ(pages.Hits(index_), pages.pages());

  // Each kind of breakage the decoder names, in rotation. The removal of
  // every page object inside them must not take effect either.
  const std::vector<std::string> removal = LoopbackPublisher::EncodeBatch(2, pages.Events(/*stored=*/false));
  std::vector<std::vector<std::string>> broken;
  broken.push_back({removal[0], removal[1], removal[2].substr(0, removal[2].size() - 1)});  // truncated
  broken.push_back({removal[0], removal[1]});                                              // two frames
  broken.push_back({removal[0], removal[1].substr(1), removal[2]});                        // 7-byte sequence
  broken.push_back({removal[0], removal[1], removal[2], removal[2]});                      // four frames
  broken.push_back({removal[0], removal[1], "\x80"});                                      // a map, not [ts, events]
  broken.push_back({removal[0], removal[1], removal[2] + "x"});                            // trailing bytes
  broken.push_back({removal[0], removal[1], "\xdd\xff\xff\xff\xff"});                      // array of 4 billion
  // Sent in chunks, each awaited, so that what is measured is the
  // subscriber's memory, not messages queued in the sockets.
  constexpr uint64_t kChunk = 500, kWarmup = 1000, kMalformed = 10000;
  size_t rss_before = 0;
  for (uint64_t i = 0; i < kMalformed; ++i) {
    publisher.SendFrames(broken[i % broken.size()]);
    if ((i + 1) % kChunk == 0) {
      ASSERT_TRUE(WaitFor([&] { return stats().malformed_messages == i + 1; })) << "after " << i + 1;
      if (i + 1 == kWarmup) rss_before = ResidentBytes();
    }
  }
  const MooncakeEvent after[] = {StoredEvent(pages.Events(/*stored=*/true).size() + 1, "after")};
  publisher.SendBatch(2, after);
  ASSERT_TRUE(AwaitLastSequence(2));

  const Stats s = stats();
  EXPECT_EQ(s.malformed_messages, kMalformed);
  EXPECT_EQ(s.messages_received, kMalformed + 2);
  EXPECT_EQ(s.batches_applied, 2u);
  EXPECT_EQ(s.sequence_gaps, 0u) << "a malformed message consumes no sequence number";
  EXPECT_EQ(s.clears, 0u) << "malformed messages never clear the index";
  EXPECT_EQ(pages.Hits(index_), pages.pages());
  EXPECT_TRUE(Has("after"));
  if (SCI_RSS_IS_MEANINGFUL) {
    const size_t rss_after = ResidentBytes();
    // Allocator and socket-buffer noise is a few MB (100,000 messages stay
    // within it too); a leak of even one message's bytes each would be 10+ MB.
    EXPECT_LT(rss_after, rss_before + (8u << 20)) << "RSS grew from " << rss_before << " to " << rss_after;
  }
}

// ---- capacity reached ----

TEST_F(FaultInjection, FullIndexKeepsServingRefusesWhatDoesNotFitAndNeverWipes) {
  Index small(IndexOptions{.max_entries = 30});
  LoopbackPublisher publisher(kAnyLoopbackTcpPort);
  publisher.NumberEventsFrom(1);
  auto subscriber = StartSubscriber(publisher.endpoint(), SubscriberOptions::kDefaultReceiveHwm, &small);
  ASSERT_TRUE(publisher.AwaitSubscription());

  // 10 pages x 2 keys = 20 keys fit (since 1.4 max_entries counts keys); the next 10 pages do not all fit.
  const RequestPages fits(1, 10);
  const RequestPages overflows(1000, 10);
  publisher.SendBatch(1, fits.Events(/*stored=*/true));
  publisher.SendBatch(2, overflows.Events(/*stored=*/true));
  ASSERT_TRUE(WaitFor([&] { return small.GetStats().last_sequence == 2; }));

  Stats s = small.GetStats();
  EXPECT_GT(s.capacity_refusals, 0u);
  EXPECT_LE(s.keys, 30u);
  EXPECT_EQ(s.clears, 0u) << "a full index must not answer overload by wiping itself";
  EXPECT_EQ(fits.Hits(small), fits.pages()) << "what was stored before the index filled keeps answering";
  EXPECT_LT(overflows.Hits(small), overflows.pages()) << "refused objects cannot be hits";
  // Every hit the overflowing request gets is a page whose keys all made it in.
  const std::vector<uint8_t> hits = overflows.Query(small);
  for (size_t page = 0; page < hits.size(); ++page) {
    if (!hits[page]) continue;
    for (const std::string& key : overflows.keys()[page]) EXPECT_TRUE(small.Contains({}, key)) << key;
  }

  // Room comes back when objects go, and the feed is still followed.
  publisher.SendBatch(3, fits.Events(/*stored=*/false));
  publisher.SendBatch(4, overflows.Events(/*stored=*/true));
  ASSERT_TRUE(WaitFor([&] { return small.GetStats().last_sequence == 4; }));
  s = small.GetStats();
  EXPECT_EQ(fits.Hits(small), 0u);
  EXPECT_EQ(overflows.Hits(small), overflows.pages());
  EXPECT_EQ(s.clears, 0u);
  EXPECT_EQ(s.sequence_gaps, 0u);
}

}  // namespace
}  // namespace sci
