// Follows the Mooncake HA leader: polls its view (leader_view.h: in etcd or
// in Redis) on a thread of its own and reports every new view -- a new
// address, or the same address under a new election (a new version) --
// since a new leader is a new sequence space that the subscriber must
// clear and resync from.
//
// The store unreachable: the current leader is kept; the failure is counted
// (the internal counter etcd_failures, whichever the store) and logged once
// per outage. A view
// that is absent (between a leader's death and the next election, or a
// Redis hash only partly written) keeps the current leader too: the
// subscriber's staleness rule clears a dead one. A malformed view is
// ignored and logged once per distinct answer.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "feed/leader_view.h"
#include "index/index.h"

namespace sci {

class LeaderFollower {
 public:
  // Called on the follower's thread for every new view (the first included).
  // False: the view could not be followed for now (memory ran out part-way);
  // it is offered again at the next poll.
  using OnLeader = std::function<bool(const LeaderView& view)>;

  // `index_share` keeps `index` alive for the thread (may own nothing when
  // the caller guarantees it; see Subscriber::Start).
  LeaderFollower(std::shared_ptr<Index> index_share, Index& index, std::unique_ptr<LeaderViewSource> source,
                 uint32_t poll_ms, OnLeader on_leader);
  ~LeaderFollower();  // RequestStop(), then joins
  LeaderFollower(const LeaderFollower&) = delete;
  LeaderFollower& operator=(const LeaderFollower&) = delete;

  // Stops polling and cancels a read in flight, without waiting. Any
  // thread; idempotent. No new view is reported once it has returned.
  void RequestStop();

  // Stops and destroys `follower` (null: nothing). From the follower's own
  // thread (a log callback that stops the subscriber) it cannot be joined:
  // the thread is detached and deletes the follower once it has unwound.
  static void Dispose(std::unique_ptr<LeaderFollower> follower);

 private:
  void Run() noexcept;
  void PollOnce();
  bool stopping();

  const std::shared_ptr<Index> index_share_;
  Index& index_;
  const std::unique_ptr<LeaderViewSource> source_;
  const uint32_t poll_ms_;
  const OnLeader on_leader_;

  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool owned_by_thread_ = false;  // set by Dispose() on the follower's own thread

  // ---- the follower thread's own ----
  bool have_view_ = false;
  LeaderView current_;
  bool store_down_ = false;
  std::string last_malformed_;

  std::thread thread_;  // last: started once everything above exists
};

}  // namespace sci
