#include "leader_election.h"

#include <poll.h>

#include <utility>

namespace sci::tools {
namespace {

using Clock = std::chrono::steady_clock;

// How often a standby looks at the view key: a small fraction of the lease,
// so a takeover follows the old lease's expiry closely.
constexpr std::chrono::milliseconds kPollInterval(200);
// How often the leader refreshes its lease: five times per lease.
constexpr std::chrono::milliseconds kKeepAliveInterval(LeaderElection::kLeaseSeconds * 1000 / 5);

// Sleeps `interval` unless `stop_fd` becomes readable first (false then).
bool WaitUnlessStopped(int stop_fd, std::chrono::milliseconds interval) {
  pollfd fd{stop_fd, POLLIN, 0};
  return ::poll(&fd, stop_fd >= 0 ? 1 : 0, static_cast<int>(interval.count())) <= 0;
}

}  // namespace

LeaderElection::LeaderElection(EtcdGateway gateway, std::string key, std::string value, Report report)
    : gateway_(std::move(gateway)), key_(std::move(key)), value_(std::move(value)), report_(std::move(report)) {}

LeaderElection::~LeaderElection() { StopKeepAlive(); }

void LeaderElection::ReportFailure(const std::string& error) {
  if (!failing_) report_("etcd_error", error);
  failing_ = true;
}

bool LeaderElection::Campaign(int stop_fd) {
  std::string seen_leader, error;
  while (true) {
    std::optional<std::string> leader;
    if (!gateway_.Get(key_, &leader, &error)) {
      ReportFailure(error);
    } else if (leader.has_value()) {
      failing_ = false;
      if (*leader != seen_leader) report_("standby", *leader);
      seen_leader = *leader;
    } else {
      // Absent: try to create it. Losing the race to another candidate is
      // the normal outcome of a contested election.
      int64_t lease = 0;
      bool created = false;
      if (!gateway_.GrantLease(kLeaseSeconds, &lease, &error) ||
          !gateway_.CreateWithLease(key_, value_, lease, &created, &error)) {
        ReportFailure(error);
      } else if (created) {
        failing_ = false;
        lease_ = lease;
        report_("leader", value_);
        keepalive_ = std::thread([this] { KeepAliveLoop(); });
        return true;
      } else {
        failing_ = false;
        gateway_.Revoke(lease, &error);  // unused; it would expire anyway
      }
    }
    if (!WaitUnlessStopped(stop_fd, kPollInterval)) return false;
  }
}

void LeaderElection::KeepAliveLoop() {
  auto last_refresh = Clock::now();
  std::string reason;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (wake_.wait_for(lock, kKeepAliveInterval, [this] { return stopping_; })) return;
    }
    int64_t ttl = 0;
    std::string error;
    if (gateway_.KeepAlive(lease_, &ttl, &error)) {
      if (ttl > 0) {
        last_refresh = Clock::now();
        continue;
      }
      reason = "the lease expired";
      break;
    }
    if (Clock::now() - last_refresh >= std::chrono::seconds(kLeaseSeconds)) {
      reason = "etcd unreachable for the lease's time: " + error;
      break;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    lost_reason_ = reason;
  }
  lost_.store(true, std::memory_order_release);
}

std::string LeaderElection::lost_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lost_reason_;
}

void LeaderElection::StopKeepAlive() {
  if (!keepalive_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  keepalive_.join();
}

void LeaderElection::Resign() {
  StopKeepAlive();
  if (lease_ == 0 || lost()) return;
  std::string error;
  if (!gateway_.Revoke(lease_, &error)) report_("etcd_error", error);
  lease_ = 0;
}

}  // namespace sci::tools
