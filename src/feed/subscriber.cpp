#include "feed/subscriber.h"

#include <zmq.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <new>
#include <span>
#include <system_error>
#include <utility>
#include <vector>
#include <zmq.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "wire/message_apply.h"
#include "wire/wire_decoder.h"

namespace sci {
namespace {

using Clock = std::chrono::steady_clock;

// Each subscriber has its own context, so this name never clashes.
constexpr char kMonitorEndpoint[] = "inproc://sci-subscriber-monitor";

// A production batch is a few tens of kilobytes; anything near this is not a
// publisher we understand, and ZeroMQ drops the connection instead of
// buffering it.
constexpr int64_t kMaxMessageBytes = int64_t{64} << 20;

// Every supported format has 3 frames. Frames past this many are received
// and discarded (the decoder still sees too many frames and rejects the
// message), so a hostile peer cannot make the frame vector grow without end.
constexpr size_t kMaxKeptFrames = 16;

// Messages applied per wake-up before the monitor is looked at again.
constexpr int kMaxMessagesPerWake = 1024;

// "Connected" means a ZMTP peer completed the handshake, not merely that a
// TCP connection opened. A connection that fails its handshake produces a
// DISCONNECTED without a HANDSHAKE_SUCCEEDED; the state machine below
// ignores it.
constexpr int kMonitoredEvents = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED;

// Errors of zmq_connect that mean "this endpoint string is wrong" rather
// than "the machine could not do it".
bool IsEndpointError(int err) {
  return err == EINVAL || err == EPROTONOSUPPORT || err == ENOCOMPATPROTO || err == ENAMETOOLONG;
}

// A ZMTP heartbeat turns a silently dead peer (host gone, cable pulled: no
// FIN ever arrives) into a disconnect, which starts the stale clock. The
// interval follows the grace so that a short grace is not defeated by a
// slow detection.
int HeartbeatIntervalMs(uint32_t stale_after_ms) {
  return static_cast<int>(std::clamp<uint32_t>(stale_after_ms / 4, 100, 1000));
}

bool FitsInt(uint32_t value) { return value <= static_cast<uint32_t>(INT_MAX); }

}  // namespace

class Subscriber::Loop {
 public:
  Loop(std::shared_ptr<Index> index, const SubscriberOptions& options)
      : index_share_(std::move(index)),
        index_(*index_share_),
        options_(options),
        endpoint_for_logs_(absl::CHexEscape(options.endpoint)),
        context_(1),
        data_(context_, zmq::socket_type::sub),
        monitor_(context_, zmq::socket_type::pair) {}

  // Configures and connects the SUB socket on the caller's thread.
  bool Connect(SubscriberError* code, std::string* error) {
    const int heartbeat_ms = HeartbeatIntervalMs(options_.stale_after_ms);
    data_.set(zmq::sockopt::linger, 0);
    data_.set(zmq::sockopt::rcvhwm, options_.receive_hwm);
    data_.set(zmq::sockopt::maxmsgsize, kMaxMessageBytes);
    data_.set(zmq::sockopt::reconnect_ivl, static_cast<int>(options_.reconnect_ms));
    data_.set(zmq::sockopt::reconnect_ivl_max, static_cast<int>(options_.reconnect_max_ms));
    data_.set(zmq::sockopt::heartbeat_ivl, heartbeat_ms);
    data_.set(zmq::sockopt::heartbeat_timeout, 3 * heartbeat_ms);
    data_.set(zmq::sockopt::subscribe, options_.topic);
    // The monitor must exist before the connect, or the first handshake
    // could go unseen.
    if (zmq_socket_monitor(data_.handle(), kMonitorEndpoint, kMonitoredEvents) != 0) throw zmq::error_t();
    monitor_.set(zmq::sockopt::linger, 0);
    monitor_.connect(kMonitorEndpoint);
    if (zmq_connect(data_.handle(), options_.endpoint.c_str()) != 0) {
      const int err = zmq_errno();
      *code = IsEndpointError(err) ? SubscriberError::kInvalidArgument : SubscriberError::kIo;
      *error = absl::StrFormat("endpoint \"%s\": ZeroMQ cannot connect to it (%s)", endpoint_for_logs_,
                               zmq_strerror(err));
      return false;
    }
    return true;
  }

  // The thread's body. Returns when Wake() is called (or on a fatal socket
  // error, after clearing the index it can no longer keep current).
  void Run() noexcept {
    try {
      Serve();
    } catch (const zmq::error_t& e) {
      if (e.num() != ETERM) Abandon(e.what());
    } catch (const std::exception& e) {
      Abandon(e.what());
    } catch (...) {
      Abandon("unknown exception");
    }
    index_.counters().subscriber_connected.Set(false);
  }

  // Called from the stopping thread: every blocking call of this context,
  // zmq_poll included, returns ETERM.
  void Wake() { zmq_ctx_shutdown(context_.handle()); }

  // Stop() was called from this thread, which cannot join itself: the thread
  // deletes the loop when Run() returns.
  void HandOverToThread() { owned_by_thread_ = true; }
  bool owned_by_thread() const { return owned_by_thread_; }

 private:
  void Serve() {
    doubt_since_ = Clock::now();  // nothing has proved the index's contents yet
    while (true) {
      zmq_pollitem_t items[] = {{data_.handle(), 0, ZMQ_POLLIN, 0}, {monitor_.handle(), 0, ZMQ_POLLIN, 0}};
      if (zmq_poll(items, 2, PollTimeoutMs()) < 0) {
        if (zmq_errno() == EINTR) continue;
        throw zmq::error_t();  // ETERM: Stop() was called
      }
      // Monitor first: the handshake event of a connection is emitted before
      // any of its messages, so a message is never judged against a stale
      // idea of the connection.
      if (items[1].revents & ZMQ_POLLIN) DrainMonitor();
      if (items[0].revents & ZMQ_POLLIN) DrainData(kMaxMessagesPerWake);
      CheckStale(Clock::now());
    }
  }

  // Until the doubt deadline while the stream is untrusted, else forever:
  // the thread sleeps in zmq_poll and only wakes for a message, a connection
  // change, the deadline or Stop().
  long PollTimeoutMs() const {
    if (trusted_ || stale_handled_) return -1;
    const auto left = doubt_since_ + std::chrono::milliseconds(options_.stale_after_ms) - Clock::now();
    if (left <= Clock::duration::zero()) return 0;
    // Rounded up, so that the wake-up is never just before the deadline.
    return static_cast<long>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
  }

  void DrainMonitor() {
    while (true) {
      zmq::message_t event;
      if (!monitor_.recv(event, zmq::recv_flags::dontwait)) return;
      std::string address;
      bool more = event.more();
      while (more) {  // the endpoint frame (and anything a future libzmq adds)
        zmq::message_t part;
        (void)monitor_.recv(part);
        if (address.empty()) address = part.to_string();
        more = part.more();
      }
      if (event.size() < sizeof(uint16_t)) continue;
      uint16_t id = 0;
      std::memcpy(&id, event.data(), sizeof id);  // native byte order, per zmq_socket_monitor
      if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
        OnConnected(address);
      } else if (id == ZMQ_EVENT_DISCONNECTED) {
        OnDisconnected(address);
      }
    }
  }

  // Applies up to `limit` queued messages (or all of them if `limit` < 0).
  void DrainData(int limit) {
    for (int i = 0; limit < 0 || i < limit; ++i) {
      const size_t n_frames = ReceiveMessage();
      if (n_frames == 0) return;
      ApplyReceived(n_frames);
    }
  }

  // Receives one multipart message into frames_ without waiting; returns its
  // number of frames as passed to the decoder, 0 if nothing is queued.
  size_t ReceiveMessage() {
    if (frames_.empty()) frames_.emplace_back();
    if (!data_.recv(frames_[0], zmq::recv_flags::dontwait)) return 0;
    size_t kept = 1;
    bool more = frames_[0].more();
    while (more) {
      // The parts of a message arrive together: this never blocks.
      if (kept == frames_.size() && kept <= kMaxKeptFrames) frames_.emplace_back();
      zmq::message_t& part = frames_[std::min(kept, kMaxKeptFrames)];
      (void)data_.recv(part);
      kept = std::min(kept + 1, kMaxKeptFrames + 1);
      more = part.more();
    }
    return kept;
  }

  void ApplyReceived(size_t n_frames) {
    index_.counters().messages_received.Add();
    spans_.clear();
    for (size_t i = 0; i < n_frames; ++i) {
      spans_.emplace_back(static_cast<const uint8_t*>(frames_[i].data()), frames_[i].size());
    }
    bool applied = false;
    try {
      // Malformed messages are counted and logged by ApplyMessage and
      // change nothing; they prove nothing about the stream either.
      applied = ApplyMessage(index_, spans_, scratch_, &error_);
    } catch (const std::bad_alloc&) {
      // The index has already cleared itself (it cannot vouch for a half
      // applied batch); keep listening, the next batch starts afresh.
      Logf(LogLevel::kError, "subscriber %s: out of memory applying a message; index cleared", endpoint_for_logs_);
    }
    if (applied) OnMessageApplied(Clock::now());
  }

  void OnConnected(const std::string& address) {
    if (connected_) return;
    connected_ = true;
    index_.counters().subscriber_connected.Set(true);
    index_.counters().subscriber_connects.Add();
    // Not trusted yet: the first message on this connection must show that
    // nothing was lost while we were away.
    Logf(LogLevel::kInfo, "subscriber %s: connected to %s", endpoint_for_logs_, absl::CHexEscape(address));
  }

  void OnDisconnected(const std::string& address) {
    if (!connected_) return;  // a connection that never completed its handshake
    // What is queued arrived before the disconnect: apply it while the
    // connection it came on still counts, so it cannot be mistaken later for
    // a message proving the next connection.
    DrainData(-1);
    connected_ = false;
    index_.counters().subscriber_connected.Set(false);
    index_.counters().subscriber_disconnects.Add();
    if (trusted_) {
      trusted_ = false;
      stale_handled_ = false;
      doubt_since_ = Clock::now();
    }
    Logf(LogLevel::kWarn, "subscriber %s: disconnected from %s; index cleared if not back within %d ms",
         endpoint_for_logs_, absl::CHexEscape(address), options_.stale_after_ms);
  }

  void OnMessageApplied(Clock::time_point now) {
    if (connected_) {
      // The index's sequence rule has judged this message against the last
      // one: continuous (kept), or a gap / restart (cleared). Either way
      // what the index now holds follows the live stream.
      trusted_ = true;
      return;
    }
    // A message without a live connection in view (its handshake event not
    // read yet): it adds contents but proves nothing. If the stale clear has
    // already happened, those new contents need a deadline of their own.
    if (stale_handled_) {
      stale_handled_ = false;
      doubt_since_ = now;
    }
  }

  void CheckStale(Clock::time_point now) {
    if (trusted_ || stale_handled_) return;
    if (now - doubt_since_ < std::chrono::milliseconds(options_.stale_after_ms)) return;
    stale_handled_ = true;
    // Without a cursor the index holds nothing a dead publisher could have
    // left behind (every batch sets it, every clear resets it).
    if (!index_.GetStats().has_sequence) return;
    index_.Clear();
    Logf(LogLevel::kWarn, "subscriber %s: %s for %d ms; index cleared, it answers miss until new messages arrive",
         endpoint_for_logs_, connected_ ? "no message since reconnecting" : "disconnected",
         options_.stale_after_ms);
  }

  // The thread cannot go on: the index will never be updated again, so it
  // must not keep answering from what it has.
  void Abandon(const char* why) {
    try {
      index_.Clear();
    } catch (...) {
      // Clear does not allocate; nothing sensible to do if it throws.
    }
    Logf(LogLevel::kError, "subscriber %s: stopped on an error (%s); index cleared", endpoint_for_logs_, why);
  }

  // The thread's share of the index (empty when the caller keeps it alive),
  // so that a thread stopped from its own callback can finish its step.
  const std::shared_ptr<Index> index_share_;
  Index& index_;
  const SubscriberOptions options_;
  const std::string endpoint_for_logs_;

  // Declared before the sockets: destroyed after them, once they are closed.
  zmq::context_t context_;
  zmq::socket_t data_;
  zmq::socket_t monitor_;

  // ---- owned by the thread once it runs ----
  bool owned_by_thread_ = false;  // set by a Stop() on this thread
  bool connected_ = false;      // a handshake succeeded and no disconnect since
  bool trusted_ = false;        // connected_, and a message applied on this connection
  bool stale_handled_ = false;  // the doubt since doubt_since_ already led to a clear (or nothing to clear)
  Clock::time_point doubt_since_{};
  std::vector<zmq::message_t> frames_;
  std::vector<std::span<const uint8_t>> spans_;
  DecodedMessage scratch_;
  std::string error_;
};

std::unique_ptr<Subscriber> Subscriber::Start(Index& index, const SubscriberOptions& options,
                                              SubscriberError* code, std::string* error) {
  // Aliasing an empty owner: a pointer to `index` that owns nothing.
  return Start(std::shared_ptr<Index>(std::shared_ptr<Index>(), &index), options, code, error);
}

std::unique_ptr<Subscriber> Subscriber::Start(std::shared_ptr<Index> index, const SubscriberOptions& options,
                                              SubscriberError* code, std::string* error) {
  *code = SubscriberError::kInvalidArgument;
  if (options.endpoint.empty()) {
    *error = "endpoint is empty";
    return nullptr;
  }
  if (options.endpoint.find('\0') != std::string::npos) {
    *error = absl::StrFormat("endpoint \"%s\" contains a NUL byte", absl::CHexEscape(options.endpoint));
    return nullptr;
  }
  if (options.reconnect_ms == 0) {
    *error = "reconnect_ms is 0";
    return nullptr;
  }
  for (const auto& [name, value] : {std::pair{"reconnect_ms", options.reconnect_ms},
                                    std::pair{"reconnect_max_ms", options.reconnect_max_ms},
                                    std::pair{"stale_after_ms", options.stale_after_ms}}) {
    if (!FitsInt(value)) {
      *error = absl::StrFormat("%s %d is too large (at most %d)", name, value, INT_MAX);
      return nullptr;
    }
  }
  if (options.receive_hwm < 0) {
    *error = absl::StrFormat("receive_hwm %d is negative", options.receive_hwm);
    return nullptr;
  }

  *code = SubscriberError::kIo;
  try {
    auto loop = std::make_unique<Loop>(std::move(index), options);
    if (!loop->Connect(code, error)) return nullptr;
    std::unique_ptr<Subscriber> subscriber(new Subscriber(std::move(loop)));
    // The sockets move to the new thread; starting it is the memory barrier
    // ZeroMQ asks for when a socket changes threads.
    subscriber->thread_ = std::thread([loop = subscriber->loop_.get()] {
      loop->Run();
      if (loop->owned_by_thread()) delete loop;
    });
    *code = SubscriberError::kNone;
    return subscriber;
  } catch (const zmq::error_t& e) {
    *error = absl::StrFormat("cannot set up the ZeroMQ socket: %s", e.what());
  } catch (const std::system_error& e) {
    *error = absl::StrFormat("cannot start the subscriber thread: %s", e.what());
  }
  return nullptr;
}

Subscriber::Subscriber(std::unique_ptr<Loop> loop) : loop_(std::move(loop)) {}

Subscriber::~Subscriber() { Stop(); }

void Subscriber::Stop() {
  if (loop_ == nullptr) return;
  loop_->Wake();
  if (thread_.get_id() == std::this_thread::get_id()) {
    // From a callback on the subscriber's own thread: see the header.
    loop_->HandOverToThread();
    (void)loop_.release();
    thread_.detach();
    return;
  }
  if (thread_.joinable()) thread_.join();
  loop_.reset();  // closes the sockets (linger 0), then terminates the context
}

}  // namespace sci
