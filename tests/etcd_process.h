// Test support: a real etcd server (Debian etcd-server) as a child process,
// for the tests of leader election and HA following.
//
//   sci::testing::EtcdProcess etcd;           // starts it, waits for health
//   ASSERT_TRUE(etcd.ok()) << etcd.error();
//   etcd.endpoint();                          // "http://127.0.0.1:<port>"
//   etcd.Put("key", "value");                 // through etcdctl, a real client
//
// It listens on free loopback client and peer ports, keeps its data in a
// fresh temporary directory and writes its log there (not to a pipe, which
// would stall it once full; error() quotes the log's tail). Every wait is
// bounded. The destructor stops it (SIGTERM, then SIGKILL) and removes the
// directory. Picking a free port and binding it are two steps, so a start
// that loses that race is retried on new ports.
//
// Needs /usr/bin/etcd and /usr/bin/etcdctl (etcd-server, etcd-client); a
// test that includes it links PkgConfig::CPP_HTTPLIB (the health probe).
#pragma once

#include <chrono>
#include <httplib.h>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"
#include "server_process.h"

namespace sci::testing {

class EtcdProcess {
 public:
  using Clock = std::chrono::steady_clock;

  static constexpr char kEtcd[] = "/usr/bin/etcd";
  static constexpr char kEtcdctl[] = "/usr/bin/etcdctl";

  // Starts etcd and waits up to `healthy_within` for it to report healthy.
  explicit EtcdProcess(std::chrono::milliseconds healthy_within = std::chrono::seconds(20)) {
    const auto deadline = Clock::now() + healthy_within;
    for (int attempt = 0; attempt < 3 && !ok_; ++attempt) ok_ = StartOnce(deadline);
  }
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  // Whether it started and is healthy; if not, error() says why.
  bool ok() const { return ok_; }
  std::string error() const { return server_.error(); }

  // The client URL, e.g. "http://127.0.0.1:40123" (the endpoints list of
  // sci-publish --etcd and of sci_subscriber_options.etcd_endpoints).
  const std::string& endpoint() const { return endpoint_; }
  int client_port() const { return client_port_; }
  // The temporary directory (data and log), removed by the destructor.
  const std::string& directory() const { return server_.directory(); }

  // Whether /health answers {"health":"true"} now.
  bool Healthy() const {
    if (!server_.running()) return false;
    httplib::Client client("127.0.0.1", client_port_);
    client.set_connection_timeout(std::chrono::milliseconds(500));
    client.set_read_timeout(std::chrono::seconds(2));
    const auto response = client.Get("/health");
    return response && response->status == 200 && response->body.find("\"true\"") != std::string::npos;
  }

  // Kills it at once (SIGKILL), as a crash: etcd becomes unreachable. The
  // data directory stays until destruction.
  void Kill() { server_.Kill(); }
  // Stops it (SIGTERM, then SIGKILL after 5 s) and reaps it.
  void Stop() { server_.Stop(); }

  // Key operations through etcdctl (API v3). Put/Delete return false, with
  // error() telling why, if etcdctl fails; Get is nullopt for an absent key.
  bool Put(const std::string& key, const std::string& value) { return Etcdctl({"put", key, value}); }
  bool Delete(const std::string& key) { return Etcdctl({"del", key}); }
  std::optional<std::string> Get(const std::string& key) {
    std::string out;
    if (!Etcdctl({"get", key, "--print-value-only"}, &out) || out.empty()) return std::nullopt;
    if (out.back() == '\n') out.pop_back();  // etcdctl ends the value with a newline
    return out;
  }

 private:
  bool StartOnce(Clock::time_point deadline) {
    if (!server_.MakeDirectory()) return false;
    Stop();
    client_port_ = ServerProcess::FreeLoopbackPort();
    const int peer_port = ServerProcess::FreeLoopbackPort();
    if (client_port_ <= 0 || peer_port <= 0 || client_port_ == peer_port) {
      server_.set_error("no free loopback port");
      return false;
    }
    endpoint_ = "http://127.0.0.1:" + std::to_string(client_port_);
    const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port);
    const std::string data = server_.directory() + "/data";
    std::error_code ignored;
    std::filesystem::remove_all(data, ignored);
    const std::vector<std::string> args = {
        kEtcd,
        "--name", "sci-test",
        "--data-dir", data,
        "--listen-client-urls", endpoint_,
        "--advertise-client-urls", endpoint_,
        "--listen-peer-urls", peer,
        "--initial-advertise-peer-urls", peer,
        "--initial-cluster", "sci-test=" + peer,
        "--initial-cluster-state", "new",
        "--logger", "zap",
        "--log-level", "warn",
    };
    if (!server_.Spawn(args, "install etcd-server")) return false;
    while (Clock::now() < deadline) {
      if (Healthy()) return true;
      if (server_.Exited()) {
        server_.set_error("etcd exited before it was healthy (a port taken meanwhile?)");
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    server_.set_error("etcd not healthy in time");
    Stop();
    return false;
  }

  bool Etcdctl(std::vector<std::string> command, std::string* out = nullptr) {
    std::vector<std::string> args = {kEtcdctl, "--endpoints", endpoint_, "--dial-timeout", "2s",
                                     "--command-timeout", "5s"};
    args.insert(args.end(), command.begin(), command.end());
    std::string why;
    auto child = ChildProcess::Spawn(args, {}, &why);
    if (child == nullptr) {
      server_.set_error(why + " (install etcd-client)");
      return false;
    }
    if (!child->Finish(std::chrono::seconds(10)) || child->exit_code() != 0) {
      server_.set_error("etcdctl " + command.front() + " failed: " + child->err());
      return false;
    }
    if (out != nullptr) *out = child->out();
    return true;
  }

  ServerProcess server_{"etcd"};
  bool ok_ = false;
  int client_port_ = -1;
  std::string endpoint_;
};

}  // namespace sci::testing
