// The etcd election backend, as the Mooncake master elects itself (docs/
// wire-formats.md, section 4): the key mooncake-store/<cluster_id>/master_view
// holds the leader's RPC address "ip:port", attached to a 5 s lease the
// leader keeps alive; a candidate creates it with a fresh lease in one
// transaction (create_revision == 0), so of several exactly one wins.
#pragma once

#include <string>

#include "election_backend.h"
#include "etcd_gateway.h"

namespace sci::tools {

class EtcdElection : public ElectionBackend {
 public:
  static std::string ViewKey(const std::string& cluster_id) { return "mooncake-store/" + cluster_id + "/master_view"; }

  EtcdElection(EtcdGateway gateway, const std::string& cluster_id, int64_t lease_seconds);

  bool Peek(std::optional<std::string>* leader, std::string* error) override;
  bool TryAcquire(const std::string& address, bool* won, std::string* error) override;
  bool Renew(bool* held, std::string* error) override;
  bool Release(std::string* error) override;
  std::string view_key() const override { return key_; }
  std::pair<std::string, int64_t> term() const override { return {"lease", lease_}; }
  const char* error_field() const override { return "etcd_error"; }

 private:
  EtcdGateway gateway_;
  const std::string key_;
  const int64_t lease_seconds_;
  int64_t lease_ = 0;
};

}  // namespace sci::tools
