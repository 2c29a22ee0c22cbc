// HA through Redis, piece by piece, against a real redis-server
// (tests/redis_process.h): the view's naming (the <ns> escaping), the
// redis:// URL, what an HMGET answer means (a partly written hash is no
// view), a read that a dead or silent Redis cannot hold up, the
// subscriber option (exclusive with etcd, bad URLs named), and sci-publish
// --redis electing itself with Mooncake's semantics (acquire, renew,
// release, a killed leader's view expiring) while sci-tail --redis follows.
// Following a change of leader and a whole failover are in
// leader_follow_test and failover_test, run against etcd and Redis alike.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"
#include "feed/redis_connection.h"
#include "feed/redis_view.h"
#include "feed/subscriber.h"
#include "index/index.h"
#include "redis_process.h"
#include "shared_cache_index.h"
#include "wait_for.h"

namespace sci {
namespace {

using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::RedisProcess;
using testing::WaitFor;

const std::string kPublish = std::string(SCI_BINARY_DIR) + "/src/tools/sci-publish";
const std::string kTail = std::string(SCI_BINARY_DIR) + "/src/tools/sci-tail";
constexpr char kView[] = "mooncake-store/{mooncake_cluster}/master_view";
constexpr char kVersion[] = "mooncake-store/{mooncake_cluster}/master_view_version";

// ---- naming ----

TEST(RedisView, KeysEscapeTheClusterIdAsMooncakeDoes) {
  EXPECT_EQ(RedisMasterViewKey("mooncake_cluster"), kView);
  EXPECT_EQ(RedisViewVersionKey("mooncake_cluster"), kVersion);
  EXPECT_EQ(RedisNamespace("pool-a/"), "pool-a");         // one trailing '/' dropped
  EXPECT_EQ(RedisNamespace("pool-a//"), "pool-a/");       // only one
  EXPECT_EQ(RedisNamespace("a{b}c"), "a_b_c");            // braces would break the hash tag
  EXPECT_EQ(RedisNamespace("{x}/"), "_x_");
  EXPECT_EQ(RedisMasterViewKey("sci{test}/"), "mooncake-store/{sci_test_}/master_view");
}

// ---- redis:// URLs ----

TEST(RedisUrl, ParsesHostPortPasswordAndDatabase) {
  RedisAddress a;
  std::string error;
  ASSERT_TRUE(ParseRedisUrl("redis://127.0.0.1:6380", &a, &error)) << error;
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 6380);
  EXPECT_EQ(a.db, 0u);
  EXPECT_TRUE(a.password.empty());
  ASSERT_TRUE(ParseRedisUrl("redis://:s%40cret@redis-ha.local:7000/3", &a, &error)) << error;
  EXPECT_EQ(a.password, "s@cret");
  EXPECT_TRUE(a.user.empty());
  EXPECT_EQ(a.db, 3u);
  EXPECT_EQ(a.display, "redis://redis-ha.local:7000/3");  // never the password
  ASSERT_TRUE(ParseRedisUrl("redis://router:pw@[::1]:7001", &a, &error)) << error;
  EXPECT_EQ(a.user, "router");
  EXPECT_EQ(a.host, "::1");
  ASSERT_TRUE(ParseRedisUrl("redis://h", &a, &error)) << error;
  EXPECT_EQ(a.port, 6379);
}

TEST(RedisUrl, SaysWhatIsWrong) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"http://h:6379", "must look like redis://"},
      {"rediss://h:6379", "TLS"},
      {"redis://", "the host is empty"},
      {"redis://h:0", "the port \"0\" is not 1..65535"},
      {"redis://h:x", "is not 1..65535"},
      {"redis://h:", "the port after ':' is empty"},
      {"redis://h:1/db", "the database \"db\" is not a number"},
      {"redis://secret@h:1", "must be :password or user:password"},
      {"redis://:@h:1", "the password after ':' is empty"},
      {"redis://h/a:1", "is not a number"},
      {"redis://h h:1", "is not a host name"},
  };
  for (const auto& [url, expected] : cases) {
    RedisAddress a;
    std::string error;
    EXPECT_FALSE(ParseRedisUrl(url, &a, &error)) << url;
    EXPECT_NE(error.find(expected), std::string::npos) << url << ": " << error;
    EXPECT_EQ(error.find("secret"), std::string::npos) << error;
  }
}

// ---- HMGET answers ----

RedisReply Str(std::string s) { return RedisReply{RedisReply::Type::kString, std::move(s), 0, {}}; }
RedisReply Nil() { return RedisReply{}; }
RedisReply Array(std::vector<RedisReply> e) { return RedisReply{RedisReply::Type::kArray, {}, 0, std::move(e)}; }

TEST(RedisView, APartlyWrittenHashIsNoView) {
  LeaderView view;
  std::string error;
  ASSERT_EQ(ParseMasterViewReply(Array({Str("127.0.0.2:50051"), Str("7")}), &view, &error),
            LeaderViewStatus::kFound)
      << error;
  EXPECT_EQ(view.host, "127.0.0.2");
  EXPECT_EQ(view.address, "127.0.0.2:50051");
  EXPECT_EQ(view.version, 7);
  EXPECT_EQ(ParseMasterViewReply(Array({Nil(), Nil()}), &view, &error), LeaderViewStatus::kAbsent);
  EXPECT_EQ(ParseMasterViewReply(Array({Str("127.0.0.2:50051"), Nil()}), &view, &error), LeaderViewStatus::kAbsent);
  EXPECT_EQ(ParseMasterViewReply(Array({Nil(), Str("7")}), &view, &error), LeaderViewStatus::kAbsent);
  for (const RedisReply& bad :
       {Array({Str("127.0.0.2:50051"), Str("seven")}), Array({Str("127.0.0.2:50051"), Str("")}),
        Array({Str("no-port"), Str("7")}), Array({Str("a/b:1"), Str("7")}), Array({Str("x")}), Str("x"),
        RedisReply{RedisReply::Type::kError, "WRONGTYPE Operation against a key", 0, {}}}) {
    EXPECT_EQ(ParseMasterViewReply(bad, &view, &error), LeaderViewStatus::kMalformed);
  }
}

// ---- the view in a real Redis ----

TEST(RedisView, ReadsTheViewFromARealRedis) {
  RedisProcess redis;
  ASSERT_TRUE(redis.ok()) << redis.error();
  RedisAddress address;
  std::string error;
  ASSERT_TRUE(ParseRedisUrl(redis.url(), &address, &error)) << error;
  RedisViewSource source(address, "mooncake_cluster", 2s);
  LeaderView view;
  EXPECT_EQ(source.Read(&view, &error), LeaderViewStatus::kAbsent) << error;
  // Half a view (as a script cut short, or a hand-made hash, would leave it).
  ASSERT_TRUE(redis.Cli({"HSET", kView, "leader_address", "127.0.0.2:50051"})) << redis.error();
  EXPECT_EQ(source.Read(&view, &error), LeaderViewStatus::kAbsent);
  ASSERT_TRUE(redis.Cli({"HSET", kView, "view_version", "4", "owner_token", "t"})) << redis.error();
  ASSERT_EQ(source.Read(&view, &error), LeaderViewStatus::kFound) << error;
  EXPECT_EQ(view.address, "127.0.0.2:50051");
  EXPECT_EQ(view.version, 4);
  // Not a hash at all.
  ASSERT_TRUE(redis.Cli({"DEL", kView}) && redis.Cli({"SET", kView, "127.0.0.2:50051"}));
  EXPECT_EQ(source.Read(&view, &error), LeaderViewStatus::kMalformed);
  EXPECT_NE(error.find("WRONGTYPE"), std::string::npos) << error;
  // Gone: unreachable, then back once it is (a new connection).
  redis.Kill();
  EXPECT_EQ(source.Read(&view, &error), LeaderViewStatus::kUnreachable);
  EXPECT_NE(error.find(address.display), std::string::npos) << error;
}

TEST(RedisView, AuthenticatesAndSelectsItsDatabase) {
  RedisProcess redis("pw-42");
  ASSERT_TRUE(redis.ok()) << redis.error();
  ASSERT_TRUE(redis.Cli({"EVAL", "redis.call('SELECT', 2); return redis.call('HSET', KEYS[1], 'leader_address', "
                                 "'127.0.0.3:1', 'view_version', '9')",
                         "1", kView}))
      << redis.error();
  std::string error;
  RedisAddress address;
  ASSERT_TRUE(ParseRedisUrl(redis.url() + "/2", &address, &error)) << error;
  LeaderView view;
  RedisViewSource with_db(address, "mooncake_cluster", 2s);
  ASSERT_EQ(with_db.Read(&view, &error), LeaderViewStatus::kFound) << error;
  EXPECT_EQ(view.version, 9);
  address.db = 0;
  RedisViewSource db0(address, "mooncake_cluster", 2s);
  EXPECT_EQ(db0.Read(&view, &error), LeaderViewStatus::kAbsent) << error;
  address.password = "wrong";
  RedisViewSource refused(address, "mooncake_cluster", 2s);
  EXPECT_EQ(refused.Read(&view, &error), LeaderViewStatus::kUnreachable);
  EXPECT_NE(error.find("AUTH refused"), std::string::npos) << error;
  EXPECT_EQ(error.find("wrong"), std::string::npos) << error;
}

// A server that accepts connections and never answers: a Redis hung, or
// a peer that is not Redis. accepted() counts the connections it took.
class SilentServer {
 public:
  SilentServer() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(fd_, 4) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      ADD_FAILURE() << "cannot listen";
    }
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] {
      while (true) {
        const int peer = ::accept(fd_, nullptr, nullptr);
        if (peer < 0) return;  // shut down
        peers_.push_back(peer);  // held open, never read
        accepted_.fetch_add(1);
      }
    });
  }
  ~SilentServer() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    for (int peer : peers_) ::close(peer);
    ::close(fd_);
  }
  int port() const { return port_; }
  int accepted() const { return accepted_.load(); }

 private:
  int fd_;
  int port_ = 0;
  std::vector<int> peers_;  // the accepting thread's until joined
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

TEST(RedisView, ASilentRedisTimesOutAndACancelEndsTheWaitAtOnce) {
  SilentServer silent;
  RedisAddress address;
  std::string error;
  ASSERT_TRUE(ParseRedisUrl("redis://127.0.0.1:" + std::to_string(silent.port()), &address, &error));
  {
    RedisViewSource source(address, "c", 300ms);
    LeaderView view;
    const auto started = std::chrono::steady_clock::now();
    EXPECT_EQ(source.Read(&view, &error), LeaderViewStatus::kUnreachable);
    EXPECT_LT(std::chrono::steady_clock::now() - started, 3s);
    EXPECT_NE(error.find("timed out"), std::string::npos) << error;
  }
  // A long time-out, cut short from another thread (what stop() does).
  RedisViewSource source(address, "c", 60s);
  auto read = std::async(std::launch::async, [&] {
    LeaderView view;
    std::string why;
    return source.Read(&view, &why);
  });
  ASSERT_TRUE(WaitFor([&] { return silent.accepted() == 2; }));  // the second read's connection
  ASSERT_EQ(read.wait_for(100ms), std::future_status::timeout);  // blocked on the silent peer
  const auto cancelled = std::chrono::steady_clock::now();
  source.Cancel();
  ASSERT_EQ(read.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(read.get(), LeaderViewStatus::kUnreachable);
  EXPECT_LT(std::chrono::steady_clock::now() - cancelled, 2s);
  LeaderView view;
  EXPECT_EQ(source.Read(&view, &error), LeaderViewStatus::kUnreachable);  // and every later read
}

TEST(RedisView, ASubscriberFollowingASilentRedisStopsPromptly) {
  SilentServer silent;
  Index index;
  SubscriberOptions options;
  options.redis_endpoint = "redis://127.0.0.1:" + std::to_string(silent.port());
  options.event_port = 5557;
  SubscriberError code = SubscriberError::kNone;
  std::string error;
  auto subscriber = Subscriber::Start(index, options, &code, &error);
  ASSERT_NE(subscriber, nullptr) << error;
  ASSERT_TRUE(WaitFor([&] { return silent.accepted() == 1; }));  // the follower's read now waits on it
  const auto started = std::chrono::steady_clock::now();
  subscriber->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);
}

// Cancel() shuts the socket down; a command written after that fails with
// EPIPE and raises SIGPIPE, which ends the process unless blocked
// (common/sigpipe_block.h). CI lost the whole TSan stage to it (exit 141)
// in the test above. Cancelling the moment the server accepts lands in the
// window between the connect and the write often enough to catch its loss
// in a few hundred tries.
TEST(RedisView, ACancelRacingTheFirstCommandNeverRaisesSigpipe) {
  SilentServer silent;
  RedisAddress address;
  std::string error;
  ASSERT_TRUE(ParseRedisUrl("redis://127.0.0.1:" + std::to_string(silent.port()), &address, &error));
  for (int i = 0; i < 300; ++i) {
    RedisConnection connection(address, 5s);
    auto command = std::async(std::launch::async, [&] {
      RedisReply reply;
      std::string why;
      return connection.Command({"PING"}, &reply, &why);
    });
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (silent.accepted() <= i) {  // no sleep: the window is microseconds wide
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "try " << i << " never connected";
    }
    // Then 0-60 us more, so that some tries land between connect and write.
    const auto jitter = std::chrono::steady_clock::now() + std::chrono::microseconds(i % 61);
    while (std::chrono::steady_clock::now() < jitter) {
    }
    connection.Cancel();
    ASSERT_EQ(command.wait_for(5s), std::future_status::ready);
    EXPECT_FALSE(command.get());
  }
}

// ---- the subscriber option ----

std::string StartError(const SubscriberOptions& options) {
  Index index;
  SubscriberError code = SubscriberError::kNone;
  std::string error;
  EXPECT_EQ(Subscriber::Start(index, options, &code, &error), nullptr);
  EXPECT_EQ(code, SubscriberError::kInvalidArgument);
  return error;
}

TEST(RedisOption, IsValidatedAndExclusiveWithEtcd) {
  SubscriberOptions options;
  options.redis_endpoint = "redis://127.0.0.1:6379";
  options.event_port = 5557;
  options.etcd_endpoints = {"http://127.0.0.1:2379"};
  EXPECT_NE(StartError(options).find("redis_endpoint and etcd_endpoints are mutually exclusive"), std::string::npos);
  options.etcd_endpoints.clear();
  options.redis_endpoint = "redis://:hunter2@h:99999";
  const std::string bad_port = StartError(options);
  EXPECT_EQ(bad_port.rfind("redis_endpoint: the port \"99999\"", 0), 0u) << bad_port;
  EXPECT_EQ(bad_port.find("hunter2"), std::string::npos) << bad_port;
  options.redis_endpoint = "redis://127.0.0.1:6379";
  options.endpoint = "tcp://127.0.0.1:5557";
  EXPECT_NE(StartError(options).find("must be empty with redis_endpoint"), std::string::npos);
  options.endpoint.clear();
  options.event_port = 0;
  EXPECT_NE(StartError(options).find("required with redis_endpoint"), std::string::npos);
}

TEST(RedisOption, TheCApiReadsItOnlyFromCallersThatHaveIt) {
  sci_index* index = nullptr;
  sci_index_options index_options = SCI_INDEX_OPTIONS_INIT;
  ASSERT_EQ(sci_index_new(&index_options, &index), SCI_OK);
  const std::string redis = "redis://127.0.0.1:1", etcd = "http://127.0.0.1:1";
  sci_subscriber_options options = SCI_SUBSCRIBER_OPTIONS_INIT;
  options.redis_endpoint = {redis.data(), redis.size()};
  options.etcd_endpoints = {etcd.data(), etcd.size()};
  options.event_port = 5557;
  sci_subscriber* sub = nullptr;
  EXPECT_EQ(sci_subscriber_start(index, &options, &sub), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sci_last_error()).find("opts->redis_endpoint and etcd_endpoints are mutually exclusive"),
            std::string::npos)
      << sci_last_error();
  options.redis_endpoint = {nullptr, 3};
  EXPECT_EQ(sci_subscriber_start(index, &options, &sub), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sci_last_error()).find("opts->redis_endpoint has a NULL ptr"), std::string::npos)
      << sci_last_error();
  // A 1.1 caller: its struct ends at admin_port; whatever lies beyond is not read.
  options.redis_endpoint = {redis.data(), redis.size()};
  options.struct_size = offsetof(sci_subscriber_options, redis_endpoint);
  ASSERT_EQ(sci_subscriber_start(index, &options, &sub), SCI_OK) << sci_last_error();  // follows etcd alone
  sci_subscriber_stop(sub);
  sci_index_free(index);
}

// ---- sci-publish --redis: Mooncake's election ----

nlohmann::json AwaitLine(ChildProcess& child, const std::string& field, std::chrono::milliseconds timeout = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string line;
  while (std::chrono::steady_clock::now() < deadline &&
         child.ReadStderrLine(&line, std::chrono::duration_cast<std::chrono::milliseconds>(
                                         deadline - std::chrono::steady_clock::now()))) {
    const nlohmann::json json = nlohmann::json::parse(line, nullptr, false);
    if (json.is_object() && json.contains(field)) return json;
  }
  return nlohmann::json(nlohmann::json::value_t::discarded);
}

std::unique_ptr<ChildProcess> Candidate(const RedisProcess& redis, const std::string& host) {
  return ChildProcess::Spawn({kPublish, "--endpoint", "tcp://" + host + ":*", "--redis", redis.url(), "--advertise",
                              host + ":50051", "--script", "-", "--keep-running"},
                             "stored a\n");
}

TEST(RedisElection, OneScriptElectsRenewsReleasesAndAKilledLeadersViewExpires) {
  RedisProcess redis;
  ASSERT_TRUE(redis.ok()) << redis.error();
  auto leader = Candidate(redis, "127.0.0.2");
  ASSERT_NE(leader, nullptr);
  const nlohmann::json won = AwaitLine(*leader, "leader");
  ASSERT_FALSE(won.is_discarded()) << leader->err();
  EXPECT_EQ(won["view_key"], kView);
  EXPECT_EQ(won["view_version"], 1);
  std::string out;
  ASSERT_TRUE(redis.Cli({"HMGET", kView, "leader_address", "view_version"}, &out));
  EXPECT_EQ(out, "127.0.0.2:50051\n1");
  ASSERT_TRUE(redis.Cli({"HGET", kView, "owner_token"}, &out));
  EXPECT_FALSE(out.empty());
  ASSERT_TRUE(redis.Cli({"GET", kVersion}, &out));
  EXPECT_EQ(out, "1");
  // Renewed (PEXPIRE 5000 every second): the TTL never runs down.
  ASSERT_TRUE(WaitFor(
      [&] {
        std::string ttl;
        return redis.Cli({"PTTL", kView}, &ttl) && std::stoi(ttl) > 4000 && std::stoi(ttl) <= 5000;
      },
      3s, 50ms));

  auto standby = Candidate(redis, "127.0.0.3");
  ASSERT_NE(standby, nullptr);
  const nlohmann::json waiting = AwaitLine(*standby, "standby");
  EXPECT_EQ(waiting["standby"], "127.0.0.2:50051") << standby->err();

  // A leader stopped gracefully deletes its view: the standby wins at once,
  // with the next view_version.
  const auto stopped = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(leader->pid(), SIGTERM), 0);
  ASSERT_TRUE(leader->Finish());
  EXPECT_EQ(leader->exit_code(), 0) << leader->err();
  const nlohmann::json took_over = AwaitLine(*standby, "leader");
  ASSERT_FALSE(took_over.is_discarded()) << standby->err();
  EXPECT_LT(std::chrono::steady_clock::now() - stopped, 3s);
  EXPECT_EQ(took_over["view_version"], 2);

  // Someone else's token renews and deletes nothing.
  ASSERT_TRUE(redis.Cli({"EVAL", "if redis.call('HGET', KEYS[1], 'owner_token') == ARGV[1] then "
                                 "return redis.call('DEL', KEYS[1]) end return 0",
                         "1", kView, "not-the-owner"},
                        &out));
  EXPECT_EQ(out, "0");

  // A killed leader renews nothing: its view expires after 5 s and a new
  // candidate wins.
  ASSERT_EQ(::kill(standby->pid(), SIGKILL), 0);
  const auto killed = std::chrono::steady_clock::now();
  auto third = Candidate(redis, "127.0.0.4");
  ASSERT_NE(third, nullptr);
  const nlohmann::json third_won = AwaitLine(*third, "leader", 15s);
  ASSERT_FALSE(third_won.is_discarded()) << third->err();
  const auto waited = std::chrono::steady_clock::now() - killed;
  EXPECT_GE(waited, 3500ms);  // the last renewal was at most 1 s before the kill
  EXPECT_LT(waited, 7s);
  EXPECT_EQ(third_won["view_version"], 3);
  ASSERT_EQ(::kill(third->pid(), SIGTERM), 0);
  ASSERT_TRUE(third->Finish());
  EXPECT_FALSE(redis.Cli({"EXISTS", kView}, &out) && out == "1");
}

TEST(RedisElection, ALeaderThatLosesRedisStepsDown) {
  RedisProcess redis;
  ASSERT_TRUE(redis.ok()) << redis.error();
  auto leader = Candidate(redis, "127.0.0.2");
  ASSERT_NE(leader, nullptr);
  ASSERT_FALSE(AwaitLine(*leader, "leader").is_discarded()) << leader->err();
  redis.Kill();
  ASSERT_TRUE(leader->Finish(std::chrono::seconds(15)));
  EXPECT_EQ(leader->exit_code(), 1);
  EXPECT_NE(leader->err().find("lost the leadership"), std::string::npos) << leader->err();
}

TEST(RedisElection, BadRedisFlagsExitWithTwoAndSayWhy) {
  for (const auto& [flags, expected] :
       {std::pair{std::vector<std::string>{"--redis", "redis://h:0", "--advertise", "1.2.3.4:5"}, "--redis: the port"},
        std::pair{std::vector<std::string>{"--redis", "redis://h:1"}, "--redis needs --advertise"},
        std::pair{std::vector<std::string>{"--redis", "redis://h:1", "--etcd", "http://h:2", "--advertise", "1.2.3.4:5"},
                  "give --etcd or --redis, not both"}}) {
    std::vector<std::string> args = {kPublish, "--endpoint", "tcp://127.0.0.1:*", "--keep-running"};
    args.insert(args.end(), flags.begin(), flags.end());
    auto publish = ChildProcess::Spawn(args);
    ASSERT_NE(publish, nullptr);
    ASSERT_TRUE(publish->Finish());
    EXPECT_EQ(publish->exit_code(), 2);
    EXPECT_NE(publish->err().find(expected), std::string::npos) << publish->err();
  }
}

// ---- sci-tail --redis follows the leader sci-publish --redis elected ----

TEST(RedisElection, SciTailFollowsTheLeaderElectedThroughRedis) {
  RedisProcess redis;
  ASSERT_TRUE(redis.ok()) << redis.error();
  auto leader = ChildProcess::Spawn({kPublish, "--endpoint", "tcp://127.0.0.2:*", "--admin-port", "0", "--redis",
                                     redis.url(), "--advertise", "127.0.0.2:50051", "--script", "-",
                                     "--keep-running", "--live-every-ms", "50"},
                                    "stored a\nstored b\n");
  ASSERT_NE(leader, nullptr);
  const nlohmann::json ready = AwaitLine(*leader, "listening");
  ASSERT_TRUE(ready.contains("admin")) << leader->err();
  const std::string listening = ready["listening"];
  const std::string admin = ready["admin"];
  auto tail = ChildProcess::Spawn({kTail, "--redis", redis.url(), "--event-port",
                                   listening.substr(listening.rfind(':') + 1), "--admin-port",
                                   admin.substr(admin.rfind(':') + 1), "--max-messages", "5"});
  ASSERT_NE(tail, nullptr);
  ASSERT_TRUE(tail->Finish(std::chrono::seconds(20))) << tail->err();
  EXPECT_EQ(tail->exit_code(), 0) << tail->err();
  EXPECT_NE(tail->out().find("\"leader_changes\":1"), std::string::npos) << tail->out();
  EXPECT_NE(tail->out().find("\"resyncs\":1"), std::string::npos) << tail->out();
  ASSERT_EQ(::kill(leader->pid(), SIGTERM), 0);
  ASSERT_TRUE(leader->Finish());
}

}  // namespace
}  // namespace sci
