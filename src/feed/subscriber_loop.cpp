#include "feed/subscriber_loop.h"

#include <zmq.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <system_error>
#include <utility>

#include "absl/strings/escaping.h"
#include "common/format.h"
#include "common/log.h"
#include "feed/etcd_view.h"
#include "feed/redis_view.h"
#include "wire/message_apply.h"

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

// How long a connection may take to finish ZeroMQ's handshake before it is
// dropped and tried again. libzmq's default is 30 s, and libzmq 4.3.3 and
// later (Debian's is 4.3.4) can leave a handshake stalled with the TCP
// connection up on both sides (zeromq/libzmq#4076): the simulation met one
// after a publisher restart, the subscriber and the new publisher each
// holding a silent connection, no subscription for 20 s. A handshake on a
// working connection takes a round trip or two; a stalled one is now
// retried after this long (HandshakeIsBounded in handshake_bound_test.cpp).
int HandshakeBoundMs(int heartbeat_ms) { return std::max(2000, 3 * heartbeat_ms); }

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

Subscriber::Loop::Loop(std::shared_ptr<Index> index, const SubscriberOptions& options)
    : index_share_(std::move(index)),
      index_(*index_share_),
      options_(options),
      endpoint_for_logs_(absl::CHexEscape(options.endpoint)),
      current_endpoint_(options.endpoint),
      context_(1),
      resync_(index_, ResyncOptionsOf(options), wake_),
      tail_watch_(TailWatchOptionsOf(options), options.snapshot_url, wake_),
      stuck_(std::chrono::milliseconds(options.stale_after_ms)) {}

Subscriber::Loop::~Loop() { LeaderFollower::Dispose(std::move(follower_)); }

bool Subscriber::Loop::Connect(SubscriberError* code, std::string* error) {
  if (!options_.endpoint.empty() && !OpenSocket(options_.endpoint, code, error)) return false;
  // Start-up: the pool's objects are not in the index yet. Held from
  // here, so that no query after Start() returns sees a stale state.
  resync_.Begin(Clock::now());
  return true;
}

void Subscriber::Loop::FollowLeader(const SubscriberOptions& options) {
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

void Subscriber::Loop::StopFollowing() {
  if (follower_ != nullptr) follower_->RequestStop();
}

SubscriberError Subscriber::Loop::Retarget(std::string endpoint, std::string snapshot_url, std::string* error) {
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

void Subscriber::Loop::Run() noexcept {
  try {
    ServeThroughFailures();
  } catch (const zmq::error_t& e) {
    if (e.num() != ETERM) Abandon(e.what());
  } catch (const std::exception& e) {
    Abandon(e.what());
  } catch (...) {
    Abandon("unknown exception");
  }
  try {
    resync_.SetUrls({}, {});  // stops a download; a stopped subscriber resyncs nothing
  } catch (...) {
  }
  index_.feed_counters().subscriber_connected.Set(false);
  {
    std::lock_guard<std::mutex> lock(retarget_mu_);
    running_ = false;
  }
  retarget_done_.notify_all();
}

void Subscriber::Loop::Wake() {
  stop_requested_.store(true, std::memory_order_release);
  zmq_ctx_shutdown(context_.handle());
  wake_.Notify();
}

void Subscriber::Loop::Serve() {
  trust_.DoubtFrom(Clock::now());  // nothing has proved the index's contents yet
  last_message_at_ = trust_.doubt_since();
  seen_clear_epoch_ = index_.clear_epoch();
  while (true) {
    // A disconnect's new socket that could not be made yet (out of memory,
    // no descriptor), once its back-off is over.
    if (reopen_pending_ && Clock::now() >= reopen_retry_at_) TryReopen(Clock::now());
    // Before sleeping: the sleep must end in time for a warning that is due.
    stuck_.Update(Clock::now(), StateForReport(), endpoint_for_logs_);
    zmq_pollitem_t items[] = {{nullptr, wake_.fd(), ZMQ_POLLIN, 0},
                              {socket_.data().handle(), 0, ZMQ_POLLIN, 0},
                              {socket_.monitor().handle(), 0, ZMQ_POLLIN, 0}};
    const int n_items = socket_.open() ? 3 : 1;
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
    if (n_items == 3 && socket_.open()) {
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
  }
}

bool Subscriber::Loop::OpenSocket(const std::string& endpoint, SubscriberError* code, std::string* error) {
  // Everything the switch needs is made before any socket: memory running
  // out never strands a socket connected and then thrown away (a retry's
  // connection to the same publisher was seen not to complete after one).
  std::string for_logs = absl::CHexEscape(endpoint);
  const std::string monitor_endpoint = sci::StrFormat(kMonitorEndpointFormat, sockets_opened_ + 1);
  zmq::socket_t data(context_, zmq::socket_type::sub);
  const int heartbeat_ms = HeartbeatIntervalMs(options_.stale_after_ms);
  data.set(zmq::sockopt::linger, 0);
  data.set(zmq::sockopt::rcvhwm, options_.receive_hwm);
  data.set(zmq::sockopt::maxmsgsize, kMaxMessageBytes);
  data.set(zmq::sockopt::reconnect_ivl, static_cast<int>(options_.reconnect_ms));
  data.set(zmq::sockopt::reconnect_ivl_max, static_cast<int>(options_.reconnect_max_ms));
  data.set(zmq::sockopt::heartbeat_ivl, heartbeat_ms);
  data.set(zmq::sockopt::heartbeat_timeout, 3 * heartbeat_ms);
  data.set(zmq::sockopt::handshake_ivl, HandshakeBoundMs(heartbeat_ms));
  data.set(zmq::sockopt::subscribe, options_.topic);
  // The monitor must exist before the connect, or the first handshake
  // could go unseen.
  ++sockets_opened_;
  MonitoredSocket next = MonitoredSocket::Monitor(context_, std::move(data), monitor_endpoint, kMonitoredEvents);
  if (zmq_connect(next.data().handle(), endpoint.c_str()) != 0) {
    const int err = zmq_errno();
    *code = IsEndpointError(err) ? SubscriberError::kInvalidArgument : SubscriberError::kIo;
    *error = sci::StrFormat("endpoint \"%s\": ZeroMQ cannot connect to it (%s)", absl::CHexEscape(endpoint),
                             zmq_strerror(err));
    return false;
  }
  // Closes the old socket (linger 0: its queued messages go with it), its
  // monitor stopped first (monitored_socket.h says why).
  socket_ = std::move(next);
  endpoint_for_logs_ = std::move(for_logs);
  return true;
}

void Subscriber::Loop::TakeRetarget() {
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

SubscriberError Subscriber::Loop::SwitchTo(PendingRetarget& request, std::string* error, bool* switched) {
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
  if (trust_.connected()) index_.feed_counters().subscriber_connected.Set(false);
  trust_.Restart(Clock::now());
  // A new publisher is a new sequence space: what the index holds came
  // from the old one. Clear, then resync from the new snapshot.
  current_endpoint_.swap(request.endpoint);
  resync_.SetUrls(std::move(request.snapshot_url), std::move(resync_status_url));
  tail_watch_.SetStatusUrl(std::move(status_url));
  if (resync_.enabled()) {
    resync_.Begin(trust_.doubt_since());
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

void Subscriber::Loop::CompleteRetarget(uint64_t ticket, SubscriberError code, std::string error) noexcept {
  {
    std::lock_guard<std::mutex> lock(retarget_mu_);
    retarget_code_ = code;
    retarget_error_ = std::move(error);
    retarget_completed_ = ticket;
  }
  retarget_done_.notify_all();
}

void Subscriber::Loop::PollResync() {
  if (resync_.ReplayDue(Clock::now()) && socket_.open() && !reopen_pending_) {
    // The monitor first, as in Serve: a disconnect already reported must
    // not let a quick reconnect's messages join the buffer being replayed.
    DrainMonitor();
    if (resync_.ReplayDue(Clock::now()) && !reopen_pending_) {
      DrainData(options_.receive_hwm > 0 ? options_.receive_hwm : -1);
    }
  }
  if (resync_.Poll(Clock::now())) OnResynced(Clock::now());
}

void Subscriber::Loop::ResyncIfCleared(Clock::time_point now) {
  const uint64_t epoch = index_.clear_epoch();
  if (epoch == seen_clear_epoch_) return;
  seen_clear_epoch_ = epoch;
  // Trusted: the batch that made it came on this connection, which proves
  // the subscription live (the download needs no further message).
  if (resync_.enabled() && !resync_.active()) resync_.BeginAfterClear(now, trust_.trusted());
}

void Subscriber::Loop::OnResynced(Clock::time_point now) {
  seen_clear_epoch_ = index_.clear_epoch();
  // A reconnect during the download with no message since: a loss on the
  // new connection would go unseen; the stale rule decides.
  trust_.Resynced(now, resync_.live());
}

long Subscriber::Loop::PollTimeoutMs() const {
  std::optional<Clock::time_point> deadline = stuck_.deadline();
  if (trust_.in_doubt() && !resync_.active()) {
    const Clock::time_point stale_at = trust_.doubt_since() + std::chrono::milliseconds(options_.stale_after_ms);
    if (!deadline || stale_at < *deadline) deadline = stale_at;
  }
  if (reopen_pending_ && (!deadline || reopen_retry_at_ < *deadline)) deadline = reopen_retry_at_;
  if (!deadline) return -1;
  const auto left = *deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  // Rounded up, so that the wake-up is never just before the deadline.
  return static_cast<long>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
}

SubscriberState Subscriber::Loop::StateForReport() const {
  SubscriberState state;
  state.has_endpoint = socket_.open();
  state.connected = trust_.connected();
  state.resync_waiting = resync_.waiting_for_first_message();
  return state;
}

void Subscriber::Loop::DrainMonitor() {
  while (true) {
    zmq::message_t event;
    if (!socket_.monitor().recv(event, zmq::recv_flags::dontwait)) return;
    // The endpoint frame, kept as received: an event taken off the monitor
    // is acted on without allocating first, or it would be lost to a
    // failed allocation (a connection never marked up, or never down).
    zmq::message_t endpoint;
    bool more = event.more();
    for (bool first = true; more; first = false) {  // (and anything a future libzmq adds)
      zmq::message_t part;
      (void)socket_.monitor().recv(part);
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

void Subscriber::Loop::DrainData(int limit) {
  for (int i = 0; limit < 0 || i < limit; ++i) {
    const size_t n_frames = ReceiveMessage();
    if (n_frames == 0) return;
    ApplyReceived(n_frames);
  }
}

size_t Subscriber::Loop::ReceiveMessage() {
  if (frames_.empty()) frames_.emplace_back();
  if (!socket_.data().recv(frames_[0], zmq::recv_flags::dontwait)) return 0;
  size_t kept = 1;
  bool more = frames_[0].more();
  while (more) {
    // The parts of a message arrive together: this never blocks.
    if (kept == frames_.size() && kept <= kMaxKeptFrames) frames_.emplace_back();
    zmq::message_t& part = frames_[std::min(kept, kMaxKeptFrames)];
    (void)socket_.data().recv(part);
    kept = std::min(kept + 1, kMaxKeptFrames + 1);
    more = part.more();
  }
  return kept;
}

void Subscriber::Loop::ApplyReceived(size_t n_frames) {
  last_message_at_ = Clock::now();
  if (resync_.active()) {
    // Held for the resync (buffered, bounded).
    index_.feed_counters().messages_received.Add();
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
  index_.feed_counters().messages_received.Add();
}

void Subscriber::Loop::OnConnected(std::string_view address) {
  if (trust_.connected()) return;
  trust_.HandshakeDone();
  index_.feed_counters().subscriber_connected.Set(true);
  index_.feed_counters().subscriber_connects.Add();
  // Not trusted yet: the first message on this connection must show that
  // nothing was lost while we were away.
  Logf(LogLevel::kInfo, "subscriber %s: connected to %s", endpoint_for_logs_, EscapedForLogs(address));
}

void Subscriber::Loop::OnDisconnected(std::string_view address) {
  if (!trust_.connected()) return;  // a connection that never completed its handshake
  if (options_.reconnect_policy == ReconnectPolicy::kResync) {
    // Whatever is queued may be the old publisher's or, after a quick
    // reconnect, a restarted one's: one queue, no boundary. None of it is
    // applied; the socket goes with it.
    MarkDisconnected();
    reopen_pending_ = true;
    reopen_failures_ = 0;
    reopen_retry_at_ = {};
    ClearAfterDisconnect();
    Logf(LogLevel::kWarn,
         "subscriber %s: disconnected from %s; a publisher restart behind it cannot be ruled out: index cleared, "
         "reconnecting on a new socket%s (reconnect_policy resync)",
         endpoint_for_logs_, EscapedForLogs(address), resync_.enabled() ? " and resyncing" : "");
    TryReopen(Clock::now());
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

void Subscriber::Loop::ClearAfterDisconnect() {
  if (resync_.active()) {
    resync_.Begin(Clock::now());  // what it buffered may be the old publisher's
  } else {
    index_.Clear();  // ResyncIfCleared starts the resync
  }
  index_.feed_counters().disconnect_clears.Add();  // after the clear: whoever sees it sees the index cleared
}

void Subscriber::Loop::TryReopen(Clock::time_point now) {
  SubscriberError code = SubscriberError::kNone;
  std::string error;
  bool opened = false;
  try {
    opened = OpenSocket(current_endpoint_, &code, &error);
  } catch (const zmq::error_t& e) {
    // No socket to be had (a process at its descriptor limit): the old one
    // stays, unread, and the index cleared; retried with a back-off. Not
    // the end of the subscriber, as a socket error on a live one is.
    if (e.num() == ETERM) throw;
    error = sci::StrFormat("cannot make a socket (%s)", e.what());
  }
  if (opened) {
    reopen_pending_ = false;
    reopen_failures_ = 0;
    return;
  }
  const auto delay_ms = static_cast<uint32_t>(
      std::min<uint64_t>(options_.reconnect_max_ms, uint64_t{options_.reconnect_ms} << std::min(reopen_failures_, 16u)));
  ++reopen_failures_;
  reopen_retry_at_ = now + std::chrono::milliseconds(delay_ms);
  Logf(LogLevel::kError, "subscriber %s: cannot reconnect: %s; trying again in %d ms", endpoint_for_logs_, error,
       delay_ms);
}

void Subscriber::Loop::MarkDisconnected() {
  resync_.OnConnectionLost();
  // A publisher restarted meanwhile could resume at our cursor + 1: the
  // next batch must show it is the same one (Index::RequireEventContinuity).
  index_.RequireEventContinuity();
  trust_.ConnectionLost(Clock::now());
  index_.feed_counters().subscriber_connected.Set(false);
  index_.feed_counters().subscriber_disconnects.Add();
}

void Subscriber::Loop::CheckStale(Clock::time_point now) {
  // A resync under way holds the index empty; its outcome decides trust.
  if (!trust_.in_doubt() || resync_.active()) return;
  if (now - trust_.doubt_since() < std::chrono::milliseconds(options_.stale_after_ms)) return;
  trust_.GraceOver();
  // Without a cursor the index holds nothing a dead publisher could have
  // left behind (every batch sets it, every clear resets it).
  if (!index_.cursor().has_sequence) return;
  index_.Clear();
  Logf(LogLevel::kWarn, "subscriber %s: %s for %d ms; index cleared, it answers miss until new messages arrive",
       endpoint_for_logs_, trust_.connected() ? "no message since reconnecting" : "disconnected",
       options_.stale_after_ms);
}

void Subscriber::Loop::Abandon(const char* why) {
  try {
    index_.Clear();
  } catch (...) {
    // Clear does not allocate; nothing sensible to do if it throws.
  }
  index_.feed_counters().subscriber_failures.Add();
  try {
    Logf(LogLevel::kError, "subscriber %s: stopped on an error (%s); index cleared; nothing is applied any more",
         endpoint_for_logs_, why);
  } catch (...) {
  }
}

void Subscriber::Loop::ServeThroughFailures() {
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

bool Subscriber::Loop::RecoverFrom(const char* what) noexcept {
  const Clock::time_point now = Clock::now();
  index_.Clear();  // frees, allocates nothing
  index_.feed_counters().subscriber_failures.Add();  // after the clear: whoever sees it sees the index empty
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

}  // namespace sci
