#include "feed/subscriber.h"

#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <mutex>
#include <optional>
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
#include "common/format.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "common/log.h"
#include "feed/endpoint_syntax.h"
#include "feed/etcd_view.h"
#include "feed/leader_follower.h"
#include "feed/redis_view.h"
#include "feed/resync.h"
#include "feed/tail_watch.h"
#include "feed/stuck_report.h"
#include "feed/wake_signal.h"
#include "wire/message_apply.h"
#include "wire/wire_decoder.h"

namespace sci {
namespace {

using Clock = std::chrono::steady_clock;

// Each subscriber has its own context, so these names never clash; a
// retarget opens a new socket with a new monitor, hence the number.
constexpr char kMonitorEndpointFormat[] = "inproc://sci-subscriber-monitor-%d";

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
// The pause after a failure the loop recovers from (RecoverFrom): long
// enough not to spin on a failure that repeats, short against a resync.
constexpr int kFailurePauseMs = 100;

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

// Whether `url` can be a snapshot URL: http:// or https://, no NUL, space or
// control character (libcurl would reject some, misread others).
bool IsHttpUrl(const std::string& url) {
  if (!absl::StartsWithIgnoreCase(url, "http://") && !absl::StartsWithIgnoreCase(url, "https://")) return false;
  for (unsigned char c : url) {
    if (c <= ' ' || c == 0x7f) return false;
  }
  return true;
}

std::string CheckSnapshotUrl(const char* name, const std::string& url) {
  if (url.empty() || IsHttpUrl(url)) return {};
  return sci::StrFormat("%s \"%s\" is not an http:// or https:// URL", name, absl::CHexEscape(url));
}

std::string CheckEndpoint(const std::string& endpoint) {
  return CheckEndpointSyntax("endpoint", endpoint, EndpointUse::kConnect);
}

// What a leader view means for the subscriber: its event stream and its
// snapshot (docs/wire-formats.md, section 4: the view names the RPC port
// only; the other services listen on the leader's host at known ports).
std::string LeaderEndpoint(const std::string& host, uint32_t event_port) {
  return sci::StrFormat("tcp://%s:%d", host, event_port);
}
std::string LeaderSnapshotUrl(const std::string& host, uint32_t admin_port) {
  return sci::StrFormat("http://%s:%d/get_all_keys", host, admin_port);
}

// How long one read of the leader view may take (etcd or Redis): a small
// multiple of the poll, so an unreachable store is noticed within seconds.
constexpr uint32_t kViewRequestTimeoutMs = 2000;

bool FollowsLeader(const SubscriberOptions& options) {
  return !options.etcd_endpoints.empty() || !options.redis_endpoint.empty();
}

// The store the leader view is read from (CheckOptions has vetted it).
std::unique_ptr<LeaderViewSource> MakeLeaderViewSource(const SubscriberOptions& options) {
  if (!options.redis_endpoint.empty()) {
    RedisAddress address;
    std::string ignored;
    (void)ParseRedisUrl(options.redis_endpoint, &address, &ignored);
    return std::make_unique<RedisViewSource>(std::move(address), options.cluster_id,
                                             std::chrono::milliseconds(kViewRequestTimeoutMs));
  }
  return std::make_unique<EtcdViewSource>(options.etcd_endpoints, options.cluster_id, kViewRequestTimeoutMs,
                                          options.proxy_from_env);
}

// Bytes from the wire, printable in a log line.
std::string EscapedForLogs(std::string_view bytes) {
  return absl::CHexEscape(absl::string_view(bytes.data(), bytes.size()));
}

TailWatchOptions TailWatchOptionsOf(const SubscriberOptions& options) {
  TailWatchOptions t;
  t.status_url = options.status_url;
  t.poll_ms = options.status_poll_ms;
  t.proxy_from_env = options.proxy_from_env;
  return t;
}

ResyncOptions ResyncOptionsOf(const SubscriberOptions& options) {
  ResyncOptions r;
  r.snapshot_url = options.snapshot_url;
  r.min_interval_ms = options.resync_min_interval_ms;
  r.timeout_ms = options.snapshot_timeout_ms;
  r.buffer_bytes = options.resync_buffer_bytes;
  r.spill_bytes = options.resync_spill_bytes;
  r.spill_dir = options.resync_spill_dir;
  r.catch_up_ms = options.resync_catch_up_ms;
  r.catch_up_max_ms = options.resync_catch_up_max_ms;
  r.status_url = options.status_url;
  r.read_status = options.status_poll_ms != TailWatchOptions::kNever;
  r.proxy_from_env = options.proxy_from_env;
  return r;
}

}  // namespace

std::vector<std::string> SplitEndpointList(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    while (!item.empty() && absl::ascii_isspace(static_cast<unsigned char>(item.front()))) item.remove_prefix(1);
    while (!item.empty() && absl::ascii_isspace(static_cast<unsigned char>(item.back()))) item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
  }
  return out;
}

class Subscriber::Loop {
 public:
  Loop(std::shared_ptr<Index> index, const SubscriberOptions& options)
      : index_share_(std::move(index)),
        index_(*index_share_),
        options_(options),
        endpoint_for_logs_(absl::CHexEscape(options.endpoint)),
        current_endpoint_(options.endpoint),
        context_(1),
        resync_(index_, ResyncOptionsOf(options), wake_),
        tail_watch_(TailWatchOptionsOf(options), options.snapshot_url, wake_),
        stuck_(std::chrono::milliseconds(options.stale_after_ms)) {}

  // Configures and connects the SUB socket on the caller's thread. Without
  // an endpoint (etcd following, before the first view) there is no socket
  // until a retarget brings one.
  bool Connect(SubscriberError* code, std::string* error) {
    if (!options_.endpoint.empty() && !OpenSocket(options_.endpoint, code, error)) return false;
    // Start-up: the pool's objects are not in the index yet. Held from
    // here, so that no query after Start() returns sees a stale state.
    resync_.Begin(Clock::now());
    return true;
  }

  // Disposes of the follower first: it calls into this loop.
  ~Loop() { LeaderFollower::Dispose(std::move(follower_)); }

  // HA following: a thread of its own polls the leader view and retargets
  // this loop on every change. Called once, by Start(), after Run() began.
  void FollowLeader(const SubscriberOptions& options) {
    const uint32_t event_port = options.event_port;
    const uint32_t admin_port = options.admin_port;
    follower_ = std::make_unique<LeaderFollower>(
        index_share_, index_, MakeLeaderViewSource(options), options.etcd_poll_ms,
        [this, event_port, admin_port](const LeaderView& view) {
          std::string why;
          const SubscriberError code =
              Retarget(LeaderEndpoint(view.host, event_port), LeaderSnapshotUrl(view.host, admin_port), &why);
          // kIo: the subscriber is stopping; nothing to say.
          if (code == SubscriberError::kInvalidArgument) {
            Logf(LogLevel::kWarn, "leader view: cannot follow %s: %s", absl::CHexEscape(view.address), why);
          }
          // Out of memory part-way: the follower asks again at its next poll.
          return code != SubscriberError::kNoMemory;
        });
  }

  // Asks the follower to stop polling (it finishes on its own thread).
  void StopFollowing() {
    if (follower_ != nullptr) follower_->RequestStop();
  }

  // Any thread but the loop's: hands a retarget to the loop's thread and
  // waits for its outcome.
  SubscriberError Retarget(std::string endpoint, std::string snapshot_url, std::string* error) {
    std::unique_lock<std::mutex> lock(retarget_mu_);
    if (!running_) {
      *error = "the subscriber is stopped";
      return SubscriberError::kIo;
    }
    const uint64_t ticket = ++retarget_requested_;
    pending_retarget_ = PendingRetarget{std::move(endpoint), std::move(snapshot_url)};
    wake_.Notify();
    retarget_done_.wait(lock, [&] { return retarget_completed_ >= ticket || !running_; });
    if (retarget_completed_ < ticket) {
      *error = "the subscriber stopped before the retarget";
      return SubscriberError::kIo;
    }
    *error = retarget_error_;
    return retarget_code_;
  }

  // The thread's body. Returns when Wake() is called (or on a fatal socket
  // error, after clearing the index it can no longer keep current).
  void Run() noexcept {
    try {
      // A query asking for a page's adoption (index.h) wakes the thread,
      // which adopts it at once, however quiet the stream.
      index_.SetAdoptionListener([this] { wake_.Notify(); });
      ServeThroughFailures();
    } catch (const zmq::error_t& e) {
      if (e.num() != ETERM) Abandon(e.what());
    } catch (const std::exception& e) {
      Abandon(e.what());
    } catch (...) {
      Abandon("unknown exception");
    }
    try {
      index_.SetAdoptionListener(nullptr);  // the wake-up goes with the thread
      resync_.SetUrls({}, {});  // stops a download; a stopped subscriber resyncs nothing
    } catch (...) {
    }
    index_.counters().subscriber_connected.Set(false);
    {
      std::lock_guard<std::mutex> lock(retarget_mu_);
      running_ = false;
    }
    retarget_done_.notify_all();
  }

  // Called from the stopping thread: every blocking call of this context,
  // zmq_poll included, returns ETERM. A zmq_poll with no socket yet (HA
  // following before the first leader view) watches only the wake-up fd,
  // which does not see the context end: hence the flag and the signal.
  void Wake() {
    stop_requested_.store(true, std::memory_order_release);
    zmq_ctx_shutdown(context_.handle());
    wake_.Notify();
  }

  // Stop() was called from this thread, which cannot join itself: the thread
  // deletes the loop when Run() returns.
  void HandOverToThread() { owned_by_thread_ = true; }
  bool owned_by_thread() const { return owned_by_thread_; }

 private:
  void Serve() {
    doubt_since_ = Clock::now();  // nothing has proved the index's contents yet
    last_message_at_ = doubt_since_;
    seen_clear_epoch_ = index_.clear_epoch();
    while (true) {
      // A disconnect's new socket that could not be made yet (out of memory).
      if (reopen_pending_) ReopenAfterDisconnect();
      // Before sleeping: the sleep must end in time for a warning that is due.
      stuck_.Update(Clock::now(), StateForReport(), endpoint_for_logs_);
      zmq_pollitem_t items[] = {{nullptr, wake_.fd(), ZMQ_POLLIN, 0},
                                {data_.handle(), 0, ZMQ_POLLIN, 0},
                                {monitor_.handle(), 0, ZMQ_POLLIN, 0}};
      const int n_items = data_.handle() != nullptr ? 3 : 1;
      const Clock::time_point before_sleep = Clock::now();
      const long timeout_ms = tail_watch_.PollTimeoutMs(resync_.PollTimeoutMs(PollTimeoutMs(), before_sleep),
                                                        before_sleep, WatchingTail(), last_message_at_);
      if (zmq_poll(items, n_items, timeout_ms) < 0) {
        if (zmq_errno() == EINTR) continue;
        throw zmq::error_t();  // ETERM: Stop() was called
      }
      if (items[0].revents & ZMQ_POLLIN) {
        wake_.Reset();
        if (stop_requested_.load(std::memory_order_acquire)) return;
        TakeRetarget();
        PollResync();
      }
      if (n_items == 3 && data_.handle() != nullptr) {
        // Monitor first: the handshake event of a connection is emitted
        // before any of its messages, so a message is never judged against a
        // stale idea of the connection.
        if (items[2].revents & ZMQ_POLLIN) DrainMonitor();
        // (After a disconnect the socket polled may have been replaced:
        // the new one is read at the next turn.)
        if ((items[1].revents & ZMQ_POLLIN) && !reopen_pending_) DrainData(kMaxMessagesPerWake);
      }
      CheckStale(Clock::now());
      // Batches the master sent that never came (their removals lost) clear
      // the index there; a resync follows below.
      tail_watch_.Poll(Clock::now(), WatchingTail(), last_message_at_, index_);
      ResyncIfCleared(Clock::now());
      // A download due (its back-off over) starts here, message or not.
      PollResync();
      index_.AdoptRequestedGroups();  // what queries asked since the last message (index.h, "Adoption")
    }
  }

  // Opens a new SUB socket (and its monitor) connected to `endpoint`, in
  // place of the current one. On failure the current one stays.
  bool OpenSocket(const std::string& endpoint, SubscriberError* code, std::string* error) {
    // Everything the switch needs is made before any socket: memory running
    // out never strands a socket connected and then thrown away (a retry's
    // connection to the same publisher was seen not to complete after one).
    std::string for_logs = absl::CHexEscape(endpoint);
    const std::string monitor_endpoint = sci::StrFormat(kMonitorEndpointFormat, sockets_opened_ + 1);
    zmq::socket_t data(context_, zmq::socket_type::sub);
    zmq::socket_t monitor(context_, zmq::socket_type::pair);
    const int heartbeat_ms = HeartbeatIntervalMs(options_.stale_after_ms);
    data.set(zmq::sockopt::linger, 0);
    data.set(zmq::sockopt::rcvhwm, options_.receive_hwm);
    data.set(zmq::sockopt::maxmsgsize, kMaxMessageBytes);
    data.set(zmq::sockopt::reconnect_ivl, static_cast<int>(options_.reconnect_ms));
    data.set(zmq::sockopt::reconnect_ivl_max, static_cast<int>(options_.reconnect_max_ms));
    data.set(zmq::sockopt::heartbeat_ivl, heartbeat_ms);
    data.set(zmq::sockopt::heartbeat_timeout, 3 * heartbeat_ms);
    data.set(zmq::sockopt::subscribe, options_.topic);
    // The monitor must exist before the connect, or the first handshake
    // could go unseen.
    ++sockets_opened_;
    if (zmq_socket_monitor(data.handle(), monitor_endpoint.c_str(), kMonitoredEvents) != 0) throw zmq::error_t();
    monitor.set(zmq::sockopt::linger, 0);
    monitor.connect(monitor_endpoint);
    if (zmq_connect(data.handle(), endpoint.c_str()) != 0) {
      const int err = zmq_errno();
      *code = IsEndpointError(err) ? SubscriberError::kInvalidArgument : SubscriberError::kIo;
      *error = sci::StrFormat("endpoint \"%s\": ZeroMQ cannot connect to it (%s)", absl::CHexEscape(endpoint),
                               zmq_strerror(err));
      return false;
    }
    data_ = std::move(data);  // closes the old socket (linger 0): its queued messages go with it
    monitor_ = std::move(monitor);
    endpoint_for_logs_ = std::move(for_logs);
    return true;
  }

  struct PendingRetarget {
    std::string endpoint;
    std::string snapshot_url;
  };

  // On the loop's thread: performs a retarget Retarget() handed over.
  void TakeRetarget() {
    std::optional<PendingRetarget> request;
    uint64_t ticket = 0;
    {
      std::lock_guard<std::mutex> lock(retarget_mu_);
      request.swap(pending_retarget_);
      ticket = retarget_requested_;
    }
    if (!request) return;
    // Whatever happens, the caller hears of it: it waits for this ticket
    // (1.2 left it waiting for ever when memory ran out here).
    std::string error;
    bool switched = false;
    SubscriberError code = SubscriberError::kNoMemory;
    try {
      code = SwitchTo(*request, &error, &switched);
    } catch (const std::bad_alloc&) {
      // If the socket already follows the new leader, nothing of the old
      // one may be resynced into it: no snapshot until the caller retries.
      if (switched) {
        resync_.SetUrls({}, {});
        tail_watch_.SetStatusUrl({});
      }
      CompleteRetarget(ticket, SubscriberError::kNoMemory, {});
      throw;  // the loop's recovery: the index cleared, the failure counted
    }
    CompleteRetarget(ticket, code, std::move(error));
  }

  // Follows `request`'s publisher in place of the current one. Everything
  // that allocates comes before the switch (*switched), so that memory
  // running out leaves the old leader followed whole; after it nothing
  // allocates but the log line.
  SubscriberError SwitchTo(PendingRetarget& request, std::string* error, bool* switched) {
    // Beside the new snapshot, never a configured one: that names the
    // first master's admin server (1.3 kept reading it, and the new
    // master's catch-up never ended).
    std::string status_url = StatusUrlBeside(request.snapshot_url);
    std::string resync_status_url = status_url;
    const std::string snapshot_for_logs =
        request.snapshot_url.empty() ? std::string("none") : absl::CHexEscape(request.snapshot_url);
    SubscriberError code = SubscriberError::kNone;
    if (!OpenSocket(request.endpoint, &code, error)) return code;
    *switched = true;
    if (connected_) {
      connected_ = false;
      index_.counters().subscriber_connected.Set(false);
    }
    trusted_ = false;
    stale_handled_ = false;
    doubt_since_ = Clock::now();
    // A new publisher is a new sequence space: what the index holds came
    // from the old one. Clear, then resync from the new snapshot.
    current_endpoint_.swap(request.endpoint);
    resync_.SetUrls(std::move(request.snapshot_url), std::move(resync_status_url));
    tail_watch_.SetStatusUrl(std::move(status_url));
    if (resync_.enabled()) {
      resync_.Begin(doubt_since_);
    } else {
      index_.Clear();
    }
    seen_clear_epoch_ = index_.clear_epoch();
    try {
      Logf(LogLevel::kInfo, "subscriber: retargeted to %s (snapshot %s)", endpoint_for_logs_, snapshot_for_logs);
    } catch (const std::bad_alloc&) {
      // The retarget is done; only its log line is lost.
    }
    return SubscriberError::kNone;
  }

  // Hands a retarget's outcome to the caller waiting for `ticket`;
  // allocates nothing (the error is moved).
  void CompleteRetarget(uint64_t ticket, SubscriberError code, std::string error) noexcept {
    {
      std::lock_guard<std::mutex> lock(retarget_mu_);
      retarget_code_ = code;
      retarget_error_ = std::move(error);
      retarget_completed_ = ticket;
    }
    retarget_done_.notify_all();
  }

  // Moves the resync on (resync.h). Before its replay, every message the
  // socket already holds is buffered: a message left queued would be
  // applied after the hold ends, older than the snapshot it follows.
  void PollResync() {
    if (resync_.ReplayDue(Clock::now()) && data_.handle() != nullptr && !reopen_pending_) {
      DrainData(options_.receive_hwm > 0 ? options_.receive_hwm : -1);
    }
    if (resync_.Poll(Clock::now())) OnResynced(Clock::now());
  }

  // After anything that may have cleared the index (a gap, an all-cleared
  // event, the stale rule, sci_index_clear): refill it from the snapshot.
  void ResyncIfCleared(Clock::time_point now) {
    const uint64_t epoch = index_.clear_epoch();
    if (epoch == seen_clear_epoch_) return;
    seen_clear_epoch_ = epoch;
    // trusted_: the batch that made it came on this connection, which
    // proves the subscription live (the download needs no further message).
    if (resync_.enabled() && !resync_.active()) resync_.BeginAfterClear(now, trusted_);
  }

  // The index serves again, as of the last buffered message.
  void OnResynced(Clock::time_point now) {
    seen_clear_epoch_ = index_.clear_epoch();
    // A reconnect during the download with no message since: a loss on the
    // new connection would go unseen; the stale rule decides.
    if (connected_ && resync_.live()) {
      trusted_ = true;
    } else {
      trusted_ = false;
      stale_handled_ = false;
      doubt_since_ = now;
    }
  }

  // Until the doubt deadline while the stream is untrusted, else forever:
  // the thread sleeps in zmq_poll and only wakes for a message, a connection
  // change, the deadline, Stop() or a page to adopt.
  long PollTimeoutMs() const {
    std::optional<Clock::time_point> deadline = stuck_.deadline();
    if (!(trusted_ || stale_handled_ || resync_.active())) {
      const Clock::time_point stale_at = doubt_since_ + std::chrono::milliseconds(options_.stale_after_ms);
      if (!deadline || stale_at < *deadline) deadline = stale_at;
    }
    if (!deadline) return -1;
    const auto left = *deadline - Clock::now();
    if (left <= Clock::duration::zero()) return 0;
    // Rounded up, so that the wake-up is never just before the deadline.
    return static_cast<long>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
  }

  SubscriberState StateForReport() const {
    SubscriberState state;
    state.has_endpoint = data_.handle() != nullptr;
    state.connected = connected_;
    state.resync_waiting = resync_.waiting_for_first_message();
    return state;
  }

  void DrainMonitor() {
    while (true) {
      zmq::message_t event;
      if (!monitor_.recv(event, zmq::recv_flags::dontwait)) return;
      // The endpoint frame, kept as received: an event taken off the monitor
      // is acted on without allocating first, or it would be lost to a
      // failed allocation (a connection never marked up, or never down).
      zmq::message_t endpoint;
      bool more = event.more();
      for (bool first = true; more; first = false) {  // (and anything a future libzmq adds)
        zmq::message_t part;
        (void)monitor_.recv(part);
        more = part.more();
        if (first) endpoint = std::move(part);
      }
      const std::string_view address = endpoint.to_string_view();
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

  // Whether a loss at the stream's tail is worth looking for: the stream is
  // followed and trusted, and holds what the index answers from.
  bool WatchingTail() const { return connected_ && trusted_ && !resync_.active(); }

  void ApplyReceived(size_t n_frames) {
    last_message_at_ = Clock::now();
    if (resync_.active()) {
      // Held for the resync (buffered, bounded).
      index_.counters().messages_received.Add();
      resync_.OnMessage(std::span<zmq::message_t>(frames_.data(), n_frames), Clock::now());
      return;
    }
    // A resync released before its anchor: this batch may be it.
    if (resync_.withholding()) resync_.OnLiveBatch(std::span<zmq::message_t>(frames_.data(), n_frames), Clock::now());
    bool applied = false;
    bool spans_made = false;
    try {
      spans_.clear();
      for (size_t i = 0; i < n_frames; ++i) {
        spans_.emplace_back(static_cast<const uint8_t*>(frames_[i].data()), frames_[i].size());
      }
      spans_made = true;
      // Malformed messages are counted and logged by ApplyMessage and
      // change nothing; they prove nothing about the stream either.
      applied = ApplyMessage(index_, spans_, scratch_, &error_);
    } catch (const std::bad_alloc&) {
      // The message is lost, and with it whatever it removed. ApplyMessage
      // has cleared the index (whether decoding, logging or applying
      // failed); if the frames' spans could not even be made, it is done
      // here. Keep listening: the next batch starts afresh.
      if (!spans_made) index_.Clear();
      Logf(LogLevel::kError, "subscriber %s: out of memory applying a message; index cleared", endpoint_for_logs_);
    }
    if (applied) OnMessageApplied(Clock::now());
    // Counted once the message has been dealt with, so that whoever sees
    // the count sees what the message did to the index (tests wait on it).
    index_.counters().messages_received.Add();
  }

  void OnConnected(std::string_view address) {
    if (connected_) return;
    connected_ = true;
    index_.counters().subscriber_connected.Set(true);
    index_.counters().subscriber_connects.Add();
    // Not trusted yet: the first message on this connection must show that
    // nothing was lost while we were away.
    Logf(LogLevel::kInfo, "subscriber %s: connected to %s", endpoint_for_logs_, EscapedForLogs(address));
  }

  void OnDisconnected(std::string_view address) {
    if (!connected_) return;  // a connection that never completed its handshake
    if (options_.reconnect_policy == ReconnectPolicy::kResync) {
      // Whatever is queued may be the old publisher's or, after a quick
      // reconnect, a restarted one's: one queue, no boundary. None of it is
      // applied; the socket goes with it.
      MarkDisconnected();
      reopen_pending_ = true;
      Logf(LogLevel::kWarn,
           "subscriber %s: disconnected from %s; a publisher restart behind it cannot be ruled out: index cleared, "
           "reconnecting on a new socket%s (reconnect_policy resync)",
           endpoint_for_logs_, EscapedForLogs(address), resync_.enabled() ? " and resyncing" : "");
      ReopenAfterDisconnect();
      return;
    }
    // What is queued arrived before the disconnect: apply it while the
    // connection it came on still counts, so it cannot be mistaken later for
    // a message proving the next connection. If that fails, the connection
    // is still marked down before the failure goes on to the loop.
    try {
      DrainData(-1);
    } catch (...) {
      MarkDisconnected();
      throw;
    }
    MarkDisconnected();
    Logf(LogLevel::kWarn, "subscriber %s: disconnected from %s; index cleared if not back within %d ms",
         endpoint_for_logs_, EscapedForLogs(address), options_.stale_after_ms);
  }

  // ReconnectPolicy::kResync, after a disconnect: a new socket to the same
  // endpoint (the old one's queue dropped with it), the index cleared, a
  // resync started over. Retried at the loop's next turn if memory is short.
  void ReopenAfterDisconnect() {
    SubscriberError code = SubscriberError::kNone;
    std::string error;
    if (!OpenSocket(current_endpoint_, &code, &error)) {
      // It connected before: ZeroMQ refusing it now is not expected. The
      // old socket stays, unread, and the index cleared; retried.
      Logf(LogLevel::kError, "subscriber %s: cannot reconnect: %s", endpoint_for_logs_, error);
    } else {
      reopen_pending_ = false;
    }
    if (resync_.active()) {
      resync_.Begin(Clock::now());  // what it buffered may be the old publisher's
    } else {
      index_.Clear();  // ResyncIfCleared starts the resync
    }
    index_.counters().disconnect_clears.Add();  // after the clear: whoever sees it sees the index cleared
  }

  // Allocates nothing.
  void MarkDisconnected() {
    resync_.OnConnectionLost();
    // A publisher restarted meanwhile could resume at our cursor + 1: the
    // next batch must show it is the same one (Index::RequireEventContinuity).
    index_.RequireEventContinuity();
    connected_ = false;
    index_.counters().subscriber_connected.Set(false);
    index_.counters().subscriber_disconnects.Add();
    if (trusted_) {
      trusted_ = false;
      stale_handled_ = false;
      doubt_since_ = Clock::now();
    }
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
    // A resync under way holds the index empty; its outcome decides trust.
    if (trusted_ || stale_handled_ || resync_.active()) return;
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

  // A failure the loop cannot recover from (a socket error): the index can
  // no longer be kept current, so it is emptied, and the stop is counted
  // and logged at error level for the caller to see.
  void Abandon(const char* why) {
    try {
      index_.Clear();
    } catch (...) {
      // Clear does not allocate; nothing sensible to do if it throws.
    }
    index_.counters().subscriber_failures.Add();
    try {
      Logf(LogLevel::kError, "subscriber %s: stopped on an error (%s); index cleared; nothing is applied any more",
           endpoint_for_logs_, why);
    } catch (...) {
    }
  }

  // Serve(), resumed after every failure that memory coming back can cure
  // (issue #34, R6): an allocation anywhere in the loop (decoding, the
  // resync buffer, its spill file, a replay), or a download thread that
  // cannot be created. Such a failure costs the index (what it held may
  // miss the message that failed) and a resync, never the subscriber:
  // abandoning it would leave every query missing for good while its stats
  // looked quiet. Socket errors and Stop() still end the loop.
  void ServeThroughFailures() {
    while (true) {
      const char* what = nullptr;
      try {
        Serve();
        return;
      } catch (const std::bad_alloc&) {
        what = "out of memory";
      } catch (const zmq::error_t&) {
        throw;
      } catch (const std::system_error& e) {
        // std::thread's failure to start a download: a resource, not a bug.
        if (e.code() != std::errc::resource_unavailable_try_again) throw;
        what = "cannot start a thread";
      }
      if (!RecoverFrom(what)) return;  // Stop() came during the pause
    }
  }

  // Empties the index, starts a resync (if configured) and pauses briefly,
  // so that a failure that repeats does not spin the thread. False when
  // Stop() was asked meanwhile.
  bool RecoverFrom(const char* what) noexcept {
    const Clock::time_point now = Clock::now();
    index_.Clear();  // frees, allocates nothing
    index_.counters().subscriber_failures.Add();  // after the clear: whoever sees it sees the index empty
    try {
      // A resync under way fails (counted, back-off); otherwise one begins.
      resync_.RestartAfterFailure(now);
    } catch (...) {
      // Memory is still short (Fail's message): the index is empty already,
      // and held if a resync was under way.
    }
    seen_clear_epoch_ = index_.clear_epoch();
    try {
      Logf(LogLevel::kError, "subscriber %s: %s; index cleared, resuming in %d ms", endpoint_for_logs_, what,
           kFailurePauseMs);
    } catch (...) {
    }
    zmq_pollitem_t wake[] = {{nullptr, wake_.fd(), ZMQ_POLLIN, 0}};
    (void)zmq_poll(wake, 1, kFailurePauseMs);
    return !stop_requested_.load(std::memory_order_acquire);
  }

  // The thread's share of the index (empty when the caller keeps it alive),
  // so that a thread stopped from its own callback can finish its step.
  const std::shared_ptr<Index> index_share_;
  Index& index_;
  const SubscriberOptions options_;
  std::string endpoint_for_logs_;  // changes on a retarget (the loop's thread only, once it runs)
  std::string current_endpoint_;   // likewise: what a socket reopened after a disconnect connects to

  WakeSignal wake_;
  // Declared before the sockets: destroyed after them, once they are closed.
  zmq::context_t context_;
  zmq::socket_t data_;     // null until the first endpoint is known
  zmq::socket_t monitor_;
  int sockets_opened_ = 0;
  Resync resync_;  // after wake_ and the index: stops its download first when destroyed
  TailWatch tail_watch_;  // likewise: cancels a status read in flight
  Clock::time_point last_message_at_{};  // any message received (the stream's quiet, for tail_watch_)
  StuckReport stuck_;  // the thread's own

  // ---- shared with Retarget() callers ----
  std::mutex retarget_mu_;
  std::condition_variable retarget_done_;
  bool running_ = true;
  std::optional<PendingRetarget> pending_retarget_;
  uint64_t retarget_requested_ = 0;
  uint64_t retarget_completed_ = 0;
  SubscriberError retarget_code_ = SubscriberError::kNone;
  std::string retarget_error_;

  std::atomic<bool> stop_requested_{false};  // see Wake()

  // Last: destroyed (joined) first, since it calls Retarget().
  std::unique_ptr<LeaderFollower> follower_;

  // ---- owned by the thread once it runs ----
  bool owned_by_thread_ = false;  // set by a Stop() on this thread
  bool connected_ = false;      // a handshake succeeded and no disconnect since
  bool trusted_ = false;        // connected_, and a message applied on this connection
  bool stale_handled_ = false;  // the doubt since doubt_since_ already led to a clear (or nothing to clear)
  uint64_t seen_clear_epoch_ = 0;  // Index::clear_epoch() as last looked at (see ResyncIfCleared)
  // A disconnect under ReconnectPolicy::kResync whose socket is still to be
  // replaced: nothing is read from the old one meanwhile (OnDisconnected).
  bool reopen_pending_ = false;
  Clock::time_point doubt_since_{};
  std::vector<zmq::message_t> frames_;
  std::vector<std::span<const uint8_t>> spans_;
  DecodedMessage scratch_;
  std::string error_;
};

namespace {

// Checks every option; an empty string when they can work, else a message
// naming the first one that cannot.
std::string CheckOptions(const SubscriberOptions& options) {
  if (!options.etcd_endpoints.empty() && !options.redis_endpoint.empty()) {
    return "redis_endpoint and etcd_endpoints are mutually exclusive: the leader view is read from one store";
  }
  if (FollowsLeader(options)) {
    const bool redis = !options.redis_endpoint.empty();
    const char* store_option = redis ? "redis_endpoint" : "etcd_endpoints";
    if (!options.endpoint.empty()) {
      return sci::StrFormat("endpoint \"%s\" must be empty with %s: the leader's address comes from %s",
                             absl::CHexEscape(options.endpoint), store_option, redis ? "Redis" : "etcd");
    }
    if (!options.snapshot_url.empty()) {
      return sci::StrFormat(
          "snapshot_url must be empty with %s: it is the leader's http://<ip>:<admin_port>/get_all_keys",
          store_option);
    }
    if (!options.status_url.empty()) {
      return sci::StrFormat(
          "status_url must be empty with %s: it is the leader's http://<ip>:<admin_port>/kv_events/status",
          store_option);
    }
    for (const std::string& e : options.etcd_endpoints) {
      if (!IsHttpUrl(e)) {
        return sci::StrFormat("etcd_endpoints: \"%s\" is not an http:// or https:// URL", absl::CHexEscape(e));
      }
    }
    if (redis) {
      RedisAddress address;
      std::string why;
      if (!ParseRedisUrl(options.redis_endpoint, &address, &why)) {
        // Never quoted whole: the URL may hold a password.
        return sci::StrFormat("redis_endpoint: %s (redis://[:password@]host:port[/db])", why);
      }
    }
    if (options.cluster_id.empty()) return "cluster_id is empty";
    for (unsigned char c : options.cluster_id) {
      if (c <= ' ' || c == 0x7f) {
        return sci::StrFormat("cluster_id \"%s\" contains a space or control character",
                               absl::CHexEscape(options.cluster_id));
      }
    }
    if (options.event_port == 0 || options.event_port > 65535) {
      return sci::StrFormat("event_port %d is not a port (1..65535; required with %s)", options.event_port,
                             store_option);
    }
    if (options.admin_port == 0 || options.admin_port > 65535) {
      return sci::StrFormat("admin_port %d is not a port (1..65535)", options.admin_port);
    }
    if (options.etcd_poll_ms == 0 || !FitsInt(options.etcd_poll_ms)) {
      return sci::StrFormat("etcd_poll_ms %d is out of range", options.etcd_poll_ms);
    }
  } else if (std::string e = CheckEndpoint(options.endpoint); !e.empty()) {
    return e;
  }
  if (std::string e = CheckSnapshotUrl("snapshot_url", options.snapshot_url); !e.empty()) return e;
  if (std::string e = CheckSnapshotUrl("status_url", options.status_url); !e.empty()) return e;
  if (options.status_poll_ms == 0) return "status_poll_ms is 0 (UINT32_MAX: never read the status)";
  if (options.status_poll_ms != UINT32_MAX && !FitsInt(options.status_poll_ms)) {
    return sci::StrFormat("status_poll_ms %d is too large (at most %d, or UINT32_MAX for never)",
                          options.status_poll_ms, INT_MAX);
  }
  if (options.reconnect_ms == 0) return "reconnect_ms is 0";
  for (const auto& [name, value] : {std::pair{"reconnect_ms", options.reconnect_ms},
                                    std::pair{"reconnect_max_ms", options.reconnect_max_ms},
                                    std::pair{"stale_after_ms", options.stale_after_ms},
                                    std::pair{"resync_min_interval_ms", options.resync_min_interval_ms},
                                    std::pair{"snapshot_timeout_ms", options.snapshot_timeout_ms}}) {
    if (!FitsInt(value)) return sci::StrFormat("%s %d is too large (at most %d)", name, value, INT_MAX);
  }
  if (options.resync_min_interval_ms == 0) return "resync_min_interval_ms is 0";
  if (options.resync_catch_up_max_ms == 0) return "resync_catch_up_max_ms is 0";
  if (!FitsInt(options.resync_catch_up_max_ms)) {
    return sci::StrFormat("resync_catch_up_max_ms %d is too large (at most %d)", options.resync_catch_up_max_ms,
                          INT_MAX);
  }
  if (options.reconnect_policy != ReconnectPolicy::kResync &&
      options.reconnect_policy != ReconnectPolicy::kTrustEventIds) {
    return sci::StrFormat("reconnect_policy %d is not a policy", static_cast<uint32_t>(options.reconnect_policy));
  }
  if (options.snapshot_timeout_ms == 0) return "snapshot_timeout_ms is 0";
  if (options.resync_buffer_bytes == 0) return "resync_buffer_bytes is 0";
  if (options.receive_hwm < 0) return sci::StrFormat("receive_hwm %d is negative", options.receive_hwm);
  return {};
}

}  // namespace

std::unique_ptr<Subscriber> Subscriber::Start(Index& index, const SubscriberOptions& options,
                                              SubscriberError* code, std::string* error) {
  // Aliasing an empty owner: a pointer to `index` that owns nothing.
  return Start(std::shared_ptr<Index>(std::shared_ptr<Index>(), &index), options, code, error);
}

std::unique_ptr<Subscriber> Subscriber::Start(std::shared_ptr<Index> index, const SubscriberOptions& options,
                                              SubscriberError* code, std::string* error) {
  *code = SubscriberError::kInvalidArgument;
  if (std::string problem = CheckOptions(options); !problem.empty()) {
    *error = std::move(problem);
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
    if (FollowsLeader(options)) subscriber->loop_->FollowLeader(options);
    *code = SubscriberError::kNone;
    return subscriber;
  } catch (const zmq::error_t& e) {
    *error = sci::StrFormat("cannot set up the ZeroMQ socket: %s", e.what());
  } catch (const std::system_error& e) {
    *error = sci::StrFormat("cannot start the subscriber thread: %s", e.what());
  }
  return nullptr;
}

Subscriber::Subscriber(std::unique_ptr<Loop> loop) : loop_(std::move(loop)) {}

Subscriber::~Subscriber() { Stop(); }

void Subscriber::Stop() {
  if (loop_ == nullptr) return;
  // Without waiting: the follower may be in the middle of a retarget that
  // only the loop's thread, woken below, can finish. The loop's destructor
  // joins it.
  loop_->StopFollowing();
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

SubscriberError Subscriber::Retarget(const std::string& endpoint, const std::string& snapshot_url,
                                     std::string* error) {
  if (std::string e = CheckEndpoint(endpoint); !e.empty()) {
    *error = std::move(e);
    return SubscriberError::kInvalidArgument;
  }
  if (std::string e = CheckSnapshotUrl("snapshot_url", snapshot_url); !e.empty()) {
    *error = std::move(e);
    return SubscriberError::kInvalidArgument;
  }
  if (loop_ == nullptr) {
    *error = "the subscriber is stopped";
    return SubscriberError::kIo;
  }
  return loop_->Retarget(endpoint, snapshot_url, error);
}

}  // namespace sci
