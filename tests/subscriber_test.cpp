// The live subscriber against real publishers on loopback (tcp and ipc):
// golden captures replayed frame by frame, restarts, lost batches, malformed
// messages, disconnects inside and past the grace period, topic filtering,
// a prompt stop, and the C entry points around it.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "index/index.h"
#include "common/log.h"
#include "loopback_publisher.h"
#include "shared_cache_index.h"
#include "feed/subscriber.h"

namespace sci {
namespace {

using namespace std::chrono_literals;
using testing::kAnyLoopbackTcpPort;
using testing::LoopbackPublisher;
using testing::RemovedEvent;
using testing::StoredEvent;
using testing::UniqueIpcEndpoint;
using testing::WaitFor;

// ---- golden captures ----

struct GoldenMessage {
  std::vector<std::string> frames;
};

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<GoldenMessage> LoadCapture(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(SCI_TESTDATA_DIR) / name;
  std::vector<GoldenMessage> messages;
  for (int m = 0;; ++m) {
    char stem[32];
    std::snprintf(stem, sizeof stem, "msg%04d", m);
    GoldenMessage message;
    for (int f = 0;; ++f) {
      const auto path = dir / (std::string(stem) + ".frame" + std::to_string(f) + ".bin");
      if (!std::filesystem::exists(path)) break;
      message.frames.push_back(ReadFile(path));
    }
    if (message.frames.empty()) break;
    messages.push_back(std::move(message));
  }
  return messages;
}

// What the index must hold after a capture: expected.jsonl replayed through
// the sequence rules of docs/index-semantics.md, by a model independent of the
// index. Returns (tenant, key) -> present, for every key the capture names.
std::map<std::pair<std::string, std::string>, bool> ExpectedPresence(const std::string& name) {
  std::ifstream in(std::filesystem::path(SCI_TESTDATA_DIR) / name / "expected.jsonl");
  std::map<std::pair<std::string, std::string>, bool> present;
  std::optional<uint64_t> last;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const nlohmann::json message = nlohmann::json::parse(line);
    const uint64_t sequence = message["sequence"].get<uint64_t>();
    if (last && sequence == *last) continue;
    const bool gap = last && sequence != *last + 1;
    if (gap) {
      for (auto& [key, is_present] : present) is_present = false;
    }
    // The batch that begins a run applies only its removals, unless it is a
    // publisher's first (the Mooncake publisher's early gap signal).
    const bool withhold_stores = (gap || !last) && sequence != 1;
    for (const auto& event : message["events"]) {
      const std::string tenant = event["tenant_id"].is_string() ? event["tenant_id"].get<std::string>() : "default";
      bool& is_present = present[{tenant, event["object_key"].get<std::string>()}];
      if (event["event_type"] == "removed") is_present = false;
      if (event["event_type"] == "stored" && !withhold_stores) is_present = true;
    }
    last = sequence;
  }
  return present;
}

// ---- fixture ----

class SubscriberTest : public ::testing::Test {
 protected:
  // The tests of what a disconnect keeps run under 1.3's rule; the default
  // (every disconnect clears) has tests of its own.
  ReconnectPolicy reconnect_policy_ = ReconnectPolicy::kResync;

  std::unique_ptr<Subscriber> StartSubscriber(const std::string& endpoint, uint32_t stale_after_ms = 60000,
                                              std::string topic = {}) {
    SubscriberOptions options;
    options.endpoint = endpoint;
    options.topic = std::move(topic);
    options.reconnect_ms = 20;  // restarted publishers are found quickly
    options.reconnect_max_ms = 100;
    options.stale_after_ms = stale_after_ms;
    options.reconnect_policy = reconnect_policy_;
    SubscriberError code = SubscriberError::kNone;
    std::string error;
    std::unique_ptr<Subscriber> subscriber = Subscriber::Start(index_, options, &code, &error);
    EXPECT_NE(subscriber, nullptr) << error;
    return subscriber;
  }

  // A publisher with this test's subscriber connected and subscribed.
  std::unique_ptr<LoopbackPublisher> ConnectedPublisher(const std::string& bind_endpoint,
                                                        std::string_view topic = {}) {
    auto publisher = std::make_unique<LoopbackPublisher>(bind_endpoint);
    if (!publisher->AwaitSubscription(topic)) ADD_FAILURE() << "no subscription on " << publisher->endpoint();
    return publisher;
  }

  Stats stats() const { return index_.GetStats(); }
  bool Has(std::string_view key, std::string_view tenant = {}) const { return index_.Contains(tenant, key); }
  bool AwaitLastSequence(uint64_t sequence) {
    return WaitFor([&] { return stats().has_sequence && stats().last_sequence == sequence; });
  }
  bool AwaitMessages(uint64_t n) { return WaitFor([&] { return stats().messages_received >= n; }); }
  bool AwaitConnects(uint64_t n) {
    return WaitFor([&] { return stats().subscriber_connects >= n && stats().subscriber_connected; });
  }

  void ReplayGolden(const std::string& name, bool over_tcp) {
    const std::vector<GoldenMessage> capture = LoadCapture(name);
    ASSERT_FALSE(capture.empty()) << "no capture " << name << " in " << SCI_TESTDATA_DIR;
    LoopbackPublisher publisher(over_tcp ? kAnyLoopbackTcpPort : UniqueIpcEndpoint());
    auto subscriber = StartSubscriber(publisher.endpoint());
    ASSERT_TRUE(publisher.AwaitSubscription());
    for (const GoldenMessage& message : capture) publisher.SendFrames(message.frames);
    ASSERT_TRUE(AwaitMessages(capture.size()));

    const auto expected = ExpectedPresence(name);
    ASSERT_FALSE(expected.empty());
    uint64_t expected_keys = 0;
    for (const auto& [tenant_key, present] : expected) {
      EXPECT_EQ(Has(tenant_key.second, tenant_key.first), present) << tenant_key.first << "/" << tenant_key.second;
      expected_keys += present ? 1 : 0;
    }
    EXPECT_EQ(stats().keys, expected_keys);
    EXPECT_EQ(stats().messages_received, capture.size());
    EXPECT_EQ(stats().malformed_messages, 0u);
  }

  Index index_;
};

// ---- golden replay ----

TEST_F(SubscriberTest, GoldenBasicReplayOverTcpLeavesTheExpectedKeys) {
  ReplayGolden("basic", /*over_tcp=*/true);
  EXPECT_EQ(stats().last_sequence, 5u);
  EXPECT_EQ(stats().sequence_gaps, 0u);
  EXPECT_TRUE(Has("12345", "tenant-a"));
  EXPECT_FALSE(Has("12345"));  // other tenant
}

TEST_F(SubscriberTest, GoldenBurstReplayOverIpcLeavesTheExpectedKeys) {
  ReplayGolden("burst", /*over_tcp=*/false);
  EXPECT_EQ(stats().keys, 1000u);
  EXPECT_EQ(stats().batches_applied, 16u);
  EXPECT_EQ(stats().sequence_gaps, 0u);
}

TEST_F(SubscriberTest, GoldenOverflowReplayKeepsOnlyWhatFollowsTheLastGap) {
  ReplayGolden("overflow", /*over_tcp=*/true);
  EXPECT_EQ(stats().sequence_gaps, 25u);
}

// The real publisher's loss signalled one batch early: the removals lost
// after the gap's batch must not leave its stores behind as false hits.
TEST_F(SubscriberTest, GoldenDisplacedGapReplayHoldsNoRemovedKey) {
  ReplayGolden("displaced-gap", /*over_tcp=*/true);
  EXPECT_EQ(stats().sequence_gaps, 1u);
  EXPECT_EQ(stats().stores_withheld, 64u);
  EXPECT_EQ(stats().keys, 35u);
}

// ---- sequence rules over the wire ----

TEST_F(SubscriberTest, PublisherRestartClearsTheIndex) {
  reconnect_policy_ = ReconnectPolicy::kTrustEventIds;  // 1.3's rule: what a reconnect may keep
  const std::string endpoint = UniqueIpcEndpoint();
  auto publisher = std::make_unique<LoopbackPublisher>(endpoint);
  auto subscriber = StartSubscriber(endpoint);
  ASSERT_TRUE(publisher->AwaitSubscription());
  const MooncakeEvent first[] = {StoredEvent(1, "a")};
  const MooncakeEvent second[] = {StoredEvent(2, "b")};
  publisher->SendBatch(1, first);
  publisher->SendBatch(2, second);
  ASSERT_TRUE(AwaitLastSequence(2));

  publisher->Close();
  publisher = ConnectedPublisher(endpoint);  // the restarted master counts from 1 again
  const MooncakeEvent after_restart[] = {StoredEvent(1, "c")};
  publisher->SendBatch(1, after_restart);
  ASSERT_TRUE(WaitFor([&] { return Has("c"); }));
  EXPECT_FALSE(Has("a"));
  EXPECT_FALSE(Has("b"));
  EXPECT_EQ(stats().sequence_gaps, 1u);
  EXPECT_EQ(stats().last_sequence, 1u);
}

TEST_F(SubscriberTest, DroppedBatchClearsTheIndex) {
  LoopbackPublisher publisher(kAnyLoopbackTcpPort);
  auto subscriber = StartSubscriber(publisher.endpoint());
  ASSERT_TRUE(publisher.AwaitSubscription());
  const MooncakeEvent one[] = {StoredEvent(1, "a")};
  const MooncakeEvent two[] = {StoredEvent(2, "b")};
  const MooncakeEvent four[] = {StoredEvent(4, "d")};
  publisher.SendBatch(1, one);
  publisher.SendBatch(2, two);
  publisher.SendBatch(4, four);  // batch 3 was dropped by the publisher's queue
  ASSERT_TRUE(AwaitLastSequence(4));
  EXPECT_FALSE(Has("a"));
  EXPECT_FALSE(Has("b"));
  // The batch revealing the gap may precede events lost after it: its stores are withheld.
  EXPECT_FALSE(Has("d"));
  EXPECT_EQ(stats().stores_withheld, 1u);
  EXPECT_EQ(stats().sequence_gaps, 1u);
  const MooncakeEvent five[] = {StoredEvent(5, "e")};
  publisher.SendBatch(5, five);
  ASSERT_TRUE(AwaitLastSequence(5));
  EXPECT_TRUE(Has("e"));
  EXPECT_EQ(stats().keys, 1u);
}

TEST_F(SubscriberTest, MalformedMessageMidStreamIsCountedAndStateKept) {
  LoopbackPublisher publisher(UniqueIpcEndpoint());
  auto subscriber = StartSubscriber(publisher.endpoint());
  ASSERT_TRUE(publisher.AwaitSubscription());
  const MooncakeEvent one[] = {StoredEvent(1, "a")};
  const MooncakeEvent two[] = {StoredEvent(2, "b")};
  publisher.SendBatch(1, one);
  std::vector<std::string> broken = LoopbackPublisher::EncodeBatch(2, two);
  broken[2].resize(broken[2].size() / 2);  // truncated payload
  publisher.SendFrames(broken);
  publisher.SendFrames({"", "short"});  // wrong frame count, sequence not 8 bytes
  publisher.SendBatch(2, two);          // a malformed message consumes no sequence number
  ASSERT_TRUE(AwaitMessages(4));
  ASSERT_TRUE(AwaitLastSequence(2));
  EXPECT_TRUE(Has("a"));
  EXPECT_TRUE(Has("b"));
  EXPECT_EQ(stats().malformed_messages, 2u);
  EXPECT_EQ(stats().sequence_gaps, 0u);
  EXPECT_EQ(stats().clears, 0u);
}

TEST_F(SubscriberTest, EventsOfOneBatchApplyInOrder) {
  LoopbackPublisher publisher(kAnyLoopbackTcpPort);
  auto subscriber = StartSubscriber(publisher.endpoint());
  ASSERT_TRUE(publisher.AwaitSubscription());
  const MooncakeEvent batch[] = {StoredEvent(1, "a"), RemovedEvent(2, "a"), StoredEvent(3, "b")};
  publisher.SendBatch(1, batch);
  ASSERT_TRUE(AwaitLastSequence(1));
  EXPECT_FALSE(Has("a"));
  EXPECT_TRUE(Has("b"));
}

// ---- connection, grace period and stale clearing ----

TEST_F(SubscriberTest, ConnectionGaugeFollowsThePublisher) {
  const std::string endpoint = UniqueIpcEndpoint();
  auto subscriber = StartSubscriber(endpoint);
  EXPECT_FALSE(stats().subscriber_connected);  // nobody bound yet: not an error, just not connected
  auto publisher = ConnectedPublisher(endpoint);
  ASSERT_TRUE(AwaitConnects(1));
  EXPECT_EQ(stats().subscriber_disconnects, 0u);

  publisher->Close();
  ASSERT_TRUE(WaitFor([&] { return !stats().subscriber_connected; }));
  EXPECT_EQ(stats().subscriber_disconnects, 1u);

  publisher = ConnectedPublisher(endpoint);
  ASSERT_TRUE(AwaitConnects(2));
  EXPECT_EQ(stats().subscriber_disconnects, 1u);

  subscriber->Stop();
  EXPECT_FALSE(stats().subscriber_connected);
}

TEST_F(SubscriberTest, DisconnectWithinTheGraceKeepsServing) {
  reconnect_policy_ = ReconnectPolicy::kTrustEventIds;  // 1.3's rule: what a reconnect may keep
  LoopbackPublisher publisher(UniqueIpcEndpoint());
  auto subscriber = StartSubscriber(publisher.endpoint(), /*stale_after_ms=*/600000);
  ASSERT_TRUE(publisher.AwaitSubscription());
  const MooncakeEvent one[] = {StoredEvent(1, "a")};
  publisher.SendBatch(1, one);
  ASSERT_TRUE(AwaitLastSequence(1));

  publisher.Close();
  ASSERT_TRUE(WaitFor([&] { return stats().subscriber_disconnects == 1; }));
  EXPECT_TRUE(Has("a"));
  EXPECT_EQ(stats().clears, 0u);
}

TEST_F(SubscriberTest, DisconnectPastTheGraceClearsAndMisses) {
  LoopbackPublisher publisher(UniqueIpcEndpoint());
  auto subscriber = StartSubscriber(publisher.endpoint(), /*stale_after_ms=*/300);
  ASSERT_TRUE(publisher.AwaitSubscription());
  ASSERT_TRUE(AwaitConnects(1));
  const MooncakeEvent one[] = {StoredEvent(1, "a", "g")};
  publisher.SendBatch(1, one);
  ASSERT_TRUE(AwaitLastSequence(1));

  publisher.Close();  // the publisher dies and stays dead
  ASSERT_TRUE(WaitFor([&] { return stats().clears == 1; }));
  EXPECT_FALSE(Has("a"));
  EXPECT_EQ(stats().keys, 0u);
  EXPECT_EQ(stats().groups, 0u);
  EXPECT_FALSE(stats().has_sequence);
  EXPECT_FALSE(stats().subscriber_connected);
}

TEST_F(SubscriberTest, AfterAStaleClearNewMessagesAreAcceptedAtAnySequence) {
  auto publisher = std::make_unique<LoopbackPublisher>(kAnyLoopbackTcpPort);
  const std::string bound = publisher->endpoint();
  auto subscriber = StartSubscriber(bound, /*stale_after_ms=*/300);
  ASSERT_TRUE(publisher->AwaitSubscription());
  ASSERT_TRUE(AwaitConnects(1));
  const MooncakeEvent five[] = {StoredEvent(1, "a")};
  publisher->SendBatch(5, five);
  ASSERT_TRUE(AwaitLastSequence(5));

  publisher->Close();
  ASSERT_TRUE(WaitFor([&] { return stats().clears == 1; }));

  publisher = ConnectedPublisher(bound);
  const MooncakeEvent nine[] = {StoredEvent(2, "b")};
  const MooncakeEvent ten[] = {StoredEvent(3, "c")};
  publisher->SendBatch(9, nine);
  publisher->SendBatch(10, ten);
  ASSERT_TRUE(AwaitLastSequence(10));
  EXPECT_FALSE(Has("b"));  // the first batch after a clear begins a run: its stores are withheld
  EXPECT_TRUE(Has("c"));
  EXPECT_FALSE(Has("a"));
  EXPECT_EQ(stats().sequence_gaps, 0u);  // the cursor was reset by the clear
  EXPECT_EQ(stats().clears, 1u);
}

TEST_F(SubscriberTest, LosslessReconnectWithinTheGraceKeepsState) {
  reconnect_policy_ = ReconnectPolicy::kTrustEventIds;  // 1.3's rule: what a reconnect may keep
  auto publisher = std::make_unique<LoopbackPublisher>(kAnyLoopbackTcpPort);
  const std::string bound = publisher->endpoint();
  auto subscriber = StartSubscriber(bound, /*stale_after_ms=*/600000);
  ASSERT_TRUE(publisher->AwaitSubscription());
  ASSERT_TRUE(AwaitConnects(1));
  const MooncakeEvent one[] = {StoredEvent(1, "a", "g")};
  const MooncakeEvent two[] = {StoredEvent(2, "b", "g")};
  publisher->SendBatch(1, one);
  publisher->SendBatch(2, two);
  ASSERT_TRUE(AwaitLastSequence(2));

  // The connection drops and comes back; the publisher lost nothing and goes on at 3.
  publisher->Close();
  ASSERT_TRUE(WaitFor([&] { return stats().subscriber_disconnects == 1; }));
  publisher = ConnectedPublisher(bound);
  ASSERT_TRUE(AwaitConnects(2));
  const MooncakeEvent three[] = {StoredEvent(3, "c")};
  publisher->SendBatch(3, three);
  ASSERT_TRUE(AwaitLastSequence(3));
  EXPECT_TRUE(Has("a"));
  EXPECT_TRUE(Has("b"));
  EXPECT_TRUE(Has("c"));
  EXPECT_EQ(stats().groups, 0u);  // page entries: these keys carry no digest
  EXPECT_EQ(stats().clears, 0u);
  EXPECT_EQ(stats().sequence_gaps, 0u);
}

TEST_F(SubscriberTest, ReconnectThatLostMessagesClearsAtTheNextMessage) {
  reconnect_policy_ = ReconnectPolicy::kTrustEventIds;  // 1.3's rule: what a reconnect may keep
  const std::string endpoint = UniqueIpcEndpoint();
  auto publisher = std::make_unique<LoopbackPublisher>(endpoint);
  auto subscriber = StartSubscriber(endpoint, /*stale_after_ms=*/600000);
  ASSERT_TRUE(publisher->AwaitSubscription());
  const MooncakeEvent one[] = {StoredEvent(1, "a")};
  publisher->SendBatch(1, one);
  ASSERT_TRUE(AwaitLastSequence(1));

  publisher->Close();
  publisher = ConnectedPublisher(endpoint);
  const MooncakeEvent three[] = {StoredEvent(3, "c")};  // 2 went out while we were away
  const MooncakeEvent four[] = {StoredEvent(4, "d")};
  publisher->SendBatch(3, three);
  publisher->SendBatch(4, four);
  ASSERT_TRUE(AwaitLastSequence(4));
  EXPECT_FALSE(Has("a"));
  EXPECT_FALSE(Has("c"));  // withheld: batch 3 revealed the gap
  EXPECT_TRUE(Has("d"));
  EXPECT_EQ(stats().sequence_gaps, 1u);
}

// Nothing proves that the reconnected stream lost nothing until a message
// arrives, so silence past the grace after a reconnect clears too.
TEST_F(SubscriberTest, ReconnectFollowedBySilencePastTheGraceClears) {
  const std::string endpoint = UniqueIpcEndpoint();
  auto publisher = std::make_unique<LoopbackPublisher>(endpoint);
  auto subscriber = StartSubscriber(endpoint, /*stale_after_ms=*/300);
  ASSERT_TRUE(publisher->AwaitSubscription());
  ASSERT_TRUE(AwaitConnects(1));
  const MooncakeEvent one[] = {StoredEvent(1, "a")};
  publisher->SendBatch(1, one);
  ASSERT_TRUE(AwaitLastSequence(1));

  publisher->Close();
  publisher = ConnectedPublisher(endpoint);
  ASSERT_TRUE(AwaitConnects(2));
  ASSERT_TRUE(WaitFor([&] { return stats().clears == 1; }));
  EXPECT_FALSE(Has("a"));
  EXPECT_TRUE(stats().subscriber_connected);
}

TEST_F(SubscriberTest, IdlePublisherOnALiveConnectionIsNotStale) {
  LoopbackPublisher publisher(UniqueIpcEndpoint());
  auto subscriber = StartSubscriber(publisher.endpoint(), /*stale_after_ms=*/100);
  ASSERT_TRUE(publisher.AwaitSubscription());
  ASSERT_TRUE(AwaitConnects(1));
  const MooncakeEvent one[] = {StoredEvent(1, "a")};
  publisher.SendBatch(1, one);
  ASSERT_TRUE(AwaitLastSequence(1));
  // Several grace periods of silence; a probe batch then shows the
  // subscriber has been running all along and never cleared.
  std::this_thread::sleep_for(500ms);
  const MooncakeEvent two[] = {StoredEvent(2, "b")};
  publisher.SendBatch(2, two);
  ASSERT_TRUE(AwaitLastSequence(2));
  EXPECT_TRUE(Has("a"));
  EXPECT_EQ(stats().clears, 0u);
}

TEST_F(SubscriberTest, StaleDeadlineWithAnEmptyIndexCountsNoClear) {
  auto subscriber = StartSubscriber(UniqueIpcEndpoint(), /*stale_after_ms=*/50);
  // Nobody ever publishes. The deadline passes with nothing to clear; Stop
  // joins the thread, so every decision it made is visible afterwards.
  std::this_thread::sleep_for(200ms);
  subscriber->Stop();
  EXPECT_EQ(stats().clears, 0u);
}

// ---- topic filtering ----

TEST_F(SubscriberTest, TopicPrefixFiltersOtherTopics) {
  LoopbackPublisher publisher(kAnyLoopbackTcpPort);
  auto subscriber = StartSubscriber(publisher.endpoint(), 60000, "mooncake");
  ASSERT_TRUE(publisher.AwaitSubscription("mooncake"));
  const MooncakeEvent other[] = {StoredEvent(1, "not-for-us")};
  const MooncakeEvent ours[] = {StoredEvent(1, "for-us")};
  publisher.SendBatch(1, other, "kv-events");
  publisher.SendBatch(1, other, "");  // the production empty topic is not under "mooncake"
  publisher.SendBatch(1, ours, "mooncake-a");
  // One connection keeps order: had the first two passed the filter, they
  // would have been applied before this one.
  ASSERT_TRUE(WaitFor([&] { return Has("for-us"); }));
  EXPECT_FALSE(Has("not-for-us"));
  EXPECT_EQ(stats().messages_received, 1u);
}

// ---- stopping ----

// Runs `stop` on another thread and reports whether it returned in time.
bool ReturnsWithin(std::chrono::milliseconds bound, std::function<void()> stop) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> returned = done->get_future();
  std::thread([stop = std::move(stop), done] {
    stop();
    done->set_value();
  }).detach();  // if it hangs, the test fails instead of hanging with it
  return returned.wait_for(bound) == std::future_status::ready;
}

TEST_F(SubscriberTest, StopDuringSilenceReturnsPromptly) {
  LoopbackPublisher publisher(kAnyLoopbackTcpPort);
  std::shared_ptr<Subscriber> subscriber = StartSubscriber(publisher.endpoint());
  ASSERT_TRUE(publisher.AwaitSubscription());
  ASSERT_TRUE(AwaitConnects(1));
  EXPECT_TRUE(ReturnsWithin(5s, [subscriber] { subscriber->Stop(); }));
}

TEST_F(SubscriberTest, StopWithThePublisherGoneReturnsPromptly) {
  auto publisher = std::make_unique<LoopbackPublisher>(kAnyLoopbackTcpPort);
  std::shared_ptr<Subscriber> subscriber = StartSubscriber(publisher->endpoint());
  ASSERT_TRUE(publisher->AwaitSubscription());
  publisher->Close();
  ASSERT_TRUE(WaitFor([&] { return stats().subscriber_disconnects == 1; }));
  EXPECT_TRUE(ReturnsWithin(5s, [subscriber] { subscriber->Stop(); }));
}

TEST_F(SubscriberTest, StopLeavesTheIndexAsItWas) {
  LoopbackPublisher publisher(UniqueIpcEndpoint());
  auto subscriber = StartSubscriber(publisher.endpoint());
  ASSERT_TRUE(publisher.AwaitSubscription());
  const MooncakeEvent one[] = {StoredEvent(1, "a")};
  publisher.SendBatch(1, one);
  ASSERT_TRUE(AwaitLastSequence(1));
  subscriber->Stop();
  subscriber->Stop();  // idempotent
  EXPECT_TRUE(Has("a"));
  EXPECT_FALSE(stats().subscriber_connected);
}

// ---- the C++ entry's argument checks ----

TEST(SubscriberStart, RejectsAnEmptyEndpoint) {
  Index index;
  SubscriberError code = SubscriberError::kNone;
  std::string error;
  EXPECT_EQ(Subscriber::Start(index, SubscriberOptions{}, &code, &error), nullptr);
  EXPECT_EQ(code, SubscriberError::kInvalidArgument);
  EXPECT_EQ(error.rfind("endpoint is empty; it must look like tcp://host:port or ipc://path", 0), 0u) << error;
}

TEST(SubscriberStart, RejectsAnEndpointZeroMqRejects) {
  Index index;
  SubscriberOptions options;
  options.endpoint = "bogus://x";
  SubscriberError code = SubscriberError::kNone;
  std::string error;
  EXPECT_EQ(Subscriber::Start(index, options, &code, &error), nullptr);
  EXPECT_EQ(code, SubscriberError::kInvalidArgument);
  EXPECT_NE(error.find("bogus://x"), std::string::npos) << error;
}

TEST(SubscriberStart, RejectsIntervalsZeroMqCannotHold) {
  Index index;
  SubscriberOptions options;
  options.endpoint = "tcp://127.0.0.1:1";
  options.stale_after_ms = 3000000000u;
  SubscriberError code = SubscriberError::kNone;
  std::string error;
  EXPECT_EQ(Subscriber::Start(index, options, &code, &error), nullptr);
  EXPECT_EQ(code, SubscriberError::kInvalidArgument);
  EXPECT_NE(error.find("stale_after_ms"), std::string::npos) << error;
}

// ---- the C entry points ----

sci_str S(std::string_view s) { return sci_str{s.data(), s.size()}; }

sci_subscriber_options COptions(std::string_view endpoint) {
  sci_subscriber_options options{};
  options.struct_size = sizeof options;
  options.endpoint = S(endpoint);
  return options;
}

class CapiSubscriber : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(sci_index_new(nullptr, &index_), SCI_OK); }
  void TearDown() override { sci_index_free(index_); }

  sci_stats Stats() const {
    sci_stats stats{};
    stats.struct_size = sizeof stats;
    EXPECT_EQ(sci_index_stats(index_, &stats), SCI_OK);
    return stats;
  }

  // Expects `status` with a message naming the function and `argument`, and no subscriber.
  void ExpectRejected(const sci_subscriber_options* options, sci_status status, std::string_view argument) {
    sci_subscriber* sub = reinterpret_cast<sci_subscriber*>(0x1);
    EXPECT_EQ(sci_subscriber_start(index_, options, &sub), status);
    EXPECT_EQ(sub, nullptr);
    const std::string message = sci_last_error();
    EXPECT_EQ(message.rfind("sci_subscriber_start: ", 0), 0u) << message;
    EXPECT_NE(message.find(argument), std::string::npos) << message;
    EXPECT_EQ(Stats().subscriber_connects, 0u);
  }

  sci_index* index_ = nullptr;
};

TEST_F(CapiSubscriber, NullArgumentsAreRejected) {
  const sci_subscriber_options options = COptions("tcp://127.0.0.1:1");
  sci_subscriber* sub = nullptr;
  EXPECT_EQ(sci_subscriber_start(nullptr, &options, &sub), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sci_last_error()).find("index is NULL"), std::string::npos);
  EXPECT_EQ(sci_subscriber_start(index_, &options, nullptr), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sci_last_error()).find("out is NULL"), std::string::npos);
  ExpectRejected(nullptr, SCI_ERR_INVALID_ARGUMENT, "opts is NULL");
}

TEST_F(CapiSubscriber, TooSmallStructSizeIsRejected) {
  sci_subscriber_options options = COptions("tcp://127.0.0.1:1");
  options.struct_size = 0;
  ExpectRejected(&options, SCI_ERR_INVALID_ARGUMENT, "opts->struct_size");
  options.struct_size = offsetof(sci_subscriber_options, stale_after_ms);
  ExpectRejected(&options, SCI_ERR_INVALID_ARGUMENT, "opts->struct_size");
}

TEST_F(CapiSubscriber, EmptyEndpointIsRejected) {
  const sci_subscriber_options options = COptions("");
  ExpectRejected(&options, SCI_ERR_INVALID_ARGUMENT, "opts->endpoint is empty");
}

TEST_F(CapiSubscriber, NullEndpointWithALengthIsRejected) {
  sci_subscriber_options options = COptions("");
  options.endpoint = sci_str{nullptr, 3};
  ExpectRejected(&options, SCI_ERR_INVALID_ARGUMENT, "opts->endpoint");
}

TEST_F(CapiSubscriber, EndpointZeroMqRejectsIsRejected) {
  const sci_subscriber_options options = COptions("bogus://x");
  ExpectRejected(&options, SCI_ERR_INVALID_ARGUMENT, "opts->endpoint \"bogus://x\"");
}

TEST_F(CapiSubscriber, EndpointWithANulByteIsRejected) {
  const sci_subscriber_options options = COptions(std::string_view("tcp://127.0.0.1:1\0x", 19));
  ExpectRejected(&options, SCI_ERR_INVALID_ARGUMENT, "NUL");
}

TEST_F(CapiSubscriber, UnreachableTcpEndpointIsNotAnErrorAtStart) {
  const sci_subscriber_options options = COptions("tcp://127.0.0.1:1");
  sci_subscriber* sub = nullptr;
  ASSERT_EQ(sci_subscriber_start(index_, &options, &sub), SCI_OK) << sci_last_error();
  ASSERT_NE(sub, nullptr);
  EXPECT_FALSE(Stats().subscriber_connected);
  sci_subscriber_stop(sub);
}

TEST_F(CapiSubscriber, StopOfNullIsANoOp) { sci_subscriber_stop(nullptr); }

TEST_F(CapiSubscriber, ResyncAndEtcdOptionsAreValidated) {
  sci_subscriber_options options = COptions("tcp://127.0.0.1:1");
  options.snapshot_url = S("ftp://master/get_all_keys");
  ExpectRejected(&options, SCI_ERR_INVALID_ARGUMENT, "opts->snapshot_url");
  options.snapshot_url = sci_str{nullptr, 4};
  ExpectRejected(&options, SCI_ERR_INVALID_ARGUMENT, "opts->snapshot_url has a NULL ptr");
  options.snapshot_url = S("");
  options.etcd_endpoints = S("http://127.0.0.1:1");
  ExpectRejected(&options, SCI_ERR_INVALID_ARGUMENT, "endpoint");  // must be empty with etcd
  options.endpoint = S("");
  ExpectRejected(&options, SCI_ERR_INVALID_ARGUMENT, "opts->event_port");
  options.event_port = 70000;
  ExpectRejected(&options, SCI_ERR_INVALID_ARGUMENT, "opts->event_port 70000");
  options.event_port = 5557;
  options.etcd_endpoints = S("etcd:2379");
  ExpectRejected(&options, SCI_ERR_INVALID_ARGUMENT, "opts->etcd_endpoints");
}

TEST_F(CapiSubscriber, StatusOptionsAreValidatedAndReadOnlyWhenTheStructHasThem) {
  sci_subscriber_options options = COptions("tcp://127.0.0.1:1");
  options.status_url = S("ftp://master/kv_events/status");
  ExpectRejected(&options, SCI_ERR_INVALID_ARGUMENT, "opts->status_url");
  options.status_url = sci_str{nullptr, 4};
  ExpectRejected(&options, SCI_ERR_INVALID_ARGUMENT, "opts->status_url has a NULL ptr");
  options.status_url = S("http://127.0.0.1:1/kv_events/status");
  options.status_poll_ms = UINT32_MAX - 1;
  ExpectRejected(&options, SCI_ERR_INVALID_ARGUMENT, "opts->status_poll_ms");
  options.status_poll_ms = UINT32_MAX;  // never
  sci_subscriber* sub = nullptr;
  ASSERT_EQ(sci_subscriber_start(index_, &options, &sub), SCI_OK) << sci_last_error();
  sci_subscriber_stop(sub);
  // A 1.2 caller's struct ends at redis_endpoint: the new fields are not read.
  options.struct_size = offsetof(sci_subscriber_options, status_url);
  options.status_url = S("ftp://not-read");
  ASSERT_EQ(sci_subscriber_start(index_, &options, &sub), SCI_OK) << sci_last_error();
  sci_subscriber_stop(sub);
  // With HA following the status is the leader's.
  options = COptions("");
  options.etcd_endpoints = S("http://127.0.0.1:1");
  options.event_port = 5557;
  options.status_url = S("http://127.0.0.1:1/kv_events/status");
  ExpectRejected(&options, SCI_ERR_INVALID_ARGUMENT, "opts->status_url must be empty with etcd_endpoints");
}

TEST_F(CapiSubscriber, AReleaseOneStructIgnoresTheNewFields) {
  sci_subscriber_options options = COptions("tcp://127.0.0.1:1");
  options.struct_size = offsetof(sci_subscriber_options, snapshot_url);
  options.snapshot_url = S("ftp://not-read");  // beyond the caller's struct: never looked at
  sci_subscriber* sub = nullptr;
  ASSERT_EQ(sci_subscriber_start(index_, &options, &sub), SCI_OK) << sci_last_error();
  EXPECT_FALSE(Stats().resyncing);
  sci_subscriber_stop(sub);
}

TEST_F(CapiSubscriber, RetargetMovesToAnotherPublisher) {
  const sci_subscriber_options options = COptions("tcp://127.0.0.1:1");
  sci_subscriber* sub = nullptr;
  ASSERT_EQ(sci_subscriber_start(index_, &options, &sub), SCI_OK) << sci_last_error();
  EXPECT_EQ(sci_subscriber_retarget(nullptr, S("tcp://127.0.0.1:1"), S("")), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sci_subscriber_retarget(sub, S(""), S("")), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sci_last_error()).find("sci_subscriber_retarget: endpoint is empty"), std::string::npos);
  EXPECT_EQ(sci_subscriber_retarget(sub, S("bogus://x"), S("")), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sci_subscriber_retarget(sub, S("tcp://127.0.0.1:1"), S("file:///x")), SCI_ERR_INVALID_ARGUMENT);

  LoopbackPublisher publisher(UniqueIpcEndpoint());
  ASSERT_EQ(sci_subscriber_retarget(sub, S(publisher.endpoint()), S("")), SCI_OK) << sci_last_error();
  ASSERT_TRUE(publisher.AwaitSubscription());
  publisher.SendBatch(7, std::vector<MooncakeEvent>{StoredEvent(1, "k")});
  ASSERT_TRUE(WaitFor([&] { return Stats().last_sequence == 7; }));
  sci_subscriber_stop(sub);
}

TEST_F(CapiSubscriber, FeedsTheIndexFromAGoldenCapture) {
  const std::vector<GoldenMessage> capture = LoadCapture("basic");
  ASSERT_EQ(capture.size(), 5u);
  LoopbackPublisher publisher(UniqueIpcEndpoint());
  sci_subscriber_options options = COptions(publisher.endpoint());
  options.reconnect_ms = 0;  // 0 = defaults
  options.stale_after_ms = 0;
  sci_subscriber* sub = nullptr;
  ASSERT_EQ(sci_subscriber_start(index_, &options, &sub), SCI_OK) << sci_last_error();
  ASSERT_TRUE(publisher.AwaitSubscription());
  for (const GoldenMessage& message : capture) publisher.SendFrames(message.frames);
  ASSERT_TRUE(WaitFor([&] { return Stats().messages_received == 5; }));
  bool present = false;
  ASSERT_EQ(sci_index_contains(index_, S("tenant-a"), S("12345"), &present), SCI_OK);
  EXPECT_TRUE(present);
  ASSERT_EQ(sci_index_contains(index_, S(""), S("cf97adeedb59e05bfd73a2b4c2a8885708c4f4f70c84c64b27120e72ab733b72_0_k"),
                               &present),
            SCI_OK);
  EXPECT_TRUE(present);
  EXPECT_EQ(Stats().last_sequence, 5u);
  EXPECT_TRUE(Stats().subscriber_connected);
  sci_subscriber_stop(sub);
  EXPECT_FALSE(Stats().subscriber_connected);
}

}  // namespace
}  // namespace sci
