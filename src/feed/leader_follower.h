// Follows the Mooncake HA leader: polls its view in etcd (etcd_view.h) on a
// thread of its own and reports every new view -- a new address, or the same
// address under a new election (a new key revision) -- since a new leader
// is a new sequence space that the subscriber must clear and resync from.
//
// etcd unreachable (every endpoint fails): the current leader is kept; the
// failure is counted (etcd_failures) and logged once per outage. A view
// that is absent (between a leader's death and the next election) keeps the
// current leader too: the subscriber's staleness rule clears a dead one.
// A malformed view is ignored and logged once per distinct answer.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "feed/etcd_view.h"
#include "feed/http_download.h"
#include "index/index.h"

namespace sci {

struct LeaderFollowerOptions {
  std::vector<std::string> etcd_endpoints;  // tried in order until one answers
  std::string cluster_id;
  uint32_t poll_ms = 500;
  uint32_t request_timeout_ms = 2000;
  bool proxy_from_env = false;
};

class LeaderFollower {
 public:
  // Called on the follower's thread for every new view (the first included).
  using OnLeader = std::function<void(const LeaderView& view)>;

  // `index_share` keeps `index` alive for the thread (may own nothing when
  // the caller guarantees it; see Subscriber::Start).
  LeaderFollower(std::shared_ptr<Index> index_share, Index& index, LeaderFollowerOptions options,
                 OnLeader on_leader);
  ~LeaderFollower();  // RequestStop(), then joins
  LeaderFollower(const LeaderFollower&) = delete;
  LeaderFollower& operator=(const LeaderFollower&) = delete;

  // Stops polling and cancels a request in flight, without waiting. Any
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
  const LeaderFollowerOptions options_;
  const OnLeader on_leader_;

  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool owned_by_thread_ = false;  // set by Dispose() on the follower's own thread
  HttpDownload* in_flight_ = nullptr;  // guarded by mu_

  // ---- the follower thread's own ----
  bool have_view_ = false;
  LeaderView current_;
  bool etcd_down_ = false;
  std::string last_malformed_;

  std::thread thread_;  // last: started once everything above exists
};

}  // namespace sci
