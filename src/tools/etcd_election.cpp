#include "etcd_election.h"

#include <utility>

namespace sci::tools {

EtcdElection::EtcdElection(EtcdGateway gateway, const std::string& cluster_id, int64_t lease_seconds)
    : gateway_(std::move(gateway)), key_(ViewKey(cluster_id)), lease_seconds_(lease_seconds) {}

bool EtcdElection::Peek(std::optional<std::string>* leader, std::string* error) {
  return gateway_.Get(key_, leader, error);
}

bool EtcdElection::TryAcquire(const std::string& address, bool* won, std::string* error) {
  int64_t lease = 0;
  if (!gateway_.GrantLease(lease_seconds_, &lease, error) ||
      !gateway_.CreateWithLease(key_, address, lease, won, error)) {
    return false;
  }
  if (*won) {
    lease_ = lease;
  } else {
    std::string ignored;
    gateway_.Revoke(lease, &ignored);  // unused; it would expire anyway
  }
  return true;
}

bool EtcdElection::Renew(bool* held, std::string* error) {
  int64_t ttl = 0;
  if (!gateway_.KeepAlive(lease_, &ttl, error)) return false;
  *held = ttl > 0;
  return true;
}

bool EtcdElection::Release(std::string* error) {
  if (lease_ == 0) return true;
  const bool ok = gateway_.Revoke(lease_, error);
  lease_ = 0;
  return ok;
}

}  // namespace sci::tools
