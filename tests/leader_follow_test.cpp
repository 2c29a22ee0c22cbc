// HA following against a real etcd and a real Redis (the same story for
// both, tests/view_store.h): the subscriber reads the Mooncake leader's view
// -- through etcd's v3 JSON gateway, or the Redis hash
// mooncake-store/{<ns>}/master_view -- and follows every change of it,
// clearing and resyncing from each new leader; two leaders share their
// ports on 127.0.0.2 and 127.0.0.3, as two hosts would.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>

#include "feed/etcd_view.h"
#include "common/log.h"
#include "feed/leader_follower.h"
#include "feed/redis_connection.h"
#include "feed/redis_view.h"
#include "feed/subscriber.h"
#include "index/index.h"
#include "master_stand_in.h"
#include "view_store.h"

namespace sci {
namespace {

using namespace std::chrono_literals;
using testing::AbsentKeyReader;
using testing::Master;
using testing::TickUntil;
using testing::ViewStore;
using testing::WaitFor;

// Which store, and the cluster id: for Redis one whose <ns> needs escaping
// ("sci{test}/" is the hash tag {sci_test_}).
struct Backend {
  const char* kind;
  const char* cluster_id;
  const char* redis_ns;
};
const Backend kEtcd{"etcd", "sci-test", ""};
const Backend kRedis{"redis", "sci{test}/", "sci_test_"};

int PortOf(const std::string& endpoint) { return std::stoi(endpoint.substr(endpoint.rfind(':') + 1)); }

class LeaderFollowTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    store_ = ViewStore::Start(GetParam().kind, GetParam().cluster_id, GetParam().redis_ns);
    ASSERT_TRUE(store_->ok()) << store_->error();
    first_ = std::make_unique<Master>("127.0.0.2", "tcp://127.0.0.2:*", 0);
    event_port_ = PortOf(first_->publisher().endpoint());
    admin_port_ = first_->snapshot().port();
    second_ = std::make_unique<Master>("127.0.0.3", "tcp://127.0.0.3:" + std::to_string(event_port_), admin_port_);
  }

  std::unique_ptr<Subscriber> Follow() {
    SubscriberOptions options;
    if (store_->is_redis()) {
      options.redis_endpoint = store_->subscriber_endpoint();
    } else {
      options.etcd_endpoints = SplitEndpointList(store_->subscriber_endpoint());  // the first one never answers
    }
    options.cluster_id = GetParam().cluster_id;
    options.event_port = static_cast<uint32_t>(event_port_);
    options.admin_port = static_cast<uint32_t>(admin_port_);
    options.etcd_poll_ms = 50;
    options.resync_min_interval_ms = 20;
    SubscriberError code;
    std::string error;
    auto subscriber = Subscriber::Start(index_, options, &code, &error);
    EXPECT_NE(subscriber, nullptr) << error;
    return subscriber;
  }

  Stats S() const { return index_.GetStats(); }

  std::unique_ptr<ViewStore> store_;
  std::unique_ptr<Master> first_, second_;
  int event_port_ = 0, admin_port_ = 0;
  Index index_;
};

TEST_P(LeaderFollowTest, FollowsEveryNewLeaderAndKeepsTheLastOneWhenTheStoreFails) {
  first_->StoreLost("on-both");
  first_->StoreLost("only-on-first");
  second_->StoreLost("on-both");
  second_->StoreLost("only-on-second");
  ASSERT_TRUE(store_->Elect("127.0.0.2:50051")) << store_->error();
  auto subscriber = Follow();
  ASSERT_TRUE(WaitFor([&] { return S().leader_changes == 1; }));
  ASSERT_TRUE(first_->publisher().AwaitSubscription());
  ASSERT_TRUE(TickUntil(*first_, [&] { return S().resyncs == 1; }));
  EXPECT_TRUE(index_.Contains({}, "only-on-first"));

  // Failover: the old leader dies, its lease lapses, the standby wins.
  first_->publisher().Close();
  ASSERT_TRUE(store_->Elect("127.0.0.3:50051")) << store_->error();
  ASSERT_TRUE(WaitFor([&] { return S().leader_changes == 2; }));
  AbsentKeyReader reader(index_, {"only-on-first", "never-stored"});
  ASSERT_TRUE(second_->publisher().AwaitSubscription());
  ASSERT_TRUE(TickUntil(*second_, [&] { return S().resyncs == 2; }));
  EXPECT_TRUE(index_.Contains({}, "on-both"));
  EXPECT_TRUE(index_.Contains({}, "only-on-second"));

  // The same leader elected again is a new sequence space too.
  ASSERT_TRUE(store_->Elect("127.0.0.3:50051")) << store_->error();
  ASSERT_TRUE(WaitFor([&] { return S().leader_changes == 3; }));
  ASSERT_TRUE(TickUntil(*second_, [&] { return S().resyncs == 3; }));

  // A malformed view is ignored: same leader, still serving.
  ASSERT_TRUE(store_->Malform()) << store_->error();
  second_->Store("after-malformed");
  ASSERT_TRUE(WaitFor([&] { return index_.Contains({}, "after-malformed"); }));
  EXPECT_EQ(S().leader_changes, 3u);

  // The store gone: the current leader is kept and the failures are counted.
  const uint64_t failures = index_.counters().etcd_failures.Get();
  store_->Stop();
  ASSERT_TRUE(WaitFor([&] { return index_.counters().etcd_failures.Get() >= failures + 2; }));
  second_->Store("after-etcd-died");
  ASSERT_TRUE(WaitFor([&] { return index_.Contains({}, "after-etcd-died"); }));
  EXPECT_EQ(S().leader_changes, 3u);
  reader.Stop();
  EXPECT_EQ(reader.false_hits(), 0);
}

// A view the subscriber could not follow for now (memory ran out part-way
// through its retarget, which said kNoMemory) is offered again at the next
// poll, and counted once followed: the follower does not take a view it
// failed to follow for the current one (1.2 did, and stayed on the old
// leader's socket state until the next election).
TEST_P(LeaderFollowTest, AViewThatCouldNotBeFollowedIsOfferedAgainAtTheNextPoll) {
  ASSERT_TRUE(store_->Elect("127.0.0.2:50051")) << store_->error();
  std::unique_ptr<LeaderViewSource> source;  // as the subscriber makes it
  if (store_->is_redis()) {
    RedisAddress address;
    std::string error;
    ASSERT_TRUE(ParseRedisUrl(store_->subscriber_endpoint(), &address, &error)) << error;
    source = std::make_unique<RedisViewSource>(std::move(address), GetParam().cluster_id, 2s);
  } else {
    source = std::make_unique<EtcdViewSource>(SplitEndpointList(store_->subscriber_endpoint()),
                                              GetParam().cluster_id, 2000, false);
  }
  std::atomic<int> offers{0};
  auto follower = std::make_unique<LeaderFollower>(nullptr, index_, std::move(source), 20, [&](const LeaderView& view) {
    EXPECT_EQ(view.host, "127.0.0.2");
    return offers.fetch_add(1) >= 2;  // the first two attempts fail
  });
  ASSERT_TRUE(WaitFor([&] { return S().leader_changes == 1; }));
  EXPECT_EQ(offers.load(), 3);
  // Followed: the same view is not offered again.
  const int followed_after = offers.load();
  EXPECT_FALSE(WaitFor([&] { return offers.load() > followed_after; }, 200ms));
  follower.reset();
}

// A log callback may stop its own subscriber, also from a line the leader
// follower's thread logs: that thread cannot be joined by itself, so it is
// detached and finishes on its own (ASan / TSan check what it touches).
std::atomic<Subscriber*> g_stop_on_leader_line{nullptr};
std::atomic<bool> g_stopped{false};

void StopOnLeaderLine(void*, int32_t, const char* msg, size_t) {
  if (std::strstr(msg, "leader view: leader is") == nullptr) return;
  if (Subscriber* s = g_stop_on_leader_line.exchange(nullptr)) {
    s->Stop();
    g_stopped.store(true);
  }
}

TEST_P(LeaderFollowTest, AStopFromTheFollowersOwnLogLineIsSafe) {
  auto subscriber = Follow();  // no view yet: nothing is logged about a leader
  g_stop_on_leader_line.store(subscriber.get());
  SetLogCallback(StopOnLeaderLine, nullptr);
  ASSERT_TRUE(store_->Elect("127.0.0.2:50051"));
  const bool stopped = WaitFor([] { return g_stopped.load(); });
  SetLogCallback(nullptr, nullptr);
  ASSERT_TRUE(stopped);
  EXPECT_EQ(S().leader_changes, 0u);  // stopped before following it
  subscriber.reset();
}

INSTANTIATE_TEST_SUITE_P(Store, LeaderFollowTest, ::testing::Values(kEtcd, kRedis),
                         [](const ::testing::TestParamInfo<Backend>& info) { return std::string(info.param.kind); });

TEST(EtcdView, ParsesTheGatewaysAnswer) {
  LeaderView view;
  std::string error;
  // "127.0.0.2:50051" in base64, as etcd 3.4 renders a range answer.
  EXPECT_EQ(ParseRangeResponse(R"({"header":{"revision":"7"},"kvs":[{"key":"eA==","create_revision":"5",)"
                               R"("mod_revision":"6","version":"2","value":"MTI3LjAuMC4yOjUwMDUx"}],"count":"1"})",
                               &view, &error),
            LeaderViewStatus::kFound)
      << error;
  EXPECT_EQ(view.host, "127.0.0.2");
  EXPECT_EQ(view.version, 5);
  EXPECT_EQ(ParseRangeResponse(R"({"header":{"revision":"7"}})", &view, &error), LeaderViewStatus::kAbsent);
  for (const char* bad : {"", "[]", R"({"kvs":[{"value":"%%%","create_revision":"1"}]})",
                          R"({"kvs":[{"value":"bm8tcG9ydA==","create_revision":"1"}]})",          // "no-port"
                          R"({"kvs":[{"value":"aDo3MDAwMA==","create_revision":"1"}]})",          // "h:70000"
                          R"({"kvs":[{"value":"YS9iOjE=","create_revision":"1"}]})",              // "a/b:1"
                          R"({"kvs":[{"value":"MTI3LjAuMC4yOjUwMDUx"}]})"}) {                     // no revision
    EXPECT_EQ(ParseRangeResponse(bad, &view, &error), LeaderViewStatus::kMalformed) << bad;
  }
}

}  // namespace
}  // namespace sci
