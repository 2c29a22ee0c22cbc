// Test support: a real server (etcd, Redis) as a child process on loopback,
// the parts every such harness shares: a fresh temporary directory for its
// data and its log (a file, not a pipe, which would stall the server once
// full; LogTail() quotes it), a free loopback port, a bounded stop (SIGTERM,
// then SIGKILL after 5 s) and a kill, and removal of the directory.
// EtcdProcess (etcd_process.h) and RedisProcess (redis_process.h) build on it.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace sci::testing {

class ServerProcess {
 public:
  using Clock = std::chrono::steady_clock;

  // `name` names the directory ("sci-<name>-XXXXXX") and the log ("<name>.log").
  explicit ServerProcess(std::string name) : name_(std::move(name)) {}
  ~ServerProcess() {
    Stop();
    if (!dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Creates the temporary directory once; false (with error()) if it cannot.
  bool MakeDirectory() {
    if (!dir_.empty()) return true;
    std::string pattern = (std::filesystem::temp_directory_path() / ("sci-" + name_ + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      error_ = std::string("mkdtemp: ") + std::strerror(errno);
      return false;
    }
    dir_ = pattern;
    return true;
  }
  const std::string& directory() const { return dir_; }

  // Starts `args` (args[0] an absolute path) with stdin from /dev/null and
  // stdout and stderr appended to the log. False (with error()) if it
  // cannot be started; `hint` says which package provides it.
  bool Spawn(const std::vector<std::string>& args, const std::string& hint) {
    const std::string log = dir_ + "/" + name_ + ".log";
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
      error_ = "cannot start " + args[0] + ": " + std::strerror(rc) + " (" + hint + ")";
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

  // Kills it at once (SIGKILL), as a crash.
  void Kill() { Signal(SIGKILL); }
  // Stops it (SIGTERM, then SIGKILL after 5 s) and reaps it.
  void Stop() { Signal(SIGTERM); }
  bool running() const { return pid_ > 0; }

  std::string error() const { return error_ + LogTail(); }
  void set_error(std::string error) { error_ = std::move(error); }

  // A loopback TCP port nobody listens on right now. Picking and binding are
  // two steps: a harness whose start loses that race retries on a new one.
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

 private:
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

  std::string LogTail() const {
    if (log_.empty()) return {};
    std::ifstream in(log_);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    if (text.size() > 2000) text = text.substr(text.size() - 2000);
    return text.empty() ? std::string() : "\n" + name_ + " log (tail):\n" + text;
  }

  const std::string name_;
  pid_t pid_ = -1;
  std::string dir_, log_, error_;
};

}  // namespace sci::testing
