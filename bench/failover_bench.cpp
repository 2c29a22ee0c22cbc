// A Mooncake HA failover at 1M keys, everything real (the target, in
// bench/README.md: hits restored within the lease, 5 s, plus 2 s after the
// old leader is killed):
//
//   failover/tp8/keys:<n>         through etcd
//   failover-redis/tp8/keys:<n>   through Redis (Mooncake's Redis backend: a 5 s TTL)
//
// An etcd or a Redis (tests/view_store.h); a leader sci-publish on 127.0.0.2 that
// publishes an SGLang tp8 workload of <n> objects, then stays up with live
// traffic (a new object every 10 ms); a standby on 127.0.0.3 with the same
// ports that restored the same objects (--restore-workload: listed by
// its admin server, never published, as a promoted Mooncake master). The
// subscriber follows the leader view in that store through the public C API. Once
// it holds every object the leader is SIGKILLed, and the time is taken from
// the kill to:
//   takeover_s  the standby printing that it won the election (lease expiry)
//   followed_s  the subscriber counting the leader change
//   restored_s  every object present again (the benchmark's time)
// plus snapshot_keys of the resync that restored them. The target is
// restored_s <= 7 (lease 5 s + 2 s); the lease is most of it by design.
//
//   failover-fleet/tp8/keys:<n>/routers:<r>   a fleet: r routers, each its own
//                                             process (bench/fleet_follower.cpp)
//                                             with its own index
//
// The fleet variant (issue 27, section 3): the same two masters, r follower
// processes instead of the in-process subscriber; once every one holds every
// object the leader is SIGKILLed and each reports (a pipe) when its hits were
// all back. Reported over the fleet: restored_max_s (the benchmark's time)
// and restored_median_s / restored_min_s; resync_*_s, each router's time from
// following the new leader to its hits back; and the new leader's cost
// (sampled from /proc every 5 ms, kill to the last router restored):
// master_cpu_s (user + system CPU of the promoted sci-publish, whose admin
// server serves the downloads), master_peak_rss_mb and master_rss_before_mb;
// snapshot_bytes (one GET /get_all_keys afterwards) and fleet_bytes
// (routers x snapshot bytes: what one failover sends).
#include <benchmark/benchmark.h>
#include <signal.h>

#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"  // tests/: the tools as child processes
#include "shared_cache_index.h"
#include "tool_json.h"
#include "view_store.h"  // tests/: a real etcd or Redis

namespace sci::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr uint64_t kPagesPerPrompt = 128;
constexpr uint64_t kKeysPerPage = 16;  // tp8

int PortOf(const std::string& url) { return std::atoi(url.substr(url.rfind(':') + 1).c_str()); }

// The next stderr line of `child` holding "<field>":; empty if none in time.
std::string AwaitLine(testing::ChildProcess& child, const std::string& field, std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::string line;
  while (Clock::now() < deadline &&
         child.ReadStderrLine(&line, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()))) {
    if (line.find("\"" + field + "\":") != std::string::npos) return line;
  }
  return {};
}

sci_stats Stats(const sci_index* index) {
  sci_stats stats{};
  stats.struct_size = sizeof stats;
  sci_index_stats(index, &stats);
  return stats;
}

// Polls until `done` or `timeout`; the time it held, or nothing.
template <typename Condition>
bool PollUntil(Condition done, std::chrono::seconds timeout, Clock::time_point* when) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (done()) {
      *when = Clock::now();
      return true;
    }
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

// The two `sci-publish` masters of a failover: the leader (127.0.0.2)
// serving `prompts` prompts of kPagesPerPrompt tp8 pages, and the standby
// (127.0.0.3) that restored the same workload and campaigns beside it.
struct Masters {
  std::unique_ptr<testing::ChildProcess> leader, standby;
  int event_port = 0;
  int admin_port = 0;
};

// Starts both masters through `store`; the leader waits for `subscribers`
// subscribers (0: sci-publish's default). Skips `state` with the reason,
// and answers nothing, if either does not start.
std::optional<Masters> StartMasters(benchmark::State& state, const testing::ViewStore& store, uint64_t prompts,
                                    int subscribers) {
  const std::vector<std::string> workload = {"--workload", "--page-size", "64", "--tp", "8", "--prompts",
                                             std::to_string(prompts), "--pages", std::to_string(kPagesPerPrompt),
                                             "--seed", "7"};
  const auto candidate = [&](const std::string& host, const std::string& event_port, const std::string& admin_port,
                             bool restored) {
    std::vector<std::string> args = {SCI_PUBLISH_PATH,
                                     "--endpoint",
                                     "tcp://" + host + ":" + event_port,
                                     "--admin-port",
                                     admin_port,
                                     store.candidate_flags()[0],
                                     store.candidate_flags()[1],
                                     "--advertise",
                                     host + ":50051",
                                     "--keep-running",
                                     "--live-every-ms",
                                     "10",
                                     "--wait-subscribers-ms",
                                     "60000"};
    if (subscribers > 0) args.insert(args.end(), {"--subscribers", std::to_string(subscribers)});
    args.insert(args.end(), workload.begin(), workload.end());
    if (restored) args[args.size() - workload.size()] = "--restore-workload";
    return testing::ChildProcess::Spawn(args);
  };
  Masters masters;
  masters.leader = candidate("127.0.0.2", "*", "0", false);
  const std::string ready = masters.leader ? AwaitLine(*masters.leader, "listening", 120s) : "";
  if (ready.empty()) {
    state.SkipWithError("the leader did not start listening");
    return std::nullopt;
  }
  masters.event_port = PortOf(JsonString(ready, "listening"));
  masters.admin_port = PortOf(JsonString(ready, "admin"));
  masters.standby =
      candidate("127.0.0.3", std::to_string(masters.event_port), std::to_string(masters.admin_port), true);
  if (masters.standby == nullptr || AwaitLine(*masters.standby, "standby", 120s).empty()) {
    state.SkipWithError("the standby did not start");
    return std::nullopt;
  }
  return masters;
}

void BM_Failover(benchmark::State& state, const char* store_kind, uint64_t prompts) {
  const uint64_t objects = prompts * kPagesPerPrompt * kKeysPerPage;
  for (auto _ : state) {
    const std::unique_ptr<testing::ViewStore> store =
        testing::ViewStore::Start(store_kind, "mooncake_cluster", "mooncake_cluster");
    if (!store->ok()) {
      state.SkipWithError((std::string(store_kind) + ": " + store->error()).c_str());
      return;
    }
    std::optional<Masters> masters = StartMasters(state, *store, prompts, 0);
    if (!masters) return;
    const int event_port = masters->event_port;
    const int admin_port = masters->admin_port;
    testing::ChildProcess& leader = *masters->leader;
    testing::ChildProcess& standby = *masters->standby;

    sci_index* index = nullptr;
    sci_index_new(nullptr, &index);
    const std::string view_endpoint = store->subscriber_endpoint();
    sci_subscriber_options options{};
    options.struct_size = sizeof options;
    (store->is_redis() ? options.redis_endpoint : options.etcd_endpoints) =
        sci_str{view_endpoint.data(), view_endpoint.size()};
    options.event_port = static_cast<uint32_t>(event_port);
    options.admin_port = static_cast<uint32_t>(admin_port);
    sci_subscriber* subscriber = nullptr;
    if (sci_subscriber_start(index, &options, &subscriber) != SCI_OK) {
      state.SkipWithError(sci_last_error());
      sci_index_free(index);
      return;
    }
    Clock::time_point when;
    // Every object of the first leader, then the kill.
    if (!PollUntil([&] { return Stats(index).keys >= objects; }, 300s, &when)) {
      state.SkipWithError("the subscriber never held every object of the first leader");
    } else {
      const sci_stats before = Stats(index);
      ::kill(leader.pid(), SIGKILL);
      const auto killed = Clock::now();
      const bool took_over = !AwaitLine(standby, "leader", 60s).empty();
      const auto takeover = Clock::now();
      Clock::time_point followed, restored;
      const bool ok = took_over &&
                      PollUntil([&] { return Stats(index).leader_changes > before.leader_changes; }, 60s, &followed) &&
                      PollUntil(
                          [&] {
                            const sci_stats now = Stats(index);
                            return now.resyncs > before.resyncs && !now.resyncing && now.keys >= objects;
                          },
                          60s, &restored);
      if (!ok) {
        state.SkipWithError("the hits were not restored within 60 s of the takeover");
      } else {
        const auto seconds = [&](Clock::time_point t) { return std::chrono::duration<double>(t - killed).count(); };
        const sci_stats after = Stats(index);
        state.SetIterationTime(seconds(restored));
        state.counters["takeover_s"] = seconds(takeover);
        state.counters["followed_s"] = seconds(followed);
        state.counters["restored_s"] = seconds(restored);
        state.counters["snapshot_keys"] = static_cast<double>(after.snapshot_keys);
        state.counters["keys"] = static_cast<double>(after.keys);
        state.counters["resync_failures"] = static_cast<double>(after.resync_failures - before.resync_failures);
      }
    }
    sci_subscriber_stop(subscriber);
    sci_index_free(index);
  }
}

// The CPU time (user + system, seconds) and resident set (bytes) of `pid`,
// from /proc; false once it is gone.
bool ProcessUsage(pid_t pid, double* cpu_s, uint64_t* rss_bytes) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return false;
  std::istringstream fields(text.substr(paren + 2));  // from field 3, the state
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::strtoull(field.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoull(field.c_str(), nullptr, 10);
  }
  *cpu_s = static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  *rss_bytes = 0;
  while (std::getline(status, text)) {
    if (text.rfind("VmRSS:", 0) == 0) *rss_bytes = std::strtoull(text.c_str() + 6, nullptr, 10) * 1024;
  }
  return true;
}

// Samples a process every 5 ms on its own thread: its peak resident set
// since Start (the first sample included). Joined by Stop or the destructor.
class UsageSampler {
 public:
  explicit UsageSampler(pid_t pid) : pid_(pid) {
    double cpu = 0;
    uint64_t rss = 0;
    if (ProcessUsage(pid_, &cpu, &rss)) peak_rss_ = rss;
    thread_ = std::thread([this] {
      while (!stop_.load(std::memory_order_acquire)) {
        double cpu_now = 0;
        uint64_t rss_now = 0;
        if (!ProcessUsage(pid_, &cpu_now, &rss_now)) break;
        uint64_t peak = peak_rss_.load(std::memory_order_relaxed);
        if (rss_now > peak) peak_rss_.store(rss_now, std::memory_order_relaxed);
        std::this_thread::sleep_for(5ms);
      }
    });
  }
  ~UsageSampler() { Stop(); }
  UsageSampler(const UsageSampler&) = delete;
  UsageSampler& operator=(const UsageSampler&) = delete;
  void Stop() {
    stop_.store(true, std::memory_order_release);
    if (thread_.joinable()) thread_.join();
  }
  uint64_t peak_rss() const { return peak_rss_.load(std::memory_order_relaxed); }

 private:
  const pid_t pid_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> peak_rss_{0};
  std::thread thread_;
};

// The next stderr line of `child` holding "<a>": or "<b>":; empty if none in time.
std::string AwaitEither(testing::ChildProcess& child, const std::string& a, const std::string& b,
                        Clock::time_point deadline) {
  std::string line;
  while (Clock::now() < deadline &&
         child.ReadStderrLine(&line, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()))) {
    if (line.find("\"" + a + "\":") != std::string::npos || line.find("\"" + b + "\":") != std::string::npos) {
      return line;
    }
  }
  return {};
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n == 0 ? 0 : (n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2);
}

void BM_FailoverFleet(benchmark::State& state, const char* store_kind, uint64_t prompts, int routers) {
  const uint64_t objects = prompts * kPagesPerPrompt * kKeysPerPage;
  constexpr int kFollowerTimeoutS = 300;
  for (auto _ : state) {
    const std::unique_ptr<testing::ViewStore> store =
        testing::ViewStore::Start(store_kind, "mooncake_cluster", "mooncake_cluster");
    if (!store->ok()) {
      state.SkipWithError((std::string(store_kind) + ": " + store->error()).c_str());
      return;
    }
    std::optional<Masters> masters = StartMasters(state, *store, prompts, routers);
    if (!masters) return;
    const int event_port = masters->event_port;
    const int admin_port = masters->admin_port;
    testing::ChildProcess& leader = *masters->leader;
    testing::ChildProcess& standby = *masters->standby;
    // The fleet: every router its own process (killed and reaped by its
    // ChildProcess on every path; each also dies with this process).
    std::vector<std::unique_ptr<testing::ChildProcess>> fleet;
    for (int i = 0; i < routers; ++i) {
      fleet.push_back(testing::ChildProcess::Spawn({SCI_FLEET_FOLLOWER_PATH,
                                                    store->is_redis() ? "--redis" : "--etcd",
                                                    store->subscriber_endpoint(), std::to_string(event_port),
                                                    std::to_string(admin_port), std::to_string(objects),
                                                    std::to_string(kFollowerTimeoutS)}));
      if (fleet.back() == nullptr) {
        state.SkipWithError("cannot spawn fleet_follower");
        return;
      }
    }
    const auto holding_deadline = Clock::now() + std::chrono::seconds(kFollowerTimeoutS);
    for (auto& router : fleet) {
      const std::string line = AwaitEither(*router, "holding", "error", holding_deadline);
      if (line.find("\"holding\":") == std::string::npos) {
        state.SkipWithError(("a router never held every object of the first leader: " + line).c_str());
        return;
      }
    }
    double cpu_before = 0;
    uint64_t rss_before = 0;
    if (!ProcessUsage(standby.pid(), &cpu_before, &rss_before)) {
      state.SkipWithError("cannot read the standby's /proc entry");
      return;
    }
    UsageSampler sampler(standby.pid());
    ::kill(leader.pid(), SIGKILL);
    const auto killed = Clock::now();
    const auto seconds = [&](Clock::time_point t) { return std::chrono::duration<double>(t - killed).count(); };
    const bool took_over = !AwaitLine(standby, "leader", 60s).empty();
    const auto takeover = Clock::now();
    if (!took_over) {
      state.SkipWithError("the standby did not take over");
      return;
    }
    std::vector<double> restored, resync, resync_cpu;
    uint64_t failures = 0, snapshot_keys = 0;
    const auto restored_deadline = Clock::now() + 90s;
    for (auto& router : fleet) {
      const std::string line = AwaitEither(*router, "restored_ns", "error", restored_deadline);
      if (line.find("\"restored_ns\":") == std::string::npos) {
        state.SkipWithError(("a router's hits were not restored within 90 s of the takeover: " + line).c_str());
        return;
      }
      const auto at = [&](const char* field) {
        return Clock::time_point(std::chrono::nanoseconds(JsonNumber(line, field)));
      };
      restored.push_back(seconds(at("restored_ns")));
      resync.push_back(std::chrono::duration<double>(at("restored_ns") - at("followed_ns")).count());
      resync_cpu.push_back(static_cast<double>(JsonNumber(line, "resync_cpu_us")) * 1e-6);
      failures += JsonNumber(line, "resync_failures");
      snapshot_keys = JsonNumber(line, "snapshot_keys");
    }
    sampler.Stop();
    double cpu_after = 0;
    uint64_t rss_after = 0;
    ProcessUsage(standby.pid(), &cpu_after, &rss_after);
    // The body one router downloaded (after the measurement: one more GET).
    httplib::Client admin("127.0.0.3", admin_port);
    admin.set_connection_timeout(5, 0);
    admin.set_read_timeout(60, 0);
    const auto body = admin.Get("/get_all_keys");
    const double snapshot_bytes = body && body->status == 200 ? static_cast<double>(body->body.size()) : 0;

    state.SetIterationTime(*std::max_element(restored.begin(), restored.end()));
    state.counters["routers"] = routers;
    state.counters["takeover_s"] = seconds(takeover);
    state.counters["restored_max_s"] = *std::max_element(restored.begin(), restored.end());
    state.counters["restored_median_s"] = Median(restored);
    state.counters["restored_min_s"] = *std::min_element(restored.begin(), restored.end());
    state.counters["resync_max_s"] = *std::max_element(resync.begin(), resync.end());
    state.counters["resync_median_s"] = Median(resync);
    state.counters["router_resync_cpu_median_s"] = Median(resync_cpu);
    state.counters["master_cpu_s"] = cpu_after - cpu_before;
    state.counters["master_rss_before_mb"] = static_cast<double>(rss_before) / 1e6;
    state.counters["master_peak_rss_mb"] = static_cast<double>(sampler.peak_rss()) / 1e6;
    state.counters["snapshot_keys"] = static_cast<double>(snapshot_keys);
    state.counters["snapshot_bytes"] = snapshot_bytes;
    state.counters["fleet_bytes"] = snapshot_bytes * routers;
    state.counters["resync_failures"] = static_cast<double>(failures);
  }
}

// 489 prompts of 128 tp8 pages: 1,001,472 objects.
BENCHMARK_CAPTURE(BM_Failover, 1m, "etcd", 489)
    ->Name("failover/tp8/keys:1m")
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
// 5 prompts: 10,240 objects (the smoke run's).
BENCHMARK_CAPTURE(BM_Failover, 10k, "etcd", 5)
    ->Name("failover/tp8/keys:10k")
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
// The same through Redis (issue 27: recovery <= 5 s TTL + 2 s at 1M keys).
BENCHMARK_CAPTURE(BM_Failover, redis_1m, "redis", 489)
    ->Name("failover-redis/tp8/keys:1m")
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Failover, redis_10k, "redis", 5)
    ->Name("failover-redis/tp8/keys:10k")
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// The fleet (issue 27, section 3): 8 routers, each its own process and
// index, against one alone, through one failover.
BENCHMARK_CAPTURE(BM_FailoverFleet, 1m_1, "etcd", 489, 1)
    ->Name("failover-fleet/tp8/keys:1m/routers:1")
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_FailoverFleet, 1m_8, "etcd", 489, 8)
    ->Name("failover-fleet/tp8/keys:1m/routers:8")
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_FailoverFleet, 10k_1, "etcd", 5, 1)
    ->Name("failover-fleet/tp8/keys:10k/routers:1")
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_FailoverFleet, 10k_8, "etcd", 5, 8)
    ->Name("failover-fleet/tp8/keys:10k/routers:8")
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sci::bench
