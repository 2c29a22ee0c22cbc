// The Redis election backend, with the semantics of Mooncake's Redis
// leadership backend (mooncake-store/src/ha/leadership/backends/; the keys
// in feed/redis_view.h): a candidate acquires with one Lua script -- if the
// hash mooncake-store/{<ns>}/master_view exists, fail; else INCR
// mooncake-store/{<ns>}/master_view_version, HSET leader_address,
// view_version and owner_token, PEXPIRE the term -- renews by PEXPIRE only
// while owner_token is its own, and releases by DEL under the same check
// (both scripts too, so a renewal never revives a view another has taken).
#pragma once

#include <chrono>
#include <string>

#include "election_backend.h"
#include "feed/redis_connection.h"

namespace sci::tools {

class RedisElection : public ElectionBackend {
 public:
  RedisElection(RedisAddress address, const std::string& cluster_id, std::chrono::milliseconds term,
                std::chrono::milliseconds timeout = std::chrono::milliseconds(1500));

  bool Peek(std::optional<std::string>* leader, std::string* error) override;
  bool TryAcquire(const std::string& address, bool* won, std::string* error) override;
  bool Renew(bool* held, std::string* error) override;
  bool Release(std::string* error) override;
  std::string view_key() const override { return view_key_; }
  std::pair<std::string, int64_t> term() const override { return {"view_version", view_version_}; }
  const char* error_field() const override { return "redis_error"; }

 private:
  // Runs a script whose reply is an integer.
  bool Eval(const char* script, std::vector<std::string> keys_and_args, size_t n_keys, long long* result,
            std::string* error);

  RedisConnection connection_;
  const std::string view_key_;
  const std::string version_key_;
  const std::string term_ms_;
  const std::string owner_token_;  // random per process: which candidate holds the view
  int64_t view_version_ = 0;
};

}  // namespace sci::tools
