// A file descriptor another thread can make readable, so that the
// subscriber's thread, asleep in zmq_poll, wakes for something that is not
// a ZeroMQ message (a finished snapshot download, a retarget request).
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <system_error>

namespace sci {

class WakeSignal {
 public:
  WakeSignal() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  }
  ~WakeSignal() { ::close(fd_); }
  WakeSignal(const WakeSignal&) = delete;
  WakeSignal& operator=(const WakeSignal&) = delete;

  int fd() const { return fd_; }

  // Any thread. Cannot fail short of a counter overflow, which Reset prevents.
  void Notify() {
    const uint64_t one = 1;
    (void)!::write(fd_, &one, sizeof one);
  }

  // The waiting thread, once woken, before looking at what changed.
  void Reset() {
    uint64_t count = 0;
    (void)!::read(fd_, &count, sizeof count);
  }

 private:
  int fd_;
};

}  // namespace sci
