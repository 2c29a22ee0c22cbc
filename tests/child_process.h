// A child process with its stdin, stdout and stderr on pipes, for the tests
// and benchmarks that run the real tools (sci-publish, sci-tail). Every wait
// is bounded; the destructor kills and reaps a child still running.
#pragma once

#include <fcntl.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

extern char** environ;

namespace sci::testing {

class ChildProcess {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts args[0] (a path) with `input` on its stdin, then closes it. Null,
  // with *error set when given, if it cannot be spawned.
  static std::unique_ptr<ChildProcess> Spawn(const std::vector<std::string>& args, const std::string& input = {},
                                             std::string* error = nullptr) {
    auto child = std::unique_ptr<ChildProcess>(new ChildProcess());
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
    if (::pipe(in) != 0 || ::pipe(out) != 0 || ::pipe(err) != 0) {
      for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) {
        if (fd >= 0) ::close(fd);
      }
      if (error != nullptr) *error = std::string("pipe: ") + std::strerror(errno);
      return nullptr;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err[1], 2);
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) posix_spawn_file_actions_addclose(&actions, fd);
    std::vector<char*> argv;
    for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    const int rc = posix_spawn(&child->pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    child->out_fd_ = out[0];
    child->err_fd_ = err[0];
    if (rc != 0) {
      ::close(in[1]);
      child->pid_ = -1;
      if (error != nullptr) *error = "cannot spawn " + args[0] + ": " + std::strerror(rc);
      return nullptr;
    }
    // Inputs are small scripts: they fit the pipe, so this never blocks. A
    // child may exit before it reads them (a tool refusing its flags), and
    // the write then raises SIGPIPE, which would end the test process: CI
    // lost Tools.PublishToAMalformedEndpoint... to it once in 800 runs.
    // (Tests that only see the C API cannot include src/common/
    // sigpipe_block.h; this is its technique, for one write.)
    if (!input.empty()) {
      sigset_t pipe_set, old_mask;
      sigemptyset(&pipe_set);
      sigaddset(&pipe_set, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
      if (::write(in[1], input.data(), input.size()) < 0 && errno == EPIPE) {
        const timespec no_wait{};
        while (sigtimedwait(&pipe_set, nullptr, &no_wait) < 0 && errno == EINTR) {
        }
      }
      pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    }
    ::close(in[1]);
    return child;
  }

  ~ChildProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) ::close(out_fd_);
    if (err_fd_ >= 0) ::close(err_fd_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // The next whole line of stderr; false at the deadline or at EOF.
  bool ReadStderrLine(std::string* line, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    const auto deadline = Clock::now() + timeout;
    while (true) {
      if (const size_t nl = err_.find('\n', err_consumed_); nl != std::string::npos) {
        *line = err_.substr(err_consumed_, nl - err_consumed_);
        err_consumed_ = nl + 1;
        return true;
      }
      if (err_fd_ < 0 || !Pump(deadline)) return false;
    }
  }

  // Reads both pipes to their end and reaps the child (exit_code() then
  // holds its status); false, the child left to the destructor to kill, if
  // it has not finished by the deadline.
  bool Finish(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    const auto deadline = Clock::now() + timeout;
    while (out_fd_ >= 0 || err_fd_ >= 0) {
      if (!Pump(deadline)) return false;
    }
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return true;
  }

  pid_t pid() const { return pid_; }
  int exit_code() const { return exit_code_; }  // -1 until Finish succeeds
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

 private:
  ChildProcess() = default;

  // Waits for output on either pipe and appends it; false at the deadline.
  bool Pump(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(left)) <= 0) return false;
    ReadInto(fds[0], &out_fd_, &out_);
    ReadInto(fds[1], &err_fd_, &err_);
    return true;
  }

  static void ReadInto(const pollfd& p, int* fd, std::string* sink) {
    if (*fd < 0 || (p.revents & (POLLIN | POLLHUP | POLLERR)) == 0) return;
    char buffer[65536];
    const ssize_t n = ::read(*fd, buffer, sizeof buffer);
    if (n > 0) {
      sink->append(buffer, static_cast<size_t>(n));
    } else {
      ::close(*fd);
      *fd = -1;
    }
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string out_, err_;
  size_t err_consumed_ = 0;
  int exit_code_ = -1;
};

}  // namespace sci::testing
