// Leader election as the Mooncake master does it, over a store
// (election_backend.h: etcd or Redis): a candidate waits until there is no
// view, then creates it with its own address in one atomic step, so of
// several candidates exactly one wins; the others keep waiting. The leader
// renews its term (5 s) five times per term; when it dies the view expires
// and a standby wins.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "election_backend.h"

namespace sci::tools {

class LeaderElection {
 public:
  static constexpr int64_t kTermSeconds = 5;  // the Mooncake master's lease / TTL
  static constexpr char kDefaultClusterId[] = "mooncake_cluster";

  // Progress for the tool's log: ("standby", current leader) each time a
  // new leader is seen while waiting; (backend's error_field(), why) on the
  // first of a run of failed calls; ("leader", our address) once won.
  using Report = std::function<void(const std::string& what, const std::string& detail)>;

  LeaderElection(std::unique_ptr<ElectionBackend> backend, std::string address, Report report);
  ~LeaderElection();  // stops renewing; does not release

  // Blocks until this process leads (true), or `stop_fd` becomes readable
  // (false). The store unreachable meanwhile: retried, reported once.
  bool Campaign(int stop_fd);

  // Once leader: whether leadership was lost (the view expired or was
  // taken, or the store could not be reached for a term), and why.
  bool lost() const { return lost_.load(std::memory_order_acquire); }
  std::string lost_reason() const;
  const ElectionBackend& backend() const { return *backend_; }

  // Gives leadership up: stops renewing and releases the view, so a
  // standby takes over at once rather than after the term.
  void Resign();

 private:
  void RenewLoop();
  void StopRenewing();
  void ReportFailure(const std::string& error);

  const std::unique_ptr<ElectionBackend> backend_;
  const std::string address_;
  const Report report_;
  bool failing_ = false;  // a run of failed calls was reported
  bool leading_ = false;

  std::thread renewer_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;    // guarded by mu_
  std::string lost_reason_;  // guarded by mu_
  std::atomic<bool> lost_{false};
};

}  // namespace sci::tools
