// Reads the Mooncake HA leader's view from etcd through its v3 JSON gateway
// (docs/wire-formats.md, section 4): the key
// "mooncake-store/<cluster_id>/master_view" holds the leader's RPC address
// "ip:port", under a lease the leader keeps alive.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "feed/http_download.h"

namespace sci {

struct LeaderView {
  std::string host;          // the address without its port; "[...]" kept for IPv6
  std::string address;       // the whole value, "ip:port"
  int64_t create_revision = 0;  // a new key (a new election) has a new one
};

enum class EtcdViewStatus { kFound, kAbsent, kMalformed, kUnreachable };

// The etcd key of a cluster's view.
std::string MasterViewKey(std::string_view cluster_id);

// The JSON body of POST /v3/kv/range for `key`.
std::string RangeRequestBody(std::string_view key);

// Parses a range response. kFound fills *view; kAbsent when there is no such
// key; kMalformed (with *error) for anything else, including a value that
// is not "host:port" with a port in 1..65535.
EtcdViewStatus ParseRangeResponse(std::string_view body, LeaderView* view, std::string* error);

// One read from `endpoint` ("http://host:2379"), with `download` (so that
// another thread can cancel it). kUnreachable (with *error) when the
// request itself fails.
EtcdViewStatus ReadLeaderView(HttpDownload& download, std::string_view endpoint, std::string_view cluster_id,
                              uint32_t timeout_ms, bool proxy_from_env, LeaderView* view, std::string* error);

}  // namespace sci
