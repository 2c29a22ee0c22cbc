// Test support: a real Redis server (Debian redis-server) as a child
// process, for the tests of HA following and leader election through Redis.
//
//   sci::testing::RedisProcess redis;        // starts it, waits for PING
//   ASSERT_TRUE(redis.ok()) << redis.error();
//   redis.url();                             // "redis://127.0.0.1:<port>"
//   redis.Cli({"HGETALL", "key"}, &out);     // through redis-cli, a real client
//
// It listens on a free loopback port, persists nothing (--save '',
// --appendonly no), keeps its working directory and log in a fresh
// temporary directory (server_process.h), and is stopped (SIGTERM, then
// SIGKILL) by the destructor. Every wait is bounded. A start that loses
// the race for its port is retried on a new one.
//
// Needs /usr/bin/redis-server and /usr/bin/redis-cli (redis-server, redis-tools).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"
#include "server_process.h"

namespace sci::testing {

class RedisProcess {
 public:
  using Clock = std::chrono::steady_clock;

  static constexpr char kRedisServer[] = "/usr/bin/redis-server";
  static constexpr char kRedisCli[] = "/usr/bin/redis-cli";

  // Starts Redis and waits up to `ready_within` for it to answer PING;
  // `password` non-empty: it requires AUTH (requirepass).
  explicit RedisProcess(std::string password = {}, std::chrono::milliseconds ready_within = std::chrono::seconds(20))
      : password_(std::move(password)) {
    const auto deadline = Clock::now() + ready_within;
    for (int attempt = 0; attempt < 3 && !ok_; ++attempt) ok_ = StartOnce(deadline);
  }
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;

  bool ok() const { return ok_; }
  std::string error() const { return server_.error(); }
  int port() const { return port_; }
  // "redis://127.0.0.1:<port>" (with ":<password>@" when it has one).
  std::string url() const {
    return "redis://" + (password_.empty() ? "" : ":" + password_ + "@") + "127.0.0.1:" + std::to_string(port_);
  }
  const std::string& directory() const { return server_.directory(); }

  // Kills it at once (SIGKILL), as a crash: Redis becomes unreachable.
  void Kill() { server_.Kill(); }
  void Stop() { server_.Stop(); }

  // Runs one command through redis-cli (--raw: a reply per line, nil as an
  // empty line); false, with error() telling why, if redis-cli fails or
  // Redis answers an error.
  bool Cli(const std::vector<std::string>& command, std::string* out = nullptr) {
    std::vector<std::string> args = {kRedisCli, "-h", "127.0.0.1", "-p", std::to_string(port_), "--raw"};
    if (!password_.empty()) {
      args.push_back("-a");
      args.push_back(password_);
      args.push_back("--no-auth-warning");
    }
    args.insert(args.end(), command.begin(), command.end());
    std::string why;
    auto child = ChildProcess::Spawn(args, {}, &why);
    if (child == nullptr) {
      server_.set_error(why + " (install redis-tools)");
      return false;
    }
    // redis-cli exits 0 on an error reply too; --raw prints it as "ERR ...".
    if (!child->Finish(std::chrono::seconds(10)) || child->exit_code() != 0 ||
        child->out().rfind("ERR", 0) == 0 || child->out().rfind("WRONGTYPE", 0) == 0) {
      server_.set_error("redis-cli " + command.front() + " failed: " + child->out() + child->err());
      return false;
    }
    if (out != nullptr) {
      *out = child->out();
      if (!out->empty() && out->back() == '\n') out->pop_back();
    }
    return true;
  }

  bool Ping() {
    std::string out;
    return server_.running() && Cli({"PING"}, &out) && out == "PONG";
  }

 private:
  bool StartOnce(Clock::time_point deadline) {
    if (!server_.MakeDirectory()) return false;
    server_.Stop();
    port_ = ServerProcess::FreeLoopbackPort();
    if (port_ <= 0) {
      server_.set_error("no free loopback port");
      return false;
    }
    std::vector<std::string> args = {
        kRedisServer,
        "--port", std::to_string(port_),
        "--bind", "127.0.0.1",
        "--save", "",
        "--appendonly", "no",
        "--dir", server_.directory(),
        "--daemonize", "no",
        "--loglevel", "warning",
    };
    if (!password_.empty()) {
      args.push_back("--requirepass");
      args.push_back(password_);
    }
    if (!server_.Spawn(args, "install redis-server")) return false;
    while (Clock::now() < deadline) {
      if (Ping()) return true;
      if (server_.Exited()) {
        server_.set_error("redis-server exited before answering PING (a port taken meanwhile?)");
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    server_.set_error("redis-server did not answer PING in time");
    server_.Stop();
    return false;
  }

  ServerProcess server_{"redis"};
  const std::string password_;
  bool ok_ = false;
  int port_ = -1;
};

}  // namespace sci::testing
