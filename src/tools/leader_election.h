// Leader election as the Mooncake master does it (docs/wire-formats.md,
// section 4): the leader's RPC address "ip:port" is the value of the etcd
// key mooncake-store/<cluster_id>/master_view, attached to a 5 s lease the
// leader keeps alive. A candidate waits until the key is absent, then
// creates it with a fresh lease in one transaction (create_revision == 0),
// so of several candidates exactly one wins; the others keep waiting. When
// the leader dies its lease expires, the key vanishes and a standby wins.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "etcd_gateway.h"

namespace sci::tools {

class LeaderElection {
 public:
  static constexpr int64_t kLeaseSeconds = 5;  // the Mooncake master's
  static constexpr char kDefaultClusterId[] = "mooncake_cluster";
  static std::string ViewKey(const std::string& cluster_id) { return "mooncake-store/" + cluster_id + "/master_view"; }

  // Progress for the tool's log: ("standby", current leader) each time a
  // new leader is seen while waiting; ("etcd_error", why) on the first of a
  // run of failed etcd calls; ("leader", our value) once won.
  using Report = std::function<void(const std::string& what, const std::string& detail)>;

  LeaderElection(EtcdGateway gateway, std::string key, std::string value, Report report);
  ~LeaderElection();  // stops keeping the lease alive; does not revoke it

  // Blocks until this process holds the key (true), or `stop_fd` becomes
  // readable (false). etcd unreachable meanwhile: retried, reported once.
  bool Campaign(int stop_fd);

  // Once leader: whether leadership was lost (the lease expired, or etcd
  // could not be reached for the lease's time), and why.
  bool lost() const { return lost_.load(std::memory_order_acquire); }
  std::string lost_reason() const;
  int64_t lease() const { return lease_; }

  // Gives leadership up: stops the keep-alive and revokes the lease, so a
  // standby takes over at once rather than after the lease's time.
  void Resign();

 private:
  void KeepAliveLoop();
  void StopKeepAlive();
  void ReportFailure(const std::string& error);

  EtcdGateway gateway_;
  const std::string key_;
  const std::string value_;
  const Report report_;
  int64_t lease_ = 0;
  bool failing_ = false;  // a run of failed etcd calls was reported

  std::thread keepalive_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;    // guarded by mu_
  std::string lost_reason_;  // guarded by mu_
  std::atomic<bool> lost_{false};
};

}  // namespace sci::tools
