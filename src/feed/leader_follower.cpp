#include "feed/leader_follower.h"

#include <chrono>
#include <exception>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include "common/log.h"

namespace sci {

LeaderFollower::LeaderFollower(std::shared_ptr<Index> index_share, Index& index,
                               std::unique_ptr<LeaderViewSource> source, uint32_t poll_ms, OnLeader on_leader)
    : index_share_(std::move(index_share)),
      index_(index),
      source_(std::move(source)),
      poll_ms_(poll_ms),
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
  }
  source_->Cancel();
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
    wake_.wait_for(lock, std::chrono::milliseconds(poll_ms_), [this] { return stopping_; });
  }
  lock.unlock();
  // Only this thread sets it (through Dispose() from a callback it ran).
  if (owned_by_thread_) delete this;
}

void LeaderFollower::PollOnce() {
  LeaderView view;
  std::string error;
  const LeaderViewStatus status = source_->Read(&view, &error);
  if (stopping()) return;
  switch (status) {
    case LeaderViewStatus::kUnreachable:
      index_.feed_counters().etcd_failures.Add();
      if (!store_down_) {
        Logf(LogLevel::kWarn, "leader view: %s unreachable (%s); keeping the current leader", source_->store_name(),
             error);
      }
      store_down_ = true;
      return;
    case LeaderViewStatus::kMalformed:
      if (error != last_malformed_) {
        Logf(LogLevel::kWarn, "leader view: ignored, %s; keeping the current leader", error);
        last_malformed_ = error;
      }
      break;
    case LeaderViewStatus::kAbsent:
      break;
    case LeaderViewStatus::kFound:
      if (!have_view_ || view.address != current_.address || view.version != current_.version) {
        have_view_ = true;
        current_ = view;
        Logf(LogLevel::kInfo, "leader view: leader is %s (%s version %d)", absl::CHexEscape(view.address),
             source_->store_name(), view.version);
        // The log line may have stopped the subscriber (a callback): then
        // the loop behind on_leader_ may be gone.
        if (stopping()) return;
        if (!on_leader_(view)) {
          have_view_ = false;  // not followed: the next poll offers it again
          return;
        }
        // Counted once followed: when the count moves, the old leader's
        // state is already gone from the index.
        index_.feed_counters().leader_changes.Add();
      }
      break;
  }
  if (store_down_) Logf(LogLevel::kInfo, "leader view: %s reachable again", source_->store_name());
  store_down_ = false;
}

}  // namespace sci
