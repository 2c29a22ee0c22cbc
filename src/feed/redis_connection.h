// A Redis client connection for the leader view and the tools' election
// (hiredis, synchronous), that never blocks its owner longer than its
// time-out and that another thread can cancel at once: the connect is made
// here, non-blocking and polled together with a cancel signal, and handed
// to hiredis (redisConnectFd); a command in flight is cut short by shutting
// the socket down. So a dead or blackholed Redis never holds up a stop().
//
// redis://[user:password@ | :password@]host[:port][/db] (port 6379, db 0 by
// default): AUTH and SELECT are sent after every (re)connect. Any error
// drops the connection; the next command reconnects.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

struct redisContext;

namespace sci {

struct RedisAddress {
  std::string host;
  uint16_t port = 6379;
  std::string user;      // empty: AUTH with the password only (if any)
  std::string password;  // empty: no AUTH
  uint32_t db = 0;
  std::string display;  // "redis://host:port/db", never the password (for log lines)
};

// Parses a redis:// URL. False with *error saying what is wrong (without the
// password); the caller names the option.
bool ParseRedisUrl(std::string_view url, RedisAddress* address, std::string* error);

// A reply, copied out of hiredis' (which is freed at once).
struct RedisReply {
  enum class Type { kNil, kString, kInteger, kArray, kStatus, kError };
  Type type = Type::kNil;
  std::string text;  // kString, kStatus, kError
  long long integer = 0;
  std::vector<RedisReply> elements;  // kArray
};

class RedisConnection {
 public:
  RedisConnection(RedisAddress address, std::chrono::milliseconds timeout);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends `argv` (connecting first if needed) and waits for the reply, each
  // step bounded by the time-out. False with *error when the command could
  // not be run (unreachable, time-out, cancelled, AUTH refused); an error
  // *reply* is a success with reply->type == kError. One thread at a time.
  bool Command(const std::vector<std::string>& argv, RedisReply* reply, std::string* error);

  // From any thread: the command in flight fails at once, and every later
  // one. Never blocks on Redis.
  void Cancel();

  const RedisAddress& address() const { return address_; }

 private:
  bool Connect(std::string* error);
  bool RunOnce(const std::vector<std::string>& argv, RedisReply* reply, std::string* error);
  void Drop();  // frees the context; the socket is closed under mu_

  const RedisAddress address_;
  const std::chrono::milliseconds timeout_;
  const int cancel_fd_;  // an eventfd, readable once cancelled

  std::mutex mu_;
  bool cancelled_ = false;  // guarded by mu_
  int live_fd_ = -1;        // guarded by mu_: the socket Cancel() shuts down

  redisContext* context_ = nullptr;  // the owner's thread only
};

}  // namespace sci
