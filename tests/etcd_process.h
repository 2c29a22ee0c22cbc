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

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <httplib.h>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"

extern char** environ;

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

  ~EtcdProcess() {
    Stop();
    if (!dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  // Whether it started and is healthy; if not, error() says why.
  bool ok() const { return ok_; }
  std::string error() const { return error_ + LogTail(); }

  // The client URL, e.g. "http://127.0.0.1:40123" (the endpoints list of
  // sci-publish --etcd and of sci_subscriber_options.etcd_endpoints).
  const std::string& endpoint() const { return endpoint_; }
  int client_port() const { return client_port_; }
  // The temporary directory (data and log), removed by the destructor.
  const std::string& directory() const { return dir_; }

  // Whether /health answers {"health":"true"} now.
  bool Healthy() const {
    if (pid_ <= 0) return false;
    httplib::Client client("127.0.0.1", client_port_);
    client.set_connection_timeout(std::chrono::milliseconds(500));
    client.set_read_timeout(std::chrono::seconds(2));
    const auto response = client.Get("/health");
    return response && response->status == 200 && response->body.find("\"true\"") != std::string::npos;
  }

  // Kills it at once (SIGKILL), as a crash: etcd becomes unreachable. The
  // data directory stays until destruction.
  void Kill() { Signal(SIGKILL); }
  // Stops it (SIGTERM, then SIGKILL after 5 s) and reaps it.
  void Stop() { Signal(SIGTERM); }

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
    if (dir_.empty()) {
      std::string pattern = (std::filesystem::temp_directory_path() / "sci-etcd-XXXXXX").string();
      if (::mkdtemp(pattern.data()) == nullptr) {
        error_ = std::string("mkdtemp: ") + std::strerror(errno);
        return false;
      }
      dir_ = pattern;
    }
    Stop();
    client_port_ = FreeLoopbackPort();
    const int peer_port = FreeLoopbackPort();
    if (client_port_ <= 0 || peer_port <= 0 || client_port_ == peer_port) {
      error_ = "no free loopback port";
      return false;
    }
    endpoint_ = "http://127.0.0.1:" + std::to_string(client_port_);
    const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port);
    const std::string data = dir_ + "/data";
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
    if (!Spawn(args, dir_ + "/etcd.log")) return false;
    while (Clock::now() < deadline) {
      if (Healthy()) return true;
      if (Exited()) {
        error_ = "etcd exited before it was healthy (a port taken meanwhile?)";
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    error_ = "etcd not healthy in time";
    Stop();
    return false;
  }

  bool Spawn(const std::vector<std::string>& args, const std::string& log) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::vector<char*> argv;
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      pid_ = -1;
      error_ = std::string("cannot start ") + kEtcd + ": " + std::strerror(rc) + " (install etcd-server)";
      return false;
    }
    log_ = log;
    return true;
  }

  // Whether the child has exited (it is reaped then).
  bool Exited() {
    if (pid_ <= 0) return true;
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return true;
    }
    return false;
  }

  void Signal(int signal) {
    if (pid_ <= 0) return;
    ::kill(pid_, signal);
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    while (!Exited()) {
      if (Clock::now() >= deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  bool Etcdctl(std::vector<std::string> command, std::string* out = nullptr) {
    std::vector<std::string> args = {kEtcdctl, "--endpoints", endpoint_, "--dial-timeout", "2s",
                                     "--command-timeout", "5s"};
    args.insert(args.end(), command.begin(), command.end());
    std::string why;
    auto child = ChildProcess::Spawn(args, {}, &why);
    if (child == nullptr) {
      error_ = why + " (install etcd-client)";
      return false;
    }
    if (!child->Finish(std::chrono::seconds(10)) || child->exit_code() != 0) {
      error_ = "etcdctl " + command.front() + " failed: " + child->err();
      return false;
    }
    if (out != nullptr) *out = child->out();
    return true;
  }

  // A loopback TCP port nobody listens on right now.
  static int FreeLoopbackPort() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    socklen_t length = sizeof address;
    int port = -1;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      port = ntohs(address.sin_port);
    }
    ::close(fd);
    return port;
  }

  std::string LogTail() const {
    if (log_.empty()) return {};
    std::ifstream in(log_);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    if (text.size() > 2000) text = text.substr(text.size() - 2000);
    return text.empty() ? std::string() : "\netcd log (tail):\n" + text;
  }

  bool ok_ = false;
  pid_t pid_ = -1;
  int client_port_ = -1;
  std::string dir_, log_, endpoint_, error_;
};

}  // namespace sci::testing
