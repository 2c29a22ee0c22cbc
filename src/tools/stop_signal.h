// SIGINT / SIGTERM as a file descriptor the tools can zmq_poll beside their
// sockets (the self-pipe trick), so a signal wakes a blocked poll at once
// and cannot slip in between a flag check and the poll.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

namespace sci::tools {

class StopSignal {
 public:
  // Installs the handlers; call once, early in main. False if the pipe
  // cannot be made.
  static bool Install() {
    if (::pipe(fds_) != 0) return false;
    for (int fd : fds_) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    struct sigaction action {};
    action.sa_handler = &OnSignal;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, nullptr);
    ::sigaction(SIGTERM, &action, nullptr);
    // A reader that goes away (`| head`) ends the tool through a failed
    // write, not a silent kill.
    ::signal(SIGPIPE, SIG_IGN);
    return true;
  }

  // Readable once a stop signal has arrived.
  static int fd() { return fds_[0]; }

  static bool Raised() {
    char byte;
    const ssize_t n = ::read(fds_[0], &byte, 1);
    if (n == 1) {
      // Put it back: every later check must also see it.
      (void)!::write(fds_[1], &byte, 1);
      return true;
    }
    return false;
  }

 private:
  static void OnSignal(int) {
    const int saved = errno;
    const char byte = 1;
    (void)!::write(fds_[1], &byte, 1);
    errno = saved;
  }

  static inline int fds_[2] = {-1, -1};
};

}  // namespace sci::tools
