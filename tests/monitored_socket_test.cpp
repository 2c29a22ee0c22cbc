// A monitored socket closed while a connection of its is being made never
// wedges its ZeroMQ context (src/feed/monitored_socket.h). libzmq sends
// monitor events from the I/O thread with a blocking send; a monitor reader
// closed while its socket can still emit blocks that thread for ever, and
// every socket of the context goes silent. The subscriber reopens its socket
// on every disconnect, so after a publisher restart its old socket could
// still be connecting when its reader went: the simulation's soak found
// restarted publishers that never saw a subscription.
//
// With the reader closed before the monitor is stopped (the order the
// subscriber had), the first test wedges the context within its first 25
// rounds, run after run; with MonitoredSocket's order it never does.
#include <gtest/gtest.h>
#include <zmq.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "feed/monitored_socket.h"
#include "loopback_publisher.h"

namespace sci {
namespace {

using namespace std::chrono_literals;

constexpr int kEvents = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED;

// A SUB socket monitored as the subscriber monitors its own, connected to
// `endpoint`.
MonitoredSocket OpenMonitored(zmq::context_t& context, int number, const std::string& endpoint) {
  const std::string monitor_endpoint = "inproc://monitored-socket-test-" + std::to_string(number);
  zmq::socket_t data(context, zmq::socket_type::sub);
  zmq::socket_t reader(context, zmq::socket_type::pair);
  data.set(zmq::sockopt::linger, 0);
  data.set(zmq::sockopt::reconnect_ivl, 1);
  data.set(zmq::sockopt::subscribe, "");
  reader.set(zmq::sockopt::linger, 0);
  if (zmq_socket_monitor(data.handle(), monitor_endpoint.c_str(), kEvents) != 0) throw zmq::error_t();
  MonitoredSocket socket(std::move(data), std::move(reader));
  socket.monitor().connect(monitor_endpoint);
  socket.data().connect(endpoint);
  return socket;
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
    socket.Close();
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
    socket = OpenMonitored(context, ++number, publisher.endpoint());  // the subscriber's reopen
    EXPECT_TRUE(socket.open());
    std::this_thread::sleep_for(std::chrono::microseconds(jitter() % 400));
    if (round % 25 == 0) {
      ASSERT_TRUE(ContextStillConnects(context, ++number, publisher.endpoint(), 5s))
          << "the context's I/O thread is wedged after " << round << " reopens";
    }
  }
}

}  // namespace
}  // namespace sci
