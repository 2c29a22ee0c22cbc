#include "tail_follow.h"

#include <poll.h>

#include <chrono>
#include <cstdio>
#include <tuple>

#include "index/index.h"
#include "json_line.h"
#include "stats_json.h"
#include "stop_signal.h"

namespace sci::tools {
namespace {

using Clock = std::chrono::steady_clock;

// How often the counters are looked at: fine enough to catch a resync of a
// few milliseconds (the resyncing gauge), cheap enough to leave running.
constexpr int kPollMs = 5;

// The counters a progress line shows, compared as a whole.
auto Progress(const Stats& s) {
  return std::make_tuple(s.resyncing, s.resyncs, s.resync_failures, s.snapshot_keys, s.leader_changes,
                         s.subscriber_connected);
}

std::string ProgressLine(const Stats& s, int64_t elapsed_ms, int n_tiers) {
  Json keys_by_tier = Json::array();
  const uint64_t by_tier[] = {s.keys_tier0, s.keys_tier1, s.keys_tier2, s.keys_tier3};
  for (int t = 0; t < n_tiers; ++t) keys_by_tier.push_back(by_tier[t]);
  return JsonLine(Json{{"resync",
                        {{"elapsed_ms", elapsed_ms},
                         {"resyncing", s.resyncing},
                         {"resyncs", s.resyncs},
                         {"resync_failures", s.resync_failures},
                         {"snapshot_keys", s.snapshot_keys},
                         {"leader_changes", s.leader_changes},
                         {"keys", s.keys},
                         {"keys_by_tier", keys_by_tier},
                         {"subscriber_connected", s.subscriber_connected},
                         {"messages_received", s.messages_received}}}});
}

bool Print(const std::string& line) {
  return std::fprintf(stdout, "%s\n", line.c_str()) > 0 && std::fflush(stdout) == 0;
}

}  // namespace

int FollowWithResync(const SubscriberOptions& options, const IndexOptions& index_options, const FollowLimits& limits,
                     std::string* error) {
  Index index(index_options);
  SubscriberError code = SubscriberError::kNone;
  auto subscriber = Subscriber::Start(index, options, &code, error);
  if (subscriber == nullptr) return code == SubscriberError::kInvalidArgument ? 2 : 1;
  const Clock::time_point started = Clock::now();
  Clock::time_point last_change = started;
  bool first = true;
  Stats shown{};
  while (true) {
    const Stats now = index.GetStats();
    if (first || Progress(now) != Progress(shown)) {
      const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
      if (!Print(ProgressLine(now, elapsed, index.tiers().n_tiers()))) break;
      shown = now;
      first = false;
      last_change = Clock::now();
    }
    if (limits.max_messages > 0 && now.messages_received >= limits.max_messages) break;
    if (limits.timeout_ms > 0 && Clock::now() - last_change >= std::chrono::milliseconds(limits.timeout_ms)) break;
    pollfd fd{StopSignal::fd(), POLLIN, 0};
    if (::poll(&fd, 1, kPollMs) > 0) break;
  }
  subscriber->Stop();
  Print(JsonLine(Json{{"stats", StatsJson(index.GetStats())}}));
  return 0;
}

}  // namespace sci::tools
