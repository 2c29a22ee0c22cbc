// Keeps a write to a socket whose peer is gone (or that another thread shut
// down) from ending the host process.
//
// Such a write fails with EPIPE and raises SIGPIPE, whose default action ends
// the process. The router that links this library owns its signal handlers,
// so the library may not ignore SIGPIPE for the process; and hiredis 0.14
// writes with write(2), which has no MSG_NOSIGNAL. So while a write may
// happen, SIGPIPE is blocked in the calling thread (the kernel sends it to
// the thread that wrote), and one raised meanwhile is taken off the pending
// set before the old mask comes back -- the technique libpq and libcurl use.
//
// Found by CI: RedisConnection::Cancel shuts the socket down for writing;
// a command written after it killed the test process (exit 141).
//
// Limit (libpq's too): a SIGPIPE someone sends the process or this thread
// on purpose (kill, pthread_kill) while a block is up is taken with the
// one the write raised, and the host's handler does not run for it. No
// program sends SIGPIPE as a message; a lost one is the lesser harm.
#pragma once

#include <pthread.h>

#include <cerrno>
#include <csignal>
#include <ctime>

namespace sci {

class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigset_t pipe = PipeSet();
    pthread_sigmask(SIG_BLOCK, &pipe, &old_mask_);
    // One already pending (sent to the process by someone else, or left
    // blocked by the caller) is not ours to take.
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }

  ~SigpipeBlock() {
    const int saved_errno = errno;  // the caller reads the write's errno after us
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        sigset_t pipe = PipeSet();
        const timespec no_wait{};
        while (sigtimedwait(&pipe, nullptr, &no_wait) < 0 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    errno = saved_errno;
  }

  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  static sigset_t PipeSet() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    return set;
  }

  sigset_t old_mask_;
  bool was_pending_ = false;
};

}  // namespace sci
