// Reads the Mooncake HA leader's view from etcd through its v3 JSON gateway
// (docs/wire-formats.md, section 4): the key
// "mooncake-store/<cluster_id>/master_view" holds the leader's RPC address
// "ip:port", under a lease the leader keeps alive; the key's create_revision
// tells one election from the next.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "feed/http_download.h"
#include "feed/leader_view.h"

namespace sci {

// The etcd key of a cluster's view.
std::string MasterViewKey(std::string_view cluster_id);

// The JSON body of POST /v3/kv/range for `key`.
std::string RangeRequestBody(std::string_view key);

// Parses a range response. kFound fills *view (version = create_revision);
// kAbsent when there is no such key; kMalformed (with *error) for anything
// else, including a value that is not "host:port" with a port in 1..65535.
LeaderViewStatus ParseRangeResponse(std::string_view body, LeaderView* view, std::string* error);

// One read from `endpoint` ("http://host:2379"), with `download` (so that
// another thread can cancel it). kUnreachable (with *error) when the
// request itself fails.
LeaderViewStatus ReadLeaderView(HttpDownload& download, std::string_view endpoint, std::string_view cluster_id,
                                uint32_t timeout_ms, bool proxy_from_env, LeaderView* view, std::string* error);

// The view in etcd, asked of each endpoint in turn until one answers.
class EtcdViewSource : public LeaderViewSource {
 public:
  EtcdViewSource(std::vector<std::string> endpoints, std::string cluster_id, uint32_t timeout_ms,
                 bool proxy_from_env);

  LeaderViewStatus Read(LeaderView* view, std::string* error) override;
  void Cancel() override;
  const char* store_name() const override { return "etcd"; }

 private:
  const std::vector<std::string> endpoints_;
  const std::string cluster_id_;
  const uint32_t timeout_ms_;
  const bool proxy_from_env_;

  std::mutex mu_;
  bool cancelled_ = false;             // guarded by mu_
  HttpDownload* in_flight_ = nullptr;  // guarded by mu_
};

}  // namespace sci
