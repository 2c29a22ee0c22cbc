// A disconnect under the default reconnect policy makes a new socket; one
// that cannot be made (a process at its descriptor limit) is retried with a
// back-off, never the subscriber's end. Found by the outside review of
// 1.3.0, where the zmq::error_t left the loop and abandoned the subscriber.
// Real loopback sockets; zmq_socket interposed to fail for a moment.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <zmq.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "encode/mooncake_event.h"
#include "feed/subscriber.h"
#include "index/index.h"
#include "loopback_publisher.h"
#include "master_stand_in.h"
#include "wait_for.h"

namespace {
std::atomic<std::thread::id> g_subscriber_thread{};
std::atomic<bool> g_fail_zmq_socket{false};
std::atomic<int> g_zmq_socket_failures{0};
}  // namespace

// zmq_socket, interposed (the executable's definition wins over
// libzmq.so's): fails with EMFILE on the subscriber's thread while
// g_fail_zmq_socket is set -- a process at its descriptor limit.
extern "C" void* zmq_socket(void* context, int type) {
  using Real = void* (*)(void*, int);
  static const Real real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "zmq_socket"));
  if (g_fail_zmq_socket.load() && std::this_thread::get_id() == g_subscriber_thread.load()) {
    g_zmq_socket_failures.fetch_add(1);
    errno = EMFILE;
    return nullptr;
  }
  return real(context, type);
}

namespace sci {
namespace {

using namespace std::chrono_literals;
using sci::testing::LoopbackPublisher;
using sci::testing::StoredEvent;
using sci::testing::WaitFor;

void FindSubscriberThread(void*, int32_t, const char* msg, size_t len) {
  const std::string_view line(msg, len);
  if (line.find(": connected to ") != std::string_view::npos) g_subscriber_thread.store(std::this_thread::get_id());
}

TEST(ReopenFailure, ASocketThatCannotBeMadeAfterADisconnectIsRetried) {
  SetLogCallback(&FindSubscriberThread, nullptr);
  auto publisher = std::make_unique<LoopbackPublisher>(sci::testing::kAnyLoopbackTcpPort);
  const std::string endpoint = publisher->endpoint();
  Index index;
  SubscriberOptions options;
  options.endpoint = endpoint;
  SubscriberError code = SubscriberError::kNone;
  std::string error;
  auto subscriber = Subscriber::Start(index, options, &code, &error);
  ASSERT_NE(subscriber, nullptr) << error;
  ASSERT_TRUE(publisher->AwaitSubscription());
  ASSERT_TRUE(WaitFor([] { return g_subscriber_thread.load() != std::thread::id{}; }));
  const MooncakeEvent one[] = {StoredEvent(1, "a")};
  publisher->SendBatch(1, one);
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().last_sequence == 1; }));

  g_fail_zmq_socket.store(true);  // descriptors run short for a moment
  publisher.reset();              // a blip: the publisher goes away
  ASSERT_TRUE(WaitFor([&] { return g_zmq_socket_failures.load() > 0; }, 10s));
  std::this_thread::sleep_for(200ms);
  g_fail_zmq_socket.store(false);  // and are back

  publisher = std::make_unique<LoopbackPublisher>(endpoint);
  (void)publisher->AwaitSubscription({}, 5s);
  const MooncakeEvent two[] = {StoredEvent(1, "b")};
  const bool applied = WaitFor(
      [&] {
        publisher->SendBatch(1, two);
        return index.Contains({}, "b");
      },
      10s);
  EXPECT_TRUE(applied) << "subscriber_failures=" << index.GetStats().subscriber_failures
                       << " disconnect_clears=" << index.GetStats().disconnect_clears;
  EXPECT_EQ(index.GetStats().subscriber_failures, 0u);
  EXPECT_EQ(index.GetStats().disconnect_clears, 1u);
  SetLogCallback(nullptr, nullptr);
}

}  // namespace
}  // namespace sci
