// One router of failover_bench's fleet (failover-fleet/...): its own index
// and subscriber, following the Mooncake leader view through the public C
// API, in its own process, as every router of a fleet does.
//
//   fleet_follower (--etcd ENDPOINTS | --redis URL) EVENT_PORT ADMIN_PORT OBJECTS TIMEOUT_S
//
// Reports on stderr, one JSON line each (steady_clock = CLOCK_MONOTONIC,
// the same clock in every process of the machine):
//   {"holding":K}                  once it holds OBJECTS keys of the first leader
//   {"followed_ns":T,"restored_ns":T,"snapshot_keys":S,"keys":K,
//    "resync_failures":F,"resync_cpu_us":C}
//                                  once it followed a new leader and its
//                                  resync from it is done with every object
//                                  back (the benchmark's time); resync_cpu_us
//                                  is this process's CPU time between the two
//   {"error":"..."}                and exit 1, if a step does not happen within TIMEOUT_S
// It dies with its parent (PR_SET_PDEATHSIG) and every wait is bounded.
#include <sys/prctl.h>
#include <signal.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "shared_cache_index.h"

namespace {

using Clock = std::chrono::steady_clock;

sci_stats Stats(const sci_index* index) {
  sci_stats stats{};
  stats.struct_size = sizeof stats;
  sci_index_stats(index, &stats);
  return stats;
}

template <typename Condition>
bool PollUntil(Condition done, Clock::time_point deadline, Clock::time_point* when) {
  while (Clock::now() < deadline) {
    if (done()) {
      *when = Clock::now();
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

long long Ns(Clock::time_point t) {
  return static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

int Fail(const char* what) {
  std::fprintf(stderr, "{\"error\":\"%s\"}\n", what);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() == 1) return 1;  // the parent is already gone
  if (argc != 7 || (std::strcmp(argv[1], "--etcd") != 0 && std::strcmp(argv[1], "--redis") != 0)) {
    std::fprintf(stderr,
                 "usage: fleet_follower (--etcd ENDPOINTS | --redis URL) EVENT_PORT ADMIN_PORT OBJECTS TIMEOUT_S\n");
    return 2;
  }
  const bool redis = std::strcmp(argv[1], "--redis") == 0;
  const std::string view_endpoint = argv[2];
  const auto event_port = static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10));
  const auto admin_port = static_cast<uint32_t>(std::strtoul(argv[4], nullptr, 10));
  const uint64_t objects = std::strtoull(argv[5], nullptr, 10);
  const auto timeout = std::chrono::seconds(std::strtol(argv[6], nullptr, 10));

  sci_index* index = nullptr;
  if (sci_index_new(nullptr, &index) != SCI_OK) return Fail("sci_index_new failed");
  sci_subscriber_options options{};
  options.struct_size = sizeof options;
  (redis ? options.redis_endpoint : options.etcd_endpoints) = sci_str{view_endpoint.data(), view_endpoint.size()};
  options.event_port = event_port;
  options.admin_port = admin_port;
  sci_subscriber* subscriber = nullptr;
  if (sci_subscriber_start(index, &options, &subscriber) != SCI_OK) {
    sci_index_free(index);
    return Fail("sci_subscriber_start failed");
  }
  int rc = 0;
  Clock::time_point when;
  if (!PollUntil([&] { return Stats(index).keys >= objects; }, Clock::now() + timeout, &when)) {
    rc = Fail("never held every object of the first leader");
  } else {
    const sci_stats before = Stats(index);
    std::fprintf(stderr, "{\"holding\":%llu}\n", static_cast<unsigned long long>(before.keys));
    std::fflush(stderr);
    Clock::time_point followed, restored;
    // The parent kills the leader once every router holds everything; the
    // lease takes seconds, so the budget runs from here.
    const auto deadline = Clock::now() + timeout;
    if (!PollUntil([&] { return Stats(index).leader_changes > before.leader_changes; }, deadline, &followed)) {
      rc = Fail("never followed a new leader");
    } else {
      const double cpu_followed = CpuSeconds();
      if (!PollUntil(
              [&] {
                const sci_stats now = Stats(index);
                return now.resyncs > before.resyncs && !now.resyncing && now.snapshot_keys >= objects &&
                       now.keys >= objects;
              },
              deadline, &restored)) {
        rc = Fail("the hits were not restored");
      } else {
        const double cpu = CpuSeconds() - cpu_followed;
        const sci_stats after = Stats(index);
        std::fprintf(stderr,
                     "{\"followed_ns\":%lld,\"restored_ns\":%lld,\"snapshot_keys\":%llu,\"keys\":%llu,"
                     "\"resync_failures\":%llu,\"resync_cpu_us\":%llu}\n",
                     Ns(followed), Ns(restored), static_cast<unsigned long long>(after.snapshot_keys),
                     static_cast<unsigned long long>(after.keys),
                     static_cast<unsigned long long>(after.resync_failures - before.resync_failures),
                     static_cast<unsigned long long>(cpu * 1e6));
      }
    }
  }
  std::fflush(stderr);
  sci_subscriber_stop(subscriber);
  sci_index_free(index);
  return rc;
}
