#include "feed/leader_follower.h"

#include <chrono>
#include <exception>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/log.h"

namespace sci {

LeaderFollower::LeaderFollower(std::shared_ptr<Index> index_share, Index& index, LeaderFollowerOptions options,
                               OnLeader on_leader)
    : index_share_(std::move(index_share)),
      index_(index),
      options_(std::move(options)),
      on_leader_(std::move(on_leader)),
      thread_([this] { Run(); }) {}

LeaderFollower::~LeaderFollower() {
  RequestStop();
  if (thread_.joinable()) thread_.join();
}

void LeaderFollower::RequestStop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (in_flight_ != nullptr) in_flight_->Cancel();
  }
  wake_.notify_all();
}

void LeaderFollower::Dispose(std::unique_ptr<LeaderFollower> follower) {
  if (follower == nullptr) return;
  follower->RequestStop();
  if (follower->thread_.get_id() == std::this_thread::get_id()) {
    follower->owned_by_thread_ = true;
    follower->thread_.detach();
    (void)follower.release();  // Run() deletes it on its way out
  }
  // Otherwise the destructor joins.
}

bool LeaderFollower::stopping() {
  std::lock_guard<std::mutex> lock(mu_);
  return stopping_;
}

void LeaderFollower::Run() noexcept {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    try {
      PollOnce();
    } catch (const std::exception& e) {
      Logf(LogLevel::kError, "leader view: %s", e.what());
    }
    lock.lock();
    wake_.wait_for(lock, std::chrono::milliseconds(options_.poll_ms), [this] { return stopping_; });
  }
  lock.unlock();
  // Only this thread sets it (through Dispose() from a callback it ran).
  if (owned_by_thread_) delete this;
}

void LeaderFollower::PollOnce() {
  LeaderView view;
  std::string error;
  EtcdViewStatus status = EtcdViewStatus::kUnreachable;
  std::vector<std::string> failures;
  for (const std::string& endpoint : options_.etcd_endpoints) {
    HttpDownload download;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      in_flight_ = &download;
    }
    status = ReadLeaderView(download, endpoint, options_.cluster_id, options_.request_timeout_ms,
                            options_.proxy_from_env, &view, &error);
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_ = nullptr;
    }
    if (status != EtcdViewStatus::kUnreachable) break;
    failures.push_back(absl::StrFormat("%s: %s", absl::CHexEscape(endpoint), error));
  }

  switch (status) {
    case EtcdViewStatus::kUnreachable:
      index_.counters().etcd_failures.Add();
      if (!etcd_down_) {
        Logf(LogLevel::kWarn, "leader view: etcd unreachable (%s); keeping the current leader",
             absl::StrJoin(failures, "; "));
      }
      etcd_down_ = true;
      return;
    case EtcdViewStatus::kMalformed:
      if (error != last_malformed_) {
        Logf(LogLevel::kWarn, "leader view: ignored, %s; keeping the current leader", error);
        last_malformed_ = error;
      }
      break;
    case EtcdViewStatus::kAbsent:
      break;
    case EtcdViewStatus::kFound:
      if (!have_view_ || view.address != current_.address ||
          view.create_revision != current_.create_revision) {
        have_view_ = true;
        current_ = view;
        Logf(LogLevel::kInfo, "leader view: leader is %s (revision %d)", absl::CHexEscape(view.address),
             view.create_revision);
        // The log line may have stopped the subscriber (a callback): then
        // the loop behind on_leader_ may be gone.
        if (stopping()) return;
        on_leader_(view);
        // Counted once followed: when the count moves, the old leader's
        // state is already gone from the index.
        index_.counters().leader_changes.Add();
      }
      break;
  }
  if (etcd_down_) Logf(LogLevel::kInfo, "leader view: etcd reachable again");
  etcd_down_ = false;
}

}  // namespace sci
