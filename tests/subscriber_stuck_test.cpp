// A subscriber that says when it is stuck (issue 27, section 4): an
// endpoint nobody listens on, and a resync that cannot start or keeps
// failing, are logged as warnings once the grace (stale_after_ms) has
// passed, then again with exponential back-off, never a flood. Endpoints of
// the wrong shape are refused up front with a message saying what an
// endpoint must look like.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "feed/endpoint_syntax.h"
#include "feed/subscriber.h"
#include "feed/warning_backoff.h"
#include "index/index.h"
#include "log_capture.h"
#include "loopback_publisher.h"
#include "snapshot_server.h"
#include "wait_for.h"

namespace sci {
namespace {

using namespace std::chrono_literals;
using testing::LogCapture;
using testing::LoopbackPublisher;
using testing::SnapshotServer;
using testing::UniqueIpcEndpoint;
using testing::WaitFor;

constexpr uint32_t kGraceMs = 200;

std::unique_ptr<Subscriber> Start(Index& index, SubscriberOptions options) {
  options.stale_after_ms = kGraceMs;
  options.reconnect_ms = 20;
  options.reconnect_max_ms = 50;
  SubscriberError code = SubscriberError::kNone;
  std::string error;
  std::unique_ptr<Subscriber> subscriber = Subscriber::Start(index, options, &code, &error);
  EXPECT_NE(subscriber, nullptr) << error;
  return subscriber;
}

// A loopback port nothing listens on: bound by a publisher, then closed.
std::string DeadTcpEndpoint() {
  LoopbackPublisher probe(testing::kAnyLoopbackTcpPort);
  return probe.endpoint();
}

TEST(SubscriberStuck, AnUnreachableEndpointIsWarnedAfterTheGraceThenWithBackOff) {
  LogCapture log;
  Index index;
  const std::string endpoint = DeadTcpEndpoint();
  SubscriberOptions options;
  options.endpoint = endpoint;
  const auto started = std::chrono::steady_clock::now();
  auto subscriber = Start(index, options);
  ASSERT_TRUE(WaitFor([&] { return log.Count(LogLevel::kWarn, "not connected after") >= 1; }, 5s));
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(kGraceMs));
  // Warnings at the grace, then 2x, 4x, ... after the previous one: in
  // 200 + 400 + 800 + 1600 ms, four of them, never one per reconnect.
  ASSERT_TRUE(WaitFor([&] { return log.Count(LogLevel::kWarn, "not connected after") >= 3; }, 5s));
  const auto third = std::chrono::steady_clock::now();
  EXPECT_GE(third - started, std::chrono::milliseconds(kGraceMs * (1 + 2 + 4)));
  const std::vector<std::string> warnings = log.At(LogLevel::kWarn);
  EXPECT_NE(warnings.front().find(endpoint), std::string::npos) << warnings.front();
  subscriber->Stop();
  EXPECT_LE(log.Count(LogLevel::kWarn, "not connected after"), 4u);
}

TEST(SubscriberStuck, AConnectionEndsTheWarningsAndIsLogged) {
  LogCapture log;
  Index index;
  const std::string endpoint = UniqueIpcEndpoint();
  SubscriberOptions options;
  options.endpoint = endpoint;
  auto subscriber = Start(index, options);
  ASSERT_TRUE(WaitFor([&] { return log.Count(LogLevel::kWarn, "not connected after") >= 1; }, 5s));
  LoopbackPublisher publisher(endpoint);
  ASSERT_TRUE(publisher.AwaitSubscription());
  ASSERT_TRUE(WaitFor([&] { return log.Count(LogLevel::kInfo, "no longer stuck") == 1; }, 5s));
  const size_t warned = log.Count(LogLevel::kWarn, "not connected after");
  // Connected: the next 4 graces pass without a warning.
  ASSERT_FALSE(WaitFor([&] { return log.Count(LogLevel::kWarn, "not connected after") > warned; },
                       std::chrono::milliseconds(4 * kGraceMs), 20ms));
}

TEST(SubscriberStuck, FollowingALeaderViewThatNamesNoLeaderIsWarned) {
  LogCapture log;
  Index index;
  SubscriberOptions options;
  options.redis_endpoint = "redis://127.0.0.1:1";  // nobody there: no view, hence no leader
  options.event_port = 5557;
  auto subscriber = Start(index, options);
  ASSERT_TRUE(WaitFor([&] { return log.Count(LogLevel::kWarn, "no leader known after") >= 1; }, 5s));
  EXPECT_GE(log.Count(LogLevel::kWarn, "leader view: Redis unreachable"), 1u);
}

TEST(SubscriberStuck, AResyncThatCannotStartIsWarned) {
  LogCapture log;
  Index index;
  SnapshotServer snapshot;
  LoopbackPublisher publisher(UniqueIpcEndpoint());
  SubscriberOptions options;
  options.endpoint = publisher.endpoint();
  options.snapshot_url = snapshot.url();
  auto subscriber = Start(index, options);
  ASSERT_TRUE(publisher.AwaitSubscription());
  // Connected, but the publisher says nothing: the resync waits for a first
  // message, every query misses, and the user is told why.
  ASSERT_TRUE(WaitFor([&] { return log.Count(LogLevel::kWarn, "the resync cannot start") >= 1; }, 5s));
  EXPECT_TRUE(index.GetStats().resyncing);
  EXPECT_EQ(snapshot.requests(), 0);
}

TEST(SubscriberStuck, AResyncThatKeepsFailingIsWarnedWithBackOff) {
  LogCapture log;
  Index index;
  SnapshotServer snapshot;
  snapshot.SetFault(SnapshotServer::Fault::kStatus500);
  LoopbackPublisher publisher(UniqueIpcEndpoint());
  SubscriberOptions options;
  options.endpoint = publisher.endpoint();
  options.snapshot_url = snapshot.url();
  options.resync_min_interval_ms = 100;
  auto subscriber = Start(index, options);
  ASSERT_TRUE(publisher.AwaitSubscription());
  // A message every 10 ms: every attempt the back-off allows is made.
  uint64_t sequence = 0;
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor(
      [&] {
        publisher.SendBatch(++sequence, std::vector<MooncakeEvent>{testing::StoredEvent(1, "k")});
        return log.Count(LogLevel::kWarn, "resync failed (3 in a row)") == 1;
      },
      10s, 10ms));
  // 100 ms, then 200, 400 between attempts: the third failure comes no
  // sooner than 300 ms after the first attempt, never one per message.
  EXPECT_GE(std::chrono::steady_clock::now() - started, 300ms);
  EXPECT_EQ(log.Count(LogLevel::kWarn, "resync failed ("), 3u);
  EXPECT_LE(snapshot.requests(), 4);
}

TEST(SubscriberStuck, WarningBackOffDoublesUpToItsCeiling) {
  using Clock = WarningBackoff::Clock;
  WarningBackoff backoff;
  const Clock::time_point t0{};
  backoff.Arm(t0, 1s);
  EXPECT_FALSE(backoff.Due(t0 + 999ms));
  EXPECT_TRUE(backoff.Due(t0 + 1s));
  EXPECT_EQ(*backoff.deadline(), t0 + 3s);
  EXPECT_FALSE(backoff.Due(t0 + 2s));
  EXPECT_TRUE(backoff.Due(t0 + 3s));
  EXPECT_EQ(*backoff.deadline(), t0 + 7s);
  Clock::time_point now = t0 + 7s;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(backoff.Due(now));
    now = *backoff.deadline();
  }
  EXPECT_TRUE(backoff.Due(now));
  EXPECT_EQ(*backoff.deadline() - now, std::chrono::seconds(1 << WarningBackoff::kMaxDoublings));
  backoff.Arm(now, 5s);  // still armed: the trouble goes on, nothing changes
  EXPECT_EQ(*backoff.deadline() - now, std::chrono::seconds(1 << WarningBackoff::kMaxDoublings));
  backoff.Disarm();
  EXPECT_FALSE(backoff.deadline().has_value());
}

// ---- what an endpoint must look like ----

TEST(EndpointSyntax, AcceptsTcpAndIpc) {
  for (const char* ok : {"tcp://127.0.0.1:5557", "tcp://master.local:1", "tcp://[::1]:65535", "ipc:///tmp/kv.ipc"}) {
    EXPECT_EQ(CheckEndpointSyntax("endpoint", ok, EndpointUse::kConnect), "") << ok;
  }
  for (const char* ok : {"tcp://127.0.0.1:*", "tcp://*:5557"}) {
    EXPECT_EQ(CheckEndpointSyntax("--endpoint", ok, EndpointUse::kBind), "") << ok;
  }
}

TEST(EndpointSyntax, SaysWhatAnEndpointMustLookLike) {
  const std::string bare = CheckEndpointSyntax("endpoint", "127.0.0.1:5557", EndpointUse::kConnect);
  EXPECT_NE(bare.find("endpoint \"127.0.0.1:5557\" has no transport"), std::string::npos) << bare;
  EXPECT_NE(bare.find("tcp://host:port or ipc://path"), std::string::npos) << bare;
  EXPECT_NE(bare.find("tcp://127.0.0.1:5557"), std::string::npos) << bare;
  const std::string http = CheckEndpointSyntax("endpoint", "http://master:5557", EndpointUse::kConnect);
  EXPECT_NE(http.find("transport \"http\" is not supported"), std::string::npos) << http;
  EXPECT_NE(http.find("tcp://host:port or ipc://path"), std::string::npos) << http;
  for (const char* bad : {"tcp://127.0.0.1", "tcp://127.0.0.1:0", "tcp://127.0.0.1:65536", "tcp://:5557",
                          "tcp://h:55x", "tcp://127.0.0.1:*"}) {
    const std::string why = CheckEndpointSyntax("endpoint", bad, EndpointUse::kConnect);
    EXPECT_NE(why.find("is not tcp://host:port"), std::string::npos) << bad << ": " << why;
  }
  EXPECT_NE(CheckEndpointSyntax("endpoint", "ipc://", EndpointUse::kConnect).find("has no path"),
            std::string::npos);
  EXPECT_NE(CheckEndpointSyntax("endpoint", "", EndpointUse::kConnect).find("endpoint is empty; it must look like"),
            std::string::npos);
}

TEST(EndpointSyntax, StartAndRetargetRefuseAnEndpointWithoutATransport) {
  Index index;
  SubscriberOptions options;
  options.endpoint = "127.0.0.1:5557";
  SubscriberError code = SubscriberError::kNone;
  std::string error;
  EXPECT_EQ(Subscriber::Start(index, options, &code, &error), nullptr);
  EXPECT_EQ(code, SubscriberError::kInvalidArgument);
  EXPECT_NE(error.find("tcp://host:port or ipc://path"), std::string::npos) << error;

  options.endpoint = UniqueIpcEndpoint();
  auto subscriber = Start(index, options);
  ASSERT_NE(subscriber, nullptr);
  EXPECT_EQ(subscriber->Retarget("http://master:5557", "", &error), SubscriberError::kInvalidArgument);
  EXPECT_NE(error.find("transport \"http\" is not supported"), std::string::npos) << error;
}

}  // namespace
}  // namespace sci
