// A Mooncake HA failover on one machine, everything real: an etcd or a
// Redis (tests/view_store.h), two sci-publish masters with the same ports on
// 127.0.0.2 and 127.0.0.3 electing a leader through it, and the library's
// subscriber following the leader view there (seen only through the public
// header, as a router sees it). The leader is killed; the standby's
// takeover once the old term (5 s) lapses must be followed, its snapshot
// loaded, and the hits restored within the term + 2 s, while readers query
// throughout and never see a false hit.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "capi_test_support.h"
#include "child_process.h"
#include "shared_cache_index.h"
#include "view_store.h"
#include "wait_for.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using sci::testing::ChildProcess;
using sci::testing::ViewStore;
using sci::testing::WaitFor;

// Mooncake's term (lease / TTL) plus the 2 s the issue allows for following,
// connecting and loading the snapshot.
constexpr auto kRecoveryBound = 7s;

const std::string kPublish = std::string(SCI_BINARY_DIR) + "/src/tools/sci-publish";

sci_str Str(const std::string& s) { return sci_str{s.data(), s.size()}; }

// Keys named <prefix>-0 .. <prefix>-(n-1).
std::vector<std::string> Keys(const std::string& prefix, int n) {
  std::vector<std::string> keys;
  for (int i = 0; i < n; ++i) keys.push_back(prefix + "-" + std::to_string(i));
  return keys;
}

// A script file (sci-publish's language) under the temp directory.
class ScriptFile {
 public:
  explicit ScriptFile(const std::string& tag) {
    path_ =
        (std::filesystem::temp_directory_path() / ("sci-failover-" + tag + "-" + std::to_string(::getpid()))).string();
  }
  ~ScriptFile() { std::filesystem::remove(path_); }
  ScriptFile& Add(const std::string& verb, const std::vector<std::string>& keys) {
    for (const std::string& key : keys) text_ += verb + " " + key + "\n";
    return *this;
  }
  ScriptFile& Flush() {
    text_ += "flush\n";
    return *this;
  }
  const std::string& Write() {
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << text_;
    return path_;
  }

 private:
  std::string path_, text_;
};

// The next stderr JSON line of `child` holding `field`; discarded if none in time.
nlohmann::json AwaitLine(ChildProcess& child, const std::string& field, std::chrono::milliseconds timeout = 30s) {
  const auto deadline = Clock::now() + timeout;
  std::string line;
  while (Clock::now() < deadline &&
         child.ReadStderrLine(&line, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()))) {
    const nlohmann::json json = nlohmann::json::parse(line, nullptr, false);
    if (json.is_object() && json.contains(field)) return json;
  }
  return nlohmann::json(nlohmann::json::value_t::discarded);
}

int PortOf(const std::string& url) { return std::stoi(url.substr(url.rfind(':') + 1)); }

bool Present(sci_index* index, const std::string& key) {
  bool present = false;
  EXPECT_EQ(sci_index_contains(index, sci_str{nullptr, 0}, Str(key), &present), SCI_OK);
  return present;
}

bool AllPresent(sci_index* index, const std::vector<std::string>& keys, bool expected) {
  for (const std::string& key : keys) {
    if (Present(index, key) != expected) return false;
  }
  return true;
}

class Failover : public ::testing::TestWithParam<std::string> {};

TEST_P(Failover, TheSubscriberFollowsTheNewLeaderAndRestoresTheHitsWithoutAFalseHit) {
  const std::unique_ptr<ViewStore> store = ViewStore::Start(GetParam(), "mooncake_cluster", "mooncake_cluster");
  ASSERT_TRUE(store->ok()) << store->error();
  // sci-publish's flags of a candidate at `advertise`, with `rest` after them.
  const auto candidate = [&](std::vector<std::string> head, const std::string& advertise,
                             const std::vector<std::string>& rest) {
    for (const std::string& flag : store->candidate_flags()) head.push_back(flag);
    head.push_back("--advertise");
    head.push_back(advertise);
    head.insert(head.end(), rest.begin(), rest.end());
    return head;
  };

  // The pool: objects both masters know (the standby restored them), objects
  // only the old leader knew, objects it stored and removed, objects nobody
  // ever stored, and objects the new leader stores after the takeover.
  const std::vector<std::string> common = Keys("common", 2000);
  const std::vector<std::string> leader_only = Keys("leader-only", 100);
  const std::vector<std::string> removed = Keys("removed", 100);
  const std::vector<std::string> ghosts = Keys("ghost", 100);
  const std::vector<std::string> after = Keys("after", 50);

  ScriptFile leader_script("leader"), restored("restored"), standby_script("standby");
  // Stored last, after the removals: once it hits, the whole script was
  // applied (a batch at a time, in order), so the readers never start
  // between the stores of `removed` and their removals.
  const std::vector<std::string> script_done = {"leader-script-done"};
  leader_script.Add("stored", common).Add("stored", leader_only).Add("stored", removed).Flush().Add("removed", removed);
  leader_script.Flush().Add("stored", script_done);
  restored.Add("stored", common);
  standby_script.Add("stored", after);

  // The leader publishes once the subscriber is there (the subscriber's
  // resync starts on the first message of a connection).
  auto leader = ChildProcess::Spawn(candidate({kPublish, "--endpoint", "tcp://127.0.0.2:*", "--admin-port", "0"},
                                               "127.0.0.2:50051",
                                               {"--script", leader_script.Write(), "--wait-subscribers-ms", "30000",
                                                "--keep-running"}));
  ASSERT_NE(leader, nullptr);
  const nlohmann::json ready = AwaitLine(*leader, "listening");
  ASSERT_TRUE(ready.contains("admin")) << leader->err();
  const int event_port = PortOf(ready["listening"]);
  const int admin_port = PortOf(ready["admin"]);

  auto standby = ChildProcess::Spawn(
      candidate({kPublish, "--endpoint", "tcp://127.0.0.3:" + std::to_string(event_port), "--admin-port",
                 std::to_string(admin_port)},
                "127.0.0.3:50051",
                {"--restore", restored.Write(), "--script", standby_script.Write(), "--wait-subscribers-ms", "30000",
                 "--keep-running"}));
  ASSERT_NE(standby, nullptr);
  ASSERT_FALSE(AwaitLine(*standby, "standby").is_discarded()) << standby->err();

  sci_test::IndexHandle handle;
  sci_index* index = handle.index;
  const std::string view_endpoint = store->subscriber_endpoint();
  sci_subscriber_options options{};
  options.struct_size = sizeof options;
  (store->is_redis() ? options.redis_endpoint : options.etcd_endpoints) = Str(view_endpoint);
  options.event_port = static_cast<uint32_t>(event_port);
  options.admin_port = static_cast<uint32_t>(admin_port);
  options.resync_min_interval_ms = 200;
  sci_subscriber* subscriber = nullptr;
  ASSERT_EQ(sci_subscriber_start(index, &options, &subscriber), SCI_OK) << sci_last_error();

  // Following the first leader: its objects hit, its removals do not.
  ASSERT_TRUE(WaitFor(
      [&] {
        return AllPresent(index, script_done, true) && AllPresent(index, common, true) &&
               AllPresent(index, leader_only, true) && AllPresent(index, removed, false);
      },
      30s, 10ms))
      << "keys " << sci_test::Stats(index).keys;
  const sci_stats before = sci_test::Stats(index);
  EXPECT_GE(before.resyncs, 1u);
  EXPECT_GE(before.leader_changes, 1u);

  // Readers query throughout. A false hit: a key nobody stored, a key whose
  // removal was applied before the readers began, or an object only the old
  // leader knew once the new leader's snapshot has been loaded.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> queries{0}, false_hits{0};
  std::string first_false_hit;
  std::mutex first_mu;
  const auto reader = [&](int offset) {
    while (!stop.load()) {
      const sci_stats seen = sci_test::Stats(index);
      const bool following_new_leader =
          seen.leader_changes > before.leader_changes && seen.resyncs > before.resyncs && !seen.resyncing;
      const auto check = [&](const std::string& key, bool must_miss) {
        queries.fetch_add(1);
        if (must_miss && Present(index, key)) {
          if (false_hits.fetch_add(1) == 0) {
            std::lock_guard<std::mutex> lock(first_mu);
            first_false_hit = key;
          }
        }
      };
      for (size_t i = offset; i < ghosts.size(); i += 7) check(ghosts[i], true);
      for (size_t i = offset; i < removed.size(); i += 7) check(removed[i], true);
      for (size_t i = offset; i < leader_only.size(); i += 7) check(leader_only[i], following_new_leader);
      for (size_t i = offset; i < common.size(); i += 97) check(common[i], false);
    }
  };
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) readers.emplace_back(reader, r);

  ASSERT_EQ(::kill(leader->pid(), SIGKILL), 0);
  const auto killed = Clock::now();
  ASSERT_FALSE(AwaitLine(*standby, "leader").is_discarded()) << standby->err();

  // The new leader's objects, restored and new, hit; the old leader's own are gone.
  const bool restored_hits =
      WaitFor([&] { return AllPresent(index, common, true) && AllPresent(index, after, true); }, 30s, 10ms);
  const auto restored_after = Clock::now() - killed;
  stop.store(true);
  for (std::thread& t : readers) t.join();
  ASSERT_TRUE(restored_hits) << "keys " << sci_test::Stats(index).keys;
  std::printf("%s: hits restored %.2f s after the leader was killed\n", GetParam().c_str(),
              std::chrono::duration<double>(restored_after).count());
  EXPECT_LE(restored_after, kRecoveryBound);

  const sci_stats now = sci_test::Stats(index);
  EXPECT_GT(now.leader_changes, before.leader_changes);
  EXPECT_GT(now.resyncs, before.resyncs);
  EXPECT_FALSE(now.resyncing);
  EXPECT_GE(now.snapshot_keys, common.size());
  EXPECT_LE(now.snapshot_keys, common.size() + after.size());
  EXPECT_TRUE(AllPresent(index, leader_only, false));
  EXPECT_TRUE(AllPresent(index, removed, false));
  EXPECT_TRUE(AllPresent(index, ghosts, false));
  EXPECT_GT(queries.load(), 0u);
  EXPECT_EQ(false_hits.load(), 0u) << "first false hit: " << first_false_hit;

  sci_subscriber_stop(subscriber);
  ASSERT_EQ(::kill(standby->pid(), SIGTERM), 0);
  ASSERT_TRUE(standby->Finish());
  EXPECT_EQ(standby->exit_code(), 0) << standby->err();
}

INSTANTIATE_TEST_SUITE_P(Store, Failover, ::testing::Values("etcd", "redis"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
