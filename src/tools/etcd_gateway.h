// The few etcd v3 calls a leader election needs, through etcd's JSON
// gateway over HTTP (POST /v3/..., keys and values base64, 64-bit integers
// as decimal strings), for the tools only (cpp-httplib).
//
// Endpoints are tried in the given order; the last one that answered is
// tried first next time. Every call is bounded by a connect and a read
// time-out, and fails with a message (etcd unreachable, an HTTP status
// other than 200, a body that is not the JSON expected).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sci::tools {

class EtcdGateway {
 public:
  // `endpoints`: "http://host:port" or "host:port" each. False with *error
  // if one is malformed (https is not supported).
  static bool ParseEndpoints(const std::string& comma_separated, std::vector<std::string>* out, std::string* error);

  explicit EtcdGateway(std::vector<std::string> endpoints,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(1500));

  // The key's value, nullopt in *value when absent.
  bool Get(const std::string& key, std::optional<std::string>* value, std::string* error);
  // A new lease of `ttl_seconds`; its id in *lease.
  bool GrantLease(int64_t ttl_seconds, int64_t* lease, std::string* error);
  // In one transaction: if `key` does not exist, put `value` under `lease`.
  // *created tells whether it did (false: someone holds the key).
  bool CreateWithLease(const std::string& key, const std::string& value, int64_t lease, bool* created,
                       std::string* error);
  // Refreshes the lease; *ttl_seconds is what is left (0: it has expired).
  bool KeepAlive(int64_t lease, int64_t* ttl_seconds, std::string* error);
  // Revokes the lease, deleting the keys attached to it.
  bool Revoke(int64_t lease, std::string* error);

 private:
  // POSTs `json` to `path` on the endpoints in turn; the 200 body in *body.
  bool Post(const std::string& path, const std::string& json, std::string* body, std::string* error);

  std::vector<std::string> endpoints_;
  size_t preferred_ = 0;
  std::chrono::milliseconds timeout_;
};

}  // namespace sci::tools
