// The store a stand-in master elects itself through, as Mooncake's
// leadership backends do (mooncake-store/src/ha/leadership/backends/): a
// view that at most one candidate can create, that lives for a term (5 s)
// unless its owner renews it, and that the owner can give up at once.
// LeaderElection (leader_election.h) runs the campaign over one of these:
// EtcdElection (a key under a lease) or RedisElection (a hash with a TTL).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace sci::tools {

class ElectionBackend {
 public:
  virtual ~ElectionBackend() = default;

  // The current leader's address, nullopt in *leader when there is none.
  // False with *error when the store cannot be asked (every call below too).
  virtual bool Peek(std::optional<std::string>* leader, std::string* error) = 0;
  // Becomes the leader with `address`, atomically, only if there is none;
  // *won says whether it did (losing to another candidate is no error).
  virtual bool TryAcquire(const std::string& address, bool* won, std::string* error) = 0;
  // Extends the term; *held is false when the view is no longer ours (it
  // expired, or another leader holds it).
  virtual bool Renew(bool* held, std::string* error) = 0;
  // Gives the view up at once (only if still ours), so a standby takes over
  // without waiting for the term to end.
  virtual bool Release(std::string* error) = 0;

  // For the "leader" line: where the view is, and what identifies this term
  // ({"lease", id} in etcd, {"view_version", n} in Redis).
  virtual std::string view_key() const = 0;
  virtual std::pair<std::string, int64_t> term() const = 0;
  // "etcd_error" / "redis_error": the field of the line reporting a failure.
  virtual const char* error_field() const = 0;
};

}  // namespace sci::tools
