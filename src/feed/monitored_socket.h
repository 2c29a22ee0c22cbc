// A ZeroMQ socket and the PAIR socket that reads its monitor's events,
// closed in the one order that cannot wedge their context.
//
// libzmq (4.3.4, and master as of this writing) sends monitor events from
// the context's I/O thread with a *blocking* send on the monitored socket's
// internal PAIR. If that PAIR's reader is closed while the monitored socket
// can still emit (its close is asynchronous: the reaper ends its connections
// later), the next event (a handshake on a reconnect, a disconnect) blocks
// the I/O thread for ever. Every socket of the context then goes silent: no
// reads, no heartbeats, no handshake time-outs, no new connections. The
// simulation met it after publisher restarts (the subscriber's socket
// reopened on a disconnect; the restarted publisher never saw a
// subscription). The cure is to stop the monitor (zmq_socket_monitor with
// no endpoint, which takes the monitor's lock, so no event is mid-send
// once it returns: the reader's queue is unbounded, so no send waits for
// room) before either socket is closed.
// Test: tests/monitored_socket_test.cpp.
#pragma once

#include <zmq.h>

#include <string>
#include <utility>

#include <zmq.hpp>

namespace sci {

class MonitoredSocket {
 public:
  MonitoredSocket() = default;
  // Monitors `data` (not yet connected: an event before the reader is
  // there would block) for `events` at `endpoint` (an inproc name no other
  // socket of the context uses) and connects a reader of the events. The
  // reader's queue has no bound: with one, 2,000 events the caller has not
  // read block the I/O thread in its send while it holds the monitor's
  // lock, and Close() would wait for that lock for ever. Throws
  // zmq::error_t.
  static MonitoredSocket Monitor(zmq::context_t& context, zmq::socket_t data, const std::string& endpoint,
                                 int events) {
    zmq::socket_t reader(context, zmq::socket_type::pair);
    reader.set(zmq::sockopt::linger, 0);
    reader.set(zmq::sockopt::rcvhwm, 0);
    if (zmq_socket_monitor(data.handle(), endpoint.c_str(), events) != 0) throw zmq::error_t();
    MonitoredSocket socket(std::move(data), std::move(reader));
    socket.reader_.connect(endpoint);
    return socket;
  }
  ~MonitoredSocket() { Close(); }
  MonitoredSocket(MonitoredSocket&& other) noexcept = default;
  MonitoredSocket& operator=(MonitoredSocket&& other) noexcept {
    if (this != &other) {
      Close();
      data_ = std::move(other.data_);
      reader_ = std::move(other.reader_);
    }
    return *this;
  }
  MonitoredSocket(const MonitoredSocket&) = delete;
  MonitoredSocket& operator=(const MonitoredSocket&) = delete;

  // The monitor stopped first, then the socket, then the reader (which
  // lingers 0: its unread events are dropped).
  void Close() noexcept {
    if (data_.handle() != nullptr) {
      (void)zmq_socket_monitor(data_.handle(), nullptr, 0);  // fails only once the context is ending
      data_.close();
    }
    reader_.close();
  }

  zmq::socket_t& data() { return data_; }
  zmq::socket_t& monitor() { return reader_; }
  bool open() const { return data_.handle() != nullptr; }

 private:
  MonitoredSocket(zmq::socket_t data, zmq::socket_t reader) : data_(std::move(data)), reader_(std::move(reader)) {}

  zmq::socket_t data_;
  zmq::socket_t reader_;
};

}  // namespace sci
