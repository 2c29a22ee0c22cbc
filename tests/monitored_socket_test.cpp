// A monitored socket closed while a connection of its is being made never
// wedges its ZeroMQ context (src/feed/monitored_socket.h). libzmq sends
// monitor events from the I/O thread with a blocking send; a monitor reader
// closed while its socket can still emit blocks that thread for ever, and
// every socket of the context goes silent. The subscriber reopens its socket
// on every disconnect, so after a publisher restart its old socket could
// still be connecting when its reader went: the simulation's soak found
// restarted publishers that never saw a subscription.
//
// With the socket closed, then its reader, and no monitor stopped (the
// order the subscriber had), the first two tests find the context wedged
// within 25 to 75 closes, run after run; with the reader closed first, a
// close waits for the monitor's lock for ever, which ReturnsWithin fails;
// with MonitoredSocket's order neither happens. The third test is the
// outside review's: a bounded reader queue full of unread events made the
// monitor's stop wait for ever.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include <atomic>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "feed/monitored_socket.h"
#include "loopback_listener.h"
#include "loopback_publisher.h"

namespace sci {
namespace {

using namespace std::chrono_literals;

constexpr int kEvents = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED;

// A SUB socket monitored as the subscriber monitors its own, connected to
// `endpoint`.
MonitoredSocket OpenMonitored(zmq::context_t& context, int number, const std::string& endpoint) {
  zmq::socket_t data(context, zmq::socket_type::sub);
  data.set(zmq::sockopt::linger, 0);
  data.set(zmq::sockopt::reconnect_ivl, 1);
  data.set(zmq::sockopt::subscribe, "");
  MonitoredSocket socket = MonitoredSocket::Monitor(context, std::move(data),
                                                    "inproc://monitored-socket-test-" + std::to_string(number), kEvents);
  socket.data().connect(endpoint);
  return socket;
}

// Runs `step` (a close) on a thread of its own and says whether it
// returned within `bound`. A close that waits for the monitor's lock for
// ever is a failure of the test, not a ctest time-out: the context is shut
// down, which frees a send blocked on the monitor and the close with it.
bool ReturnsWithin(zmq::context_t& context, const std::function<void()>& step, std::chrono::milliseconds bound) {
  std::promise<void> returned;
  std::future<void> done = returned.get_future();
  std::thread thread([&] {
    step();
    returned.set_value();
  });
  const bool in_time = done.wait_for(bound) == std::future_status::ready;
  if (!in_time) context.shutdown();
  thread.join();
  return in_time;
}

// Whether a fresh socket of `context` completes a handshake with the
// publisher within `bound`: a wedged I/O thread makes none.
bool ContextStillConnects(zmq::context_t& context, int number, const std::string& endpoint,
                          std::chrono::milliseconds bound) {
  MonitoredSocket probe = OpenMonitored(context, number, endpoint);
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (std::chrono::steady_clock::now() < deadline) {
    zmq_pollitem_t item{probe.monitor().handle(), 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, 20) <= 0) continue;
    zmq::message_t event;
    (void)probe.monitor().recv(event);
    uint16_t id = 0;
    std::memcpy(&id, event.data(), sizeof id);
    zmq::message_t address;
    (void)probe.monitor().recv(address);
    if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) return true;
  }
  return false;
}

TEST(MonitoredSocket, SocketsClosedMidConnectionNeverWedgeTheirContext) {
  testing::LoopbackPublisher publisher(testing::kAnyLoopbackTcpPort);
  zmq::context_t context(1);
  std::mt19937 jitter(12345);
  int number = 0;
  for (int round = 1; round <= 200; ++round) {
    MonitoredSocket socket = OpenMonitored(context, ++number, publisher.endpoint());
    // Closed at a varying point of its connection (TCP connect, greeting,
    // handshake event): the jitter is where the close lands, not a wait.
    std::this_thread::sleep_for(std::chrono::microseconds(jitter() % 400));
    ASSERT_TRUE(ReturnsWithin(context, [&] { socket.Close(); }, 5s)) << "close " << round << " hangs";
    if (round % 25 == 0) {
      ASSERT_TRUE(ContextStillConnects(context, ++number, publisher.endpoint(), 5s))
          << "the context's I/O thread is wedged after " << round << " closes";
    }
  }
}

TEST(MonitoredSocket, AssigningOverAnOpenSocketClosesItInTheSameOrder) {
  testing::LoopbackPublisher publisher(testing::kAnyLoopbackTcpPort);
  zmq::context_t context(1);
  std::mt19937 jitter(54321);
  int number = 0;
  MonitoredSocket socket;
  EXPECT_FALSE(socket.open());
  for (int round = 1; round <= 200; ++round) {
    MonitoredSocket next = OpenMonitored(context, ++number, publisher.endpoint());
    ASSERT_TRUE(ReturnsWithin(context, [&] { socket = std::move(next); }, 5s))  // the subscriber's reopen
        << "reopen " << round << " hangs";
    EXPECT_TRUE(socket.open());
    std::this_thread::sleep_for(std::chrono::microseconds(jitter() % 400));
    if (round % 25 == 0) {
      ASSERT_TRUE(ContextStillConnects(context, ++number, publisher.endpoint(), 5s))
          << "the context's I/O thread is wedged after " << round << " reopens";
    }
  }
}

// Accepts every connection on 127.0.0.1 and closes it at once: to a ZeroMQ
// socket each is a connection that failed its handshake, one DISCONNECTED
// event, and a reconnect 1 ms later.
class ClosingListener {
 public:
  ClosingListener() {
    fd_ = testing::ListenOnLoopback(128, &port_);
    if (fd_ < 0) {
      ADD_FAILURE() << "cannot listen on loopback";
      return;
    }
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd listening{fd_, POLLIN, 0};
        if (::poll(&listening, 1, 20) <= 0) continue;
        const int fd = ::accept(fd_, nullptr, nullptr);
        if (fd < 0) continue;
        ::close(fd);
        ++accepts_;
      }
    });
  }
  ~ClosingListener() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
  }
  ClosingListener(const ClosingListener&) = delete;
  ClosingListener& operator=(const ClosingListener&) = delete;

  std::string endpoint() const { return "tcp://127.0.0.1:" + std::to_string(port_); }
  int accepts() const { return accepts_.load(); }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepts_{0};
  std::thread thread_;
};

TEST(MonitoredSocket, ClosesWithThousandsOfEventsUnread) {
  ClosingListener listener;
  zmq::context_t context(1);
  MonitoredSocket socket = OpenMonitored(context, 1, listener.endpoint());
  // libzmq's default queue bounds (1,000 a side) would fill at 2,000 events
  // and stop the I/O thread: no connection after that.
  const bool live = testing::WaitFor([&] { return listener.accepts() >= 2500; }, 30s);
  if (!live) context.shutdown();  // frees the blocked send, so that the close at the end returns
  ASSERT_TRUE(live) << "the I/O thread stopped after " << listener.accepts() << " connections";
  EXPECT_TRUE(ReturnsWithin(context, [&] { socket.Close(); }, 5s)) << "the monitor's stop waits for ever";
}

}  // namespace
}  // namespace sci
