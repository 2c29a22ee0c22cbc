// Reads the Mooncake HA leader's view from Redis, as Mooncake's Redis
// leadership backend writes it (mooncake-store/src/ha/leadership/backends/):
// the hash "mooncake-store/{<ns>}/master_view" with the fields
// leader_address ("ip:port", the leader's RPC address), view_version (from
// INCR "mooncake-store/{<ns>}/master_view_version", one per election) and
// owner_token, expiring 5 s after the leader's last renewal. <ns> is the
// cluster id with one trailing '/' dropped and '{', '}' replaced by '_':
// the braces make <ns> a Redis Cluster hash tag, so both keys live in one
// slot (the election's script touches both).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "feed/leader_view.h"
#include "feed/redis_connection.h"

namespace sci {

// <ns> of a cluster id.
std::string RedisNamespace(std::string_view cluster_id);
// The view's hash and the election counter of a cluster id.
std::string RedisMasterViewKey(std::string_view cluster_id);
std::string RedisViewVersionKey(std::string_view cluster_id);

// Interprets the reply to HMGET <view> leader_address view_version. A hash
// that is absent, or has only one of the two fields (written half-way, or
// by something else), is no view: kAbsent. kMalformed (with *error) for an
// address that is not host:port or a version that is not an integer.
LeaderViewStatus ParseMasterViewReply(const RedisReply& reply, LeaderView* view, std::string* error);

class RedisViewSource : public LeaderViewSource {
 public:
  RedisViewSource(RedisAddress address, std::string cluster_id, std::chrono::milliseconds timeout);

  LeaderViewStatus Read(LeaderView* view, std::string* error) override;
  void Cancel() override { connection_.Cancel(); }
  const char* store_name() const override { return "Redis"; }

 private:
  RedisConnection connection_;
  const std::string view_key_;
};

}  // namespace sci
