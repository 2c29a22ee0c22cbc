#include "redis_election.h"

#include <unistd.h>

#include <random>
#include <utility>

#include "absl/strings/str_format.h"
#include "feed/redis_view.h"

namespace sci::tools {
namespace {

// KEYS[1] the view, KEYS[2] the version counter; ARGV: address, token, term ms.
constexpr char kAcquire[] = R"lua(
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local version = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'leader_address', ARGV[1], 'view_version', tostring(version), 'owner_token', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return version
)lua";

// KEYS[1] the view; ARGV: token, term ms. 1 if renewed, 0 if not ours.
constexpr char kRenew[] = R"lua(
if redis.call('HGET', KEYS[1], 'owner_token') == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
)lua";

// KEYS[1] the view; ARGV: token. 1 if deleted, 0 if not ours.
constexpr char kRelease[] = R"lua(
if redis.call('HGET', KEYS[1], 'owner_token') == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
)lua";

std::string NewOwnerToken() {
  std::random_device random;
  return absl::StrFormat("sci-publish-%d-%08x%08x", ::getpid(), random(), random());
}

}  // namespace

RedisElection::RedisElection(RedisAddress address, const std::string& cluster_id, std::chrono::milliseconds term,
                             std::chrono::milliseconds timeout)
    : connection_(std::move(address), timeout),
      view_key_(RedisMasterViewKey(cluster_id)),
      version_key_(RedisViewVersionKey(cluster_id)),
      term_ms_(std::to_string(term.count())),
      owner_token_(NewOwnerToken()) {}

bool RedisElection::Eval(const char* script, std::vector<std::string> keys_and_args, size_t n_keys,
                         long long* result, std::string* error) {
  std::vector<std::string> argv = {"EVAL", script, std::to_string(n_keys)};
  for (std::string& a : keys_and_args) argv.push_back(std::move(a));
  RedisReply reply;
  if (!connection_.Command(argv, &reply, error)) return false;
  if (reply.type != RedisReply::Type::kInteger) {
    *error = reply.type == RedisReply::Type::kError ? "Redis: " + reply.text : "Redis: unexpected reply to EVAL";
    return false;
  }
  *result = reply.integer;
  return true;
}

bool RedisElection::Peek(std::optional<std::string>* leader, std::string* error) {
  RedisReply reply;
  if (!connection_.Command({"HGET", view_key_, "leader_address"}, &reply, error)) return false;
  if (reply.type == RedisReply::Type::kError) {
    *error = "Redis: " + reply.text;
    return false;
  }
  if (reply.type == RedisReply::Type::kString) {
    *leader = reply.text;
  } else {
    leader->reset();
  }
  return true;
}

bool RedisElection::TryAcquire(const std::string& address, bool* won, std::string* error) {
  long long version = 0;
  if (!Eval(kAcquire, {view_key_, version_key_, address, owner_token_, term_ms_}, 2, &version, error)) return false;
  *won = version > 0;
  if (*won) view_version_ = version;
  return true;
}

bool RedisElection::Renew(bool* held, std::string* error) {
  long long renewed = 0;
  if (!Eval(kRenew, {view_key_, owner_token_, term_ms_}, 1, &renewed, error)) return false;
  *held = renewed == 1;
  return true;
}

bool RedisElection::Release(std::string* error) {
  long long deleted = 0;
  return Eval(kRelease, {view_key_, owner_token_}, 1, &deleted, error);
}

}  // namespace sci::tools
