// The subscriber's thread: its sockets, its resync and status watch, its
// trust in the stream (feed/stream_trust.h) and the retarget hand-over
// (subscriber.h says what it promises). Internal: included by
// subscriber.cpp and subscriber_loop.cpp only, so ZeroMQ stays out of
// subscriber.h.
//
// The loop's turn (Serve): wait in zmq_poll for the wake-up fd, the data
// socket, the connection monitor or a deadline; take a retarget; read the
// monitor before the data (a connection is never judged by a stale idea of
// it); apply up to kMaxMessagesPerWake messages (or buffer them for a
// resync); check the stale rule, the tail watch, a clear that needs a
// resync, the resync itself, and the adoptions queries asked for.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "feed/leader_follower.h"
#include "feed/monitored_socket.h"
#include "feed/resync.h"
#include "feed/stream_trust.h"
#include "feed/stuck_report.h"
#include "feed/subscriber.h"
#include "feed/tail_watch.h"
#include "feed/wake_signal.h"
#include "index/index.h"
#include "wire/wire_decoder.h"

namespace sci {

class Subscriber::Loop {
 public:
  using Clock = std::chrono::steady_clock;

  Loop(std::shared_ptr<Index> index, const SubscriberOptions& options);

  // Configures and connects the SUB socket on the caller's thread. Without
  // an endpoint (etcd following, before the first view) there is no socket
  // until a retarget brings one.
  bool Connect(SubscriberError* code, std::string* error);

  // Disposes of the follower first: it calls into this loop.
  ~Loop();

  // HA following: a thread of its own polls the leader view and retargets
  // this loop on every change. Called once, by Start(), after Run() began.
  void FollowLeader(const SubscriberOptions& options);

  // Asks the follower to stop polling (it finishes on its own thread).
  void StopFollowing();

  // Any thread but the loop's: hands a retarget to the loop's thread and
  // waits for its outcome.
  SubscriberError Retarget(std::string endpoint, std::string snapshot_url, std::string* error);

  // The thread's body. Returns when Wake() is called (or on a fatal socket
  // error, after clearing the index it can no longer keep current).
  void Run() noexcept;

  // Called from the stopping thread: every blocking call of this context,
  // zmq_poll included, returns ETERM. A zmq_poll with no socket yet (HA
  // following before the first leader view) watches only the wake-up fd,
  // which does not see the context end: hence the flag and the signal.
  void Wake();

  // Stop() was called from this thread, which cannot join itself: the thread
  // deletes the loop when Run() returns.
  void HandOverToThread() { owned_by_thread_ = true; }
  bool owned_by_thread() const { return owned_by_thread_; }

 private:
  void Serve();

  // Opens a new SUB socket (and its monitor) connected to `endpoint`, in
  // place of the current one. On failure the current one stays.
  bool OpenSocket(const std::string& endpoint, SubscriberError* code, std::string* error);

  struct PendingRetarget {
    std::string endpoint;
    std::string snapshot_url;
  };

  // On the loop's thread: performs a retarget Retarget() handed over.
  void TakeRetarget();

  // Follows `request`'s publisher in place of the current one. Everything
  // that allocates comes before the switch (*switched), so that memory
  // running out leaves the old leader followed whole; after it nothing
  // allocates but the log line.
  SubscriberError SwitchTo(PendingRetarget& request, std::string* error, bool* switched);

  // Hands a retarget's outcome to the caller waiting for `ticket`;
  // allocates nothing (the error is moved).
  void CompleteRetarget(uint64_t ticket, SubscriberError code, std::string error) noexcept;

  // Moves the resync on (resync.h). Before its replay, every message the
  // socket already holds is buffered: a message left queued would be
  // applied after the hold ends, older than the snapshot it follows.
  void PollResync();

  // After anything that may have cleared the index (a gap, an all-cleared
  // event, the stale rule, sci_index_clear): refill it from the snapshot.
  void ResyncIfCleared(Clock::time_point now);

  // The index serves again, as of the last buffered message.
  void OnResynced(Clock::time_point now);

  // Until the doubt deadline while the stream is untrusted, else forever:
  // the thread sleeps in zmq_poll and only wakes for a message, a connection
  // change, the deadline, Stop() or a page to adopt.
  long PollTimeoutMs() const;

  SubscriberState StateForReport() const;

  void DrainMonitor();

  // Applies up to `limit` queued messages (or all of them if `limit` < 0).
  void DrainData(int limit);

  // Receives one multipart message into frames_ without waiting; returns its
  // number of frames as passed to the decoder, 0 if nothing is queued.
  size_t ReceiveMessage();

  // Whether a loss at the stream's tail is worth looking for: the stream is
  // followed and trusted, and holds what the index answers from.
  bool WatchingTail() const { return trust_.trusted() && !resync_.active(); }

  void ApplyReceived(size_t n_frames);

  void OnConnected(std::string_view address);

  void OnDisconnected(std::string_view address);

  // ReconnectPolicy::kResync, after a disconnect: the index cleared, or the
  // resync under way started over (disconnect_clears).
  void ClearAfterDisconnect();
  // Then a new socket to the same endpoint, the old one's queue dropped
  // with it. If none can be made (memory, descriptors) the old one stays
  // unread and reopen_pending_ set: tried again at the loop's turn after a
  // back-off (reconnect_ms doubling to reconnect_max_ms).
  void TryReopen(Clock::time_point now);

  // Allocates nothing.
  void MarkDisconnected();

  // The index's sequence rule has judged this message against the last
  // one: continuous (kept), or a gap / restart (cleared). On a connection in
  // view, what the index holds now follows the live stream.
  void OnMessageApplied(Clock::time_point now) { trust_.MessageApplied(now); }

  void CheckStale(Clock::time_point now);

  // A failure the loop cannot recover from (a socket error): the index can
  // no longer be kept current, so it is emptied, and the stop is counted
  // and logged at error level for the caller to see.
  void Abandon(const char* why);

  // Serve(), resumed after every failure that memory coming back can cure
  // (issue #34, R6): an allocation anywhere in the loop (decoding, the
  // resync buffer, its spill file, a replay), or a download thread that
  // cannot be created. Such a failure costs the index (what it held may
  // miss the message that failed) and a resync, never the subscriber:
  // abandoning it would leave every query missing for good while its stats
  // looked quiet. Socket errors and Stop() still end the loop.
  void ServeThroughFailures();

  // Empties the index, starts a resync (if configured) and pauses briefly,
  // so that a failure that repeats does not spin the thread. False when
  // Stop() was asked meanwhile.
  bool RecoverFrom(const char* what) noexcept;

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
  MonitoredSocket socket_;  // closed until the first endpoint is known
  uint64_t sockets_opened_ = 0;  // names each socket's monitor endpoint
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
  StreamTrust trust_;  // connected, proven, in doubt (feed/stream_trust.h)
  uint64_t seen_clear_epoch_ = 0;  // Index::clear_epoch() as last looked at (see ResyncIfCleared)
  // A disconnect under ReconnectPolicy::kResync whose socket is still to be
  // replaced: nothing is read from the old one meanwhile (OnDisconnected).
  bool reopen_pending_ = false;
  uint32_t reopen_failures_ = 0;
  Clock::time_point reopen_retry_at_{};
  std::vector<zmq::message_t> frames_;
  std::vector<std::span<const uint8_t>> spans_;
  DecodedMessage scratch_;
  std::string error_;
};

}  // namespace sci
