// Test support: a real ZeroMQ publisher on loopback (tcp or ipc) sending
// real Mooncake-format bytes, and a bounded wait for conditions.
//
// The publisher is an XPUB: on the wire it is a publisher like the Mooncake
// master's (the subscriber cannot tell), and it lets a test wait until a
// subscription has arrived, after which nothing it sends is lost to the
// PUB/SUB slow-joiner race. Each publisher owns its context, so closing it
// really releases the endpoint and a "restarted" publisher can bind again.
#pragma once

#include <unistd.h>
#include <zmq.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <stdexcept>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "encode/mooncake_encoder.h"
#include "encode/mooncake_event.h"
#include "wait_for.h"

namespace sci::testing {

using namespace std::chrono_literals;

// The socket files of the ipc endpoints a test process made up. ZeroMQ
// leaves them behind (and a publisher restarted on the same path reuses its
// file), so they are removed when the process exits.
class IpcFiles {
 public:
  ~IpcFiles() {
    for (const std::string& path : paths_) ::unlink(path.c_str());
  }
  void Add(std::string path) {
    std::lock_guard<std::mutex> lock(mu_);
    paths_.push_back(std::move(path));
  }

 private:
  std::mutex mu_;
  std::vector<std::string> paths_;
};

// A fresh ipc endpoint under /tmp, unique to this process and call.
inline std::string UniqueIpcEndpoint(std::string_view tag = "sci-test") {
  static IpcFiles files;
  static std::atomic<int> counter{0};
  const std::string path = "/tmp/" + std::string(tag) + "-" + std::to_string(::getpid()) + "-" +
                           std::to_string(counter.fetch_add(1)) + ".ipc";
  files.Add(path);
  return "ipc://" + path;
}

inline constexpr char kAnyLoopbackTcpPort[] = "tcp://127.0.0.1:*";

class LoopbackPublisher {
 public:
  // Binds to `endpoint` (kAnyLoopbackTcpPort picks a free port; endpoint()
  // then tells which). A restarted publisher may find its port still being
  // released, so EADDRINUSE is retried for a bounded time.
  explicit LoopbackPublisher(const std::string& endpoint) : context_(1), socket_(context_, zmq::socket_type::xpub) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.set(zmq::sockopt::sndhwm, 0);  // never drop: the tests count every message
    socket_.set(zmq::sockopt::xpub_verbose, 1);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (zmq_bind(socket_.handle(), endpoint.c_str()) != 0) {
      if (zmq_errno() != EADDRINUSE || std::chrono::steady_clock::now() >= deadline) throw zmq::error_t();
      std::this_thread::sleep_for(5ms);
    }
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
  }

  const std::string& endpoint() const { return endpoint_; }

  // Waits for a subscription whose prefix is `topic` (a subscriber that
  // connected and subscribed); false after `timeout`.
  bool AwaitSubscription(std::string_view topic = {}, std::chrono::milliseconds timeout = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      zmq_pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, left) == 0) return false;
      zmq::message_t message;
      if (!socket_.recv(message, zmq::recv_flags::dontwait)) continue;
      const std::string_view body = message.to_string_view();
      if (!body.empty() && body[0] == 1 && body.substr(1) == topic) return true;
    }
  }

  void SendFrames(const std::vector<std::string>& frames) {
    for (size_t i = 0; i < frames.size(); ++i) {
      socket_.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }

  // One production-format message: [topic, sequence, payload].
  void SendBatch(uint64_t sequence, std::span<const MooncakeEvent> events, std::string_view topic = {},
                 int64_t timestamp_ms = 1700000000000) {
    if (!next_event_id_) {
      SendFrames(EncodeBatch(sequence, events, topic, timestamp_ms));
      return;
    }
    std::vector<MooncakeEvent> numbered(events.begin(), events.end());
    for (MooncakeEvent& event : numbered) event.event_id = (*next_event_id_)++;
    SendFrames(EncodeBatch(sequence, numbered, topic, timestamp_ms));
  }

  // From now on SendBatch numbers the events itself, from `first`, as a
  // real publisher does (one counter across its batches: the index checks
  // that a batch continuing the sequence continues the ids), whatever ids
  // the events carry.
  void NumberEventsFrom(uint64_t first) { next_event_id_ = first; }

  static std::vector<std::string> EncodeBatch(uint64_t sequence, std::span<const MooncakeEvent> events,
                                              std::string_view topic = {}, int64_t timestamp_ms = 1700000000000) {
    const std::array<uint8_t, 8> seq = EncodeSequence(sequence);
    std::string payload;
    EncodeMooncakePayload(timestamp_ms, events, &payload);
    return {std::string(topic), std::string(seq.begin(), seq.end()), std::move(payload)};
  }

  // Closes the socket and its context: the endpoint is free when this returns.
  void Close() {
    socket_.close();
    context_.close();
  }

 private:
  zmq::context_t context_;
  zmq::socket_t socket_;
  std::string endpoint_;
  std::optional<uint64_t> next_event_id_;  // NumberEventsFrom
};

// A stored event as the Mooncake master writes it for `key`.
inline MooncakeEvent StoredEvent(uint64_t event_id, std::string_view key, std::string_view group = {},
                                 std::string_view tenant = "default") {
  MooncakeEvent event;
  event.event_id = event_id;
  event.stored = true;
  event.object_key = key;
  event.group_id = group;
  event.tenant_id = tenant;
  event.medium = "cpu";
  return event;
}

inline MooncakeEvent RemovedEvent(uint64_t event_id, std::string_view key, std::string_view group = {},
                                  std::string_view tenant = "default") {
  MooncakeEvent event = StoredEvent(event_id, key, group, tenant);
  event.stored = false;
  return event;
}

}  // namespace sci::testing
