#include "leader_election.h"

#include <poll.h>

#include <utility>

namespace sci::tools {
namespace {

using Clock = std::chrono::steady_clock;

// How often a standby looks at the view: a small fraction of the term, so
// a takeover follows the old term's expiry closely.
constexpr std::chrono::milliseconds kPollInterval(200);
// How often the leader renews: five times per term.
constexpr std::chrono::milliseconds kRenewInterval(LeaderElection::kTermSeconds * 1000 / 5);

// Sleeps `interval` unless `stop_fd` becomes readable first (false then).
bool WaitUnlessStopped(int stop_fd, std::chrono::milliseconds interval) {
  pollfd fd{stop_fd, POLLIN, 0};
  return ::poll(&fd, stop_fd >= 0 ? 1 : 0, static_cast<int>(interval.count())) <= 0;
}

}  // namespace

LeaderElection::LeaderElection(std::unique_ptr<ElectionBackend> backend, std::string address, Report report)
    : backend_(std::move(backend)), address_(std::move(address)), report_(std::move(report)) {}

LeaderElection::~LeaderElection() { StopRenewing(); }

void LeaderElection::ReportFailure(const std::string& error) {
  if (!failing_) report_(backend_->error_field(), error);
  failing_ = true;
}

bool LeaderElection::Campaign(int stop_fd) {
  std::string seen_leader, error;
  while (true) {
    std::optional<std::string> leader;
    bool won = false;
    if (!backend_->Peek(&leader, &error)) {
      ReportFailure(error);
    } else if (leader.has_value()) {
      failing_ = false;
      if (*leader != seen_leader) report_("standby", *leader);
      seen_leader = *leader;
    } else if (!backend_->TryAcquire(address_, &won, &error)) {
      ReportFailure(error);
    } else if (won) {
      failing_ = false;
      leading_ = true;
      report_("leader", address_);
      renewer_ = std::thread([this] { RenewLoop(); });
      return true;
    } else {
      // Another candidate won the race: the normal outcome of a contest.
      failing_ = false;
    }
    if (!WaitUnlessStopped(stop_fd, kPollInterval)) return false;
  }
}

void LeaderElection::RenewLoop() {
  auto last_renewal = Clock::now();
  std::string reason;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (wake_.wait_for(lock, kRenewInterval, [this] { return stopping_; })) return;
    }
    bool held = false;
    std::string error;
    if (backend_->Renew(&held, &error)) {
      if (held) {
        last_renewal = Clock::now();
        continue;
      }
      reason = "the view expired or was taken";
      break;
    }
    if (Clock::now() - last_renewal >= std::chrono::seconds(kTermSeconds)) {
      reason = "the store was unreachable for the term's time: " + error;
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

void LeaderElection::StopRenewing() {
  if (!renewer_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  renewer_.join();
}

void LeaderElection::Resign() {
  StopRenewing();
  if (!leading_ || lost()) return;
  leading_ = false;
  std::string error;
  if (!backend_->Release(&error)) report_(backend_->error_field(), error);
}

}  // namespace sci::tools
