// sci-publish as a stand-in Mooncake master, run as a process: its admin
// HTTP server lists what it holds (GET /get_all_keys), and its leader
// election runs through a real etcd (tests/etcd_process.h): a standby waits
// while the leader holds mooncake-store/<cluster_id>/master_view and takes
// over once the leader's lease is gone.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <vector>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "child_process.h"
#include "etcd_process.h"
#include "wait_for.h"
#include "wire/wire_decoder.h"

namespace sci {
namespace {

using namespace std::chrono_literals;
using Child = testing::ChildProcess;
using Clock = std::chrono::steady_clock;
using testing::EtcdProcess;
using testing::WaitFor;

const std::string kPublish = std::string(SCI_BINARY_DIR) + "/src/tools/sci-publish";
const std::string kViewKey = "mooncake-store/mooncake_cluster/master_view";

// A script file under the temp directory, removed with the object.
class ScriptFile {
 public:
  explicit ScriptFile(const std::string& contents) {
    static int counter = 0;
    path_ = (std::filesystem::temp_directory_path() /
             ("sci-master-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".txt"))
                .string();
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << contents;
  }
  ~ScriptFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The next stderr line of `child` that is a JSON object holding `field`
// (other lines are skipped); a discarded value if none comes in time.
nlohmann::json AwaitLine(Child& child, const std::string& field, std::chrono::milliseconds timeout = 20s) {
  const auto deadline = Clock::now() + timeout;
  std::string line;
  while (Clock::now() < deadline) {
    if (!child.ReadStderrLine(&line, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()))) {
      break;
    }
    const nlohmann::json json = nlohmann::json::parse(line, nullptr, false);
    if (json.is_object() && json.contains(field)) return json;
  }
  return nlohmann::json(nlohmann::json::value_t::discarded);
}

// The port of "tcp://host:port" or "http://host:port".
int PortOf(const std::string& url) { return std::stoi(url.substr(url.rfind(':') + 1)); }

struct Listing {
  int status = 0;
  std::string body;
  std::string content_length;
};

Listing GetAllKeys(const std::string& host, int port, const std::string& path = "/get_all_keys") {
  httplib::Client client(host, port);
  client.set_connection_timeout(2s);
  client.set_read_timeout(10s);
  Listing listing;
  if (auto response = client.Get(path.c_str())) {
    listing.status = response->status;
    listing.body = response->body;
    listing.content_length = response->get_header_value("Content-Length");
  }
  return listing;
}

// The body's lines as a set; false if a line lacks its '\n'.
bool Lines(const std::string& body, std::set<std::string>* lines) {
  lines->clear();
  size_t at = 0;
  while (at < body.size()) {
    const size_t nl = body.find('\n', at);
    if (nl == std::string::npos) return false;
    lines->insert(body.substr(at, nl - at));
    at = nl + 1;
  }
  return true;
}

// Stops a --keep-running publisher with SIGTERM; its summary line.
nlohmann::json StopAndSummarise(Child& child) {
  EXPECT_EQ(::kill(child.pid(), SIGTERM), 0);
  EXPECT_TRUE(child.Finish());
  EXPECT_EQ(child.exit_code(), 0) << child.err();
  return nlohmann::json::parse(child.out(), nullptr, false);
}

// ---- the admin server ----

TEST(MasterStandIn, AdminServerListsTheHeldDefaultTenantKeys) {
  const ScriptFile script(
      "stored a\n"
      "stored b group=g1 medium=disk\n"
      "stored other-tenant tenant=t1\n"
      "stored key%20with%20blanks\n"
      "removed a\n");
  auto publish = Child::Spawn(
      {kPublish, "--endpoint", "tcp://127.0.0.1:*", "--script", script.path(), "--keep-running", "--admin-port", "0"});
  ASSERT_NE(publish, nullptr);
  const nlohmann::json ready = AwaitLine(*publish, "listening");
  ASSERT_TRUE(ready.contains("admin")) << publish->err();
  const int port = PortOf(ready["admin"]);

  const std::set<std::string> expected = {"b", "key with blanks"};
  std::set<std::string> lines;
  Listing listing;
  ASSERT_TRUE(WaitFor(
      [&] {
        listing = GetAllKeys("127.0.0.1", port);
        return listing.status == 200 && Lines(listing.body, &lines) && lines == expected;
      },
      10s, 20ms))
      << listing.status << " " << listing.body;
  EXPECT_EQ(listing.content_length, std::to_string(listing.body.size()));
  EXPECT_EQ(GetAllKeys("127.0.0.1", port, "/no_such_path").status, 404);

  const nlohmann::json summary = StopAndSummarise(*publish);
  EXPECT_EQ(summary["events"], 5);
  EXPECT_EQ(summary["held_keys"], 2);
}

// The second generation (--generation 2): the listing keeps a key while
// some medium holds it, a key stored on no named medium falls to any
// removal (as the index's does), and a `cleared` of the default tenant
// empties it (one of another tenant does not). The first generation drops
// a key on any removal. Each script ends with a marker, which the listing
// shows only once every event before it has been applied.
TEST(MasterStandIn, SecondGenerationListingKeepsAKeyWhileAMediumHoldsIt) {
  const ScriptFile media(
      "stored evicted medium=cpu\n"
      "stored evicted medium=disk\n"
      "removed evicted medium=cpu\n"
      "stored known-later medium=\n"
      "stored known-later medium=disk\n"
      "removed known-later medium=cpu\n"
      "stored unknown medium=\n"
      "removed unknown medium=disk\n"
      "stored kept tenant=t1\n"
      "cleared tenant=t1\n"
      "stored end-marker\n");
  const ScriptFile clears(
      "stored cleared-away medium=disk\n"
      "cleared tenant=t1\n"
      "stored survivor-of-t1-clear\n"
      "cleared\n"
      "stored end-marker\n");
  struct Case {
    const ScriptFile* script;
    std::string generation;
    std::set<std::string> expected;
  };
  const Case cases[] = {{&media, "1", {"end-marker"}},
                        {&media, "2", {"evicted", "known-later", "end-marker"}},
                        {&clears, "1", {"end-marker"}},
                        {&clears, "2", {"end-marker"}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.script->path() + " generation " + c.generation);
    auto publish = Child::Spawn({kPublish, "--endpoint", "tcp://127.0.0.1:*", "--script", c.script->path(),
                                 "--generation", c.generation, "--keep-running", "--admin-port", "0"});
    ASSERT_NE(publish, nullptr);
    const nlohmann::json ready = AwaitLine(*publish, "listening");
    ASSERT_TRUE(ready.contains("admin")) << publish->err();
    std::set<std::string> lines;
    ASSERT_TRUE(WaitFor(
        [&] {
          return Lines(GetAllKeys("127.0.0.1", PortOf(ready["admin"])).body, &lines) && lines.count("end-marker");
        },
        10s, 20ms));
    EXPECT_EQ(lines, c.expected);
    EXPECT_EQ(StopAndSummarise(*publish)["held_keys"], c.expected.size());
  }
}

// cpp-httplib ignores a stop that comes before its thread listens; the
// admin server therefore returns from Start only once it listens. A
// SIGTERM as soon as the tool says it is ready then ends it at once (it
// hung in about one run of 10 to 40 before).
TEST(MasterStandIn, AMasterStoppedAsSoonAsItIsReadyExits) {
  const ScriptFile script("stored a\nstored b\n");
  for (int run = 0; run < 60; ++run) {
    auto publish = Child::Spawn({kPublish, "--endpoint", "tcp://127.0.0.1:*", "--script", script.path(),
                                 "--keep-running", "--admin-port", "0"});
    ASSERT_NE(publish, nullptr);
    AwaitLine(*publish, "listening");
    ASSERT_EQ(::kill(publish->pid(), SIGTERM), 0);
    ASSERT_TRUE(publish->Finish(5s)) << "run " << run << ": still running 5 s after SIGTERM";
    EXPECT_EQ(publish->exit_code(), 0) << publish->err();
  }
}

TEST(MasterStandIn, NothingHeldIsAnEmptyListing) {
  auto publish = Child::Spawn({kPublish, "--endpoint", "tcp://127.0.0.1:*", "--keep-running", "--admin-port", "0"});
  ASSERT_NE(publish, nullptr);
  const nlohmann::json ready = AwaitLine(*publish, "listening");
  ASSERT_TRUE(ready.contains("admin")) << publish->err();
  const Listing listing = GetAllKeys("127.0.0.1", PortOf(ready["admin"]));
  EXPECT_EQ(listing.status, 200);
  EXPECT_EQ(listing.body, "");
  EXPECT_EQ(listing.content_length, "0");
  EXPECT_EQ(StopAndSummarise(*publish)["events"], 0);
}

TEST(MasterStandIn, RestoredObjectsAreListedButNeverPublished) {
  const ScriptFile restored("stored r1\nstored r2\nstored r3\nremoved r3\nstored elsewhere tenant=t1\n");
  const ScriptFile live("stored live-1\n");
  auto publish = Child::Spawn({kPublish, "--endpoint", "tcp://127.0.0.1:*", "--restore", restored.path(), "--script",
                               live.path(), "--keep-running", "--admin-port", "0"});
  ASSERT_NE(publish, nullptr);
  const nlohmann::json ready = AwaitLine(*publish, "listening");
  ASSERT_TRUE(ready.contains("admin")) << publish->err();
  const std::set<std::string> expected = {"r1", "r2", "live-1"};
  std::set<std::string> lines;
  ASSERT_TRUE(
      WaitFor([&] { return Lines(GetAllKeys("127.0.0.1", PortOf(ready["admin"])).body, &lines) && lines == expected; },
              10s, 20ms));
  const nlohmann::json summary = StopAndSummarise(*publish);
  EXPECT_EQ(summary["events"], 1);  // live-1 only
  EXPECT_EQ(summary["held_keys"], 3);
}

TEST(MasterStandIn, BadMasterFlagsExitWithTwoAndSayWhy) {
  const ScriptFile script("stored a\n");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--etcd", "127.0.0.1:2379"}, "--advertise"},
      {{"--etcd", "127.0.0.1:2379", "--advertise", "no-port"}, "--advertise"},
      {{"--etcd", "https://127.0.0.1:2379", "--advertise", "127.0.0.2:50051"}, "https"},
      {{"--etcd", "127.0.0.1:notaport", "--advertise", "127.0.0.2:50051"}, "127.0.0.1:notaport"},
      {{"--etcd", "127.0.0.1:2379", "--advertise", "127.0.0.2:1", "--cluster-id", "a/b"}, "--cluster-id"},
      {{"--cluster-id", "c"}, "--etcd"},
      {{"--advertise", "127.0.0.2:50051"}, "--etcd"},
      {{"--admin-port", "70000"}, "--admin-port"},
      {{"--restore", script.path()}, "--admin-port"},
      {{"--admin-port", "0", "--restore", script.path(), "--restore-workload"}, "--restore"},
      {{"--live-every-ms", "10"}, "--keep-running"},
  };
  for (const auto& [extra, mention] : cases) {
    std::vector<std::string> args = {kPublish, "--endpoint", "tcp://127.0.0.1:*", "--script", script.path()};
    args.insert(args.end(), extra.begin(), extra.end());
    auto publish = Child::Spawn(args);
    ASSERT_NE(publish, nullptr);
    ASSERT_TRUE(publish->Finish());
    EXPECT_EQ(publish->exit_code(), 2) << extra.front() << ": " << publish->err();
    EXPECT_NE(publish->err().find(mention), std::string::npos) << publish->err();
  }
  auto nothing = Child::Spawn({kPublish, "--endpoint", "tcp://127.0.0.1:*"});
  ASSERT_NE(nothing, nullptr);
  ASSERT_TRUE(nothing->Finish());
  EXPECT_EQ(nothing->exit_code(), 2);
  EXPECT_NE(nothing->err().find("--keep-running"), std::string::npos) << nothing->err();
}

// Receives one message on `subscriber` and decodes it; false if none in time.
bool ReceiveMessage(zmq::socket_t& subscriber, std::vector<zmq::message_t>* frames, DecodedMessage* message) {
  frames->clear();
  if (!zmq::recv_multipart(subscriber, std::back_inserter(*frames)).has_value()) return false;
  std::vector<std::span<const uint8_t>> views;
  for (const zmq::message_t& frame : *frames) views.emplace_back(frame.data<uint8_t>(), frame.size());
  std::string why;
  return DecodeMessage(views, message, &why);
}

TEST(MasterStandIn, LiveTrafficWhileStayingUpIsPublishedAndHeld) {
  auto publish = Child::Spawn({kPublish, "--endpoint", "tcp://127.0.0.1:*", "--keep-running", "--live-every-ms", "20",
                               "--admin-port", "0", "--wait-subscribers-ms", "20000"});
  ASSERT_NE(publish, nullptr);
  const nlohmann::json ready = AwaitLine(*publish, "listening");
  ASSERT_TRUE(ready.contains("admin")) << publish->err();
  zmq::context_t context(1);
  zmq::socket_t subscriber(context, zmq::socket_type::sub);
  subscriber.set(zmq::sockopt::subscribe, "");
  subscriber.set(zmq::sockopt::rcvtimeo, 20000);
  subscriber.connect(ready["listening"].get<std::string>());

  const std::string prefix = "live-" + std::to_string(publish->pid()) + "-";
  std::vector<zmq::message_t> frames;
  DecodedMessage message;
  for (uint64_t n = 1; n <= 3; ++n) {
    ASSERT_TRUE(ReceiveMessage(subscriber, &frames, &message)) << publish->err();
    // Ticks begin once the subscription is in: from sequence 1, one new
    // object per message.
    EXPECT_EQ(message.sequence, n);
    ASSERT_EQ(message.events.size(), 1u);
    EXPECT_EQ(message.events[0].kind, EventKind::kStored);
    EXPECT_EQ(message.events[0].object_key, prefix + std::to_string(n));
  }
  std::set<std::string> lines;
  ASSERT_TRUE(Lines(GetAllKeys("127.0.0.1", PortOf(ready["admin"])).body, &lines));
  EXPECT_TRUE(lines.count(prefix + "1") && lines.count(prefix + "3")) << lines.size();
  StopAndSummarise(*publish);
}

// ---- leader election through a real etcd ----

// A candidate master on `host`, with the same ports as its peer (0: any).
std::unique_ptr<Child> Candidate(const EtcdProcess& etcd, const std::string& host, int event_port, int admin_port,
                                 const std::vector<std::string>& extra) {
  std::vector<std::string> args = {kPublish,
                                   "--endpoint",
                                   "tcp://" + host + ":" + (event_port ? std::to_string(event_port) : "*"),
                                   "--admin-port",
                                   std::to_string(admin_port),
                                   "--etcd",
                                   etcd.endpoint(),
                                   "--advertise",
                                   host + ":50051",
                                   "--keep-running"};
  args.insert(args.end(), extra.begin(), extra.end());
  return Child::Spawn(args);
}

TEST(MasterStandIn, TheStandbyTakesOverWhenTheLeaderIsKilled) {
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.ok()) << etcd.error();
  const ScriptFile objects("stored page-1\nstored page-2\n");
  const ScriptFile live("stored page-3\n");

  auto leader = Candidate(etcd, "127.0.0.2", 0, 0, {"--script", objects.path()});
  ASSERT_NE(leader, nullptr);
  const nlohmann::json won = AwaitLine(*leader, "leader");
  ASSERT_FALSE(won.is_discarded()) << leader->err();
  EXPECT_EQ(won["leader"], "127.0.0.2:50051");
  EXPECT_EQ(won["view_key"], kViewKey);
  const nlohmann::json ready = AwaitLine(*leader, "listening");
  ASSERT_TRUE(ready.contains("admin")) << leader->err();
  const int event_port = PortOf(ready["listening"]);
  const int admin_port = PortOf(ready["admin"]);
  EXPECT_EQ(etcd.Get(kViewKey), "127.0.0.2:50051");

  // The standby restored the same objects; it publishes page-3 once it
  // leads and a subscriber is there.
  auto standby = Candidate(etcd, "127.0.0.3", event_port, admin_port,
                           {"--restore", objects.path(), "--script", live.path(), "--wait-subscribers-ms", "20000"});
  ASSERT_NE(standby, nullptr);
  const nlohmann::json waiting = AwaitLine(*standby, "standby");
  ASSERT_FALSE(waiting.is_discarded()) << standby->err();
  EXPECT_EQ(waiting["standby"], "127.0.0.2:50051");
  // A standby binds nothing: its admin port is closed.
  EXPECT_EQ(GetAllKeys("127.0.0.3", admin_port).status, 0);

  zmq::context_t context(1);
  zmq::socket_t subscriber(context, zmq::socket_type::sub);
  subscriber.set(zmq::sockopt::subscribe, "");
  subscriber.set(zmq::sockopt::rcvtimeo, 20000);
  subscriber.connect("tcp://127.0.0.3:" + std::to_string(event_port));

  ASSERT_EQ(::kill(leader->pid(), SIGKILL), 0);
  const auto killed = Clock::now();
  const nlohmann::json took_over = AwaitLine(*standby, "leader", 20s);
  const auto takeover = Clock::now() - killed;
  ASSERT_FALSE(took_over.is_discarded()) << standby->err();
  EXPECT_EQ(took_over["leader"], "127.0.0.3:50051");
  // Within the lease (5 s) after the last keep-alive, plus one look (0.2 s);
  // generous for a loaded machine, yet it fails if the lease is not honoured
  // (a standby that never takes over) or if it is held forever.
  EXPECT_LT(takeover, 12s);
  EXPECT_EQ(etcd.Get(kViewKey), "127.0.0.3:50051");

  const nlohmann::json standby_ready = AwaitLine(*standby, "listening");
  ASSERT_TRUE(standby_ready.contains("admin")) << standby->err();
  EXPECT_EQ(PortOf(standby_ready["listening"]), event_port);
  EXPECT_EQ(PortOf(standby_ready["admin"]), admin_port);

  // The new leader's sequence starts at 1 and carries only the live event.
  std::vector<zmq::message_t> frames;
  DecodedMessage message;
  ASSERT_TRUE(ReceiveMessage(subscriber, &frames, &message));
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(message.sequence, 1u);
  ASSERT_EQ(message.events.size(), 1u);
  EXPECT_EQ(message.events[0].object_key, "page-3");

  std::set<std::string> lines;
  ASSERT_TRUE(WaitFor(
      [&] {
        return Lines(GetAllKeys("127.0.0.3", admin_port).body, &lines) &&
               lines == std::set<std::string>{"page-1", "page-2", "page-3"};
      },
      10s, 20ms));
  const nlohmann::json summary = StopAndSummarise(*standby);
  EXPECT_EQ(summary["first_sequence"], 1);
  // Stopping revoked the lease: the key is gone now, not 5 s later.
  EXPECT_EQ(etcd.Get(kViewKey), std::nullopt);
}

TEST(MasterStandIn, ALeaderThatLosesEtcdStepsDown) {
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.ok()) << etcd.error();
  auto leader = Candidate(etcd, "127.0.0.2", 0, 0, {});
  ASSERT_NE(leader, nullptr);
  ASSERT_FALSE(AwaitLine(*leader, "listening").is_discarded()) << leader->err();
  etcd.Kill();
  // It cannot keep its lease alive: after the lease's time it stops with 1.
  ASSERT_TRUE(leader->Finish(20s)) << leader->err();
  EXPECT_EQ(leader->exit_code(), 1);
  EXPECT_NE(leader->err().find("lost the leadership"), std::string::npos) << leader->err();
  const nlohmann::json summary = nlohmann::json::parse(leader->out(), nullptr, false);
  EXPECT_EQ(summary["lost_leadership"], true) << leader->out();
}

TEST(MasterStandIn, ACandidateWaitsOutAnUnreachableEtcdAndStopsOnSigterm) {
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.ok()) << etcd.error();
  etcd.Kill();
  auto candidate = Candidate(etcd, "127.0.0.2", 0, 0, {});
  ASSERT_NE(candidate, nullptr);
  const nlohmann::json failing = AwaitLine(*candidate, "etcd_error");
  ASSERT_FALSE(failing.is_discarded()) << candidate->err();
  EXPECT_NE(failing["etcd_error"].get<std::string>().find(etcd.endpoint()), std::string::npos) << failing;
  ASSERT_EQ(::kill(candidate->pid(), SIGTERM), 0);
  ASSERT_TRUE(candidate->Finish());
  EXPECT_EQ(candidate->exit_code(), 0) << candidate->err();
  EXPECT_EQ(candidate->err().find("listening"), std::string::npos) << "a candidate that never won bound nothing";
}

}  // namespace
}  // namespace sci
