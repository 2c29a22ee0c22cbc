// The library's writes to sockets never end the host process with SIGPIPE
// (src/common/sigpipe_block.h). Without the block, the first test ends
// this process (exit 141) instead of failing.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

#include "common/sigpipe_block.h"

namespace sci {
namespace {

bool Pending(int signal) {
  sigset_t pending;
  sigpending(&pending);
  return sigismember(&pending, signal) == 1;
}

bool Blocked(int signal) {
  sigset_t mask;
  pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  return sigismember(&mask, signal) == 1;
}

// A socket whose peer is closed: writing to it fails with EPIPE.
struct BrokenPipe {
  int fds[2] = {-1, -1};
  BrokenPipe() {
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    ::close(fds[1]);
  }
  ~BrokenPipe() { ::close(fds[0]); }
};

TEST(SigpipeBlock, AWriteToAClosedPeerFailsWithEpipeAndLeavesNoSignalBehind) {
  ASSERT_FALSE(Blocked(SIGPIPE));
  BrokenPipe pipe;
  int write_errno = 0;
  {
    SigpipeBlock block;
    EXPECT_TRUE(Blocked(SIGPIPE));
    EXPECT_EQ(::write(pipe.fds[0], "x", 1), -1);
    write_errno = errno;
    EXPECT_TRUE(Pending(SIGPIPE));  // raised, held back
  }
  EXPECT_EQ(write_errno, EPIPE);
  EXPECT_FALSE(Pending(SIGPIPE));  // taken, so unblocking delivers nothing
  EXPECT_FALSE(Blocked(SIGPIPE));  // the caller's mask is back
}

TEST(SigpipeBlock, KeepsTheErrnoOfTheWriteForTheCallerToRead) {
  BrokenPipe pipe;
  {
    SigpipeBlock block;
    EXPECT_EQ(::write(pipe.fds[0], "x", 1), -1);
  }
  EXPECT_EQ(errno, EPIPE);
}

TEST(SigpipeBlock, LeavesTheCallersOwnBlockAndPendingSignalAlone) {
  sigset_t pipe_set, old_mask;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask), 0);
  ASSERT_EQ(pthread_kill(pthread_self(), SIGPIPE), 0);  // the caller's, pending
  {
    SigpipeBlock block;
  }
  EXPECT_TRUE(Blocked(SIGPIPE));
  EXPECT_TRUE(Pending(SIGPIPE));
  const timespec no_wait{};
  EXPECT_EQ(sigtimedwait(&pipe_set, nullptr, &no_wait), SIGPIPE);  // the caller takes it back
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, &old_mask, nullptr), 0);
}

}  // namespace
}  // namespace sci
