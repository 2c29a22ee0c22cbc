// The live feed: a ZeroMQ SUB socket, on a thread the library owns, that
// applies every message a publisher sends to one Index, in arrival order.
//
// Liveness. The index is only as good as the stream behind it, so the
// subscriber keeps asking whether the stream is still *trusted*: connected,
// and proven continuous by a message applied on the current connection (the
// index's sequence rule does the proving: a gap or a restart clears, last + 1
// keeps). Trust is lost on a disconnect (a ZMTP heartbeat turns a silently
// dead peer into one) and is missing from the start. While untrusted the
// index keeps serving what it has; once the doubt has lasted
// `stale_after_ms` the index is cleared (it then answers miss) and logged.
// So:
//   - a short reconnect whose next message is last + 1 keeps the state;
//   - a reconnect that loses messages clears at the next message (a gap);
//   - a disconnect longer than the grace clears at the deadline;
//   - a reconnect followed by silence longer than the grace also clears,
//     because nothing proved that no message was lost meanwhile (the
//     publisher has no heartbeat or replay to tell us). This costs an idle
//     publisher its state after a blip; it never costs a false hit.
// After a stale clear the index has no sequence cursor, so the next message
// is accepted at whatever sequence it carries.
//
// Resync (feed/resync.h). With a snapshot URL, every start and every clear
// (a gap, a restart, a stale clear, an all-cleared event, sci_index_clear)
// refills the index from the master's snapshot; until the snapshot is
// loaded and the buffered stream replayed, the index answers miss.
//
// HA following (feed/leader_follower.h). With etcd endpoints or a Redis
// endpoint, the endpoint and the snapshot URL come from the leader view in
// that store and follow every change of it (a new leader: retarget, i.e.
// clear and resync).
//
// One subscriber per index. The index has one sequence cursor: a second
// subscriber on the same publisher makes every batch arrive twice (the
// second copy is a counted duplicate); on another publisher their sequences
// interleave, every batch looks like a gap and the index keeps clearing.
// The connection gauge is shared too. Use one index per publisher.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "feed/resync.h"
#include "feed/tail_watch.h"
#include "index/index.h"

namespace sci {

// What a disconnect means for the index (docs/operations.md, "Reconnects").
// A publisher that restarted while we were away may resume at our cursor + 1
// with event ids that continue ours too (one-event batches: ids equal
// sequences on both sides), which nothing on the wire tells from the same
// publisher; and libzmq keeps one receive queue across a reconnect, so the
// old publisher's last batches and the new one's first share it with no
// boundary.
enum class ReconnectPolicy : uint32_t {
  // Default: every real disconnect clears the index, drops the receive
  // queue (a new socket) and resyncs (disconnect_clears). No restart can
  // hide behind it; a blip costs a resync.
  kResync = 0,
  // 1.3's rule: the next batch that continues the sequence must continue
  // the event ids too, else it is a restart (restarts_suspected). A blip
  // costs nothing; a restart whose sequence and ids both continue goes
  // unseen (docs/operations.md states the limit).
  kTrustEventIds = 1,
};

struct SubscriberOptions {
  static constexpr uint32_t kDefaultReconnectMs = 100;
  static constexpr uint32_t kDefaultReconnectMaxMs = 5000;
  static constexpr uint32_t kDefaultStaleAfterMs = 10000;
  // Messages queued before ZeroMQ drops (a drop shows up as a sequence gap,
  // which clears: conservative). At 64 events per message this holds
  // millions of events, enough for a burst while the thread catches up.
  static constexpr int kDefaultReceiveHwm = 1 << 18;

  // The resync's and the status watch's defaults are theirs (feed/resync.h,
  // feed/tail_watch.h): named here, defined once there.
  static constexpr uint32_t kDefaultResyncMinIntervalMs = ResyncOptions::kDefaultMinIntervalMs;
  static constexpr uint32_t kDefaultSnapshotTimeoutMs = ResyncOptions::kDefaultTimeoutMs;
  static constexpr size_t kDefaultResyncBufferBytes = ResyncOptions::kDefaultBufferBytes;
  static constexpr size_t kDefaultResyncSpillBytes = ResyncOptions::kDefaultSpillBytes;
  static constexpr uint32_t kDefaultResyncCatchUpMs = ResyncOptions::kDefaultCatchUpMs;
  static constexpr uint32_t kDefaultResyncCatchUpMaxMs = ResyncOptions::kDefaultCatchUpMaxMs;
  static constexpr uint32_t kDefaultStatusPollMs = TailWatchOptions::kDefaultPollMs;
  static constexpr char kDefaultClusterId[] = "mooncake_cluster";
  static constexpr uint32_t kDefaultAdminPort = 9003;
  static constexpr uint32_t kDefaultEtcdPollMs = 500;

  // "tcp://host:port" or "ipc:///path". Required, except with etcd_endpoints
  // or redis_endpoint, where it must be empty (the leader's address comes
  // from the leader view).
  std::string endpoint;
  std::string topic;     // subscription prefix; empty = every message
  uint32_t reconnect_ms = kDefaultReconnectMs;
  uint32_t reconnect_max_ms = kDefaultReconnectMaxMs;
  uint32_t stale_after_ms = kDefaultStaleAfterMs;
  int receive_hwm = kDefaultReceiveHwm;
  ReconnectPolicy reconnect_policy = ReconnectPolicy::kResync;

  // ---- resync ----
  // "http(s)://master:9003/get_all_keys"; empty = no resync. Must be empty
  // with etcd_endpoints (derived from the leader then).
  std::string snapshot_url;
  uint32_t resync_min_interval_ms = kDefaultResyncMinIntervalMs;  // > 0
  uint32_t snapshot_timeout_ms = kDefaultSnapshotTimeoutMs;       // > 0
  // The stream a resync holds back while it downloads (feed/resync_buffer.h):
  // this much in memory, then up to resync_spill_bytes (0: none; the resync
  // fails once memory is full) in an unlinked file in resync_spill_dir
  // (empty: $TMPDIR, else /tmp).
  size_t resync_buffer_bytes = kDefaultResyncBufferBytes;         // > 0
  size_t resync_spill_bytes = kDefaultResyncSpillBytes;
  std::string resync_spill_dir;
  // How long the stream is still buffered once the snapshot is loaded,
  // before the replay (feed/resync.h: a snapshot can be ahead of the stream).
  uint32_t resync_catch_up_ms = kDefaultResyncCatchUpMs;
  // A catch-up released before its anchor withholds stored events until
  // the anchor comes, at most this long after it serves while batches
  // flow (feed/resync.h); > 0.
  uint32_t resync_catch_up_max_ms = kDefaultResyncCatchUpMaxMs;
  // Let libcurl use http_proxy / https_proxy / no_proxy (snapshot and etcd).
  bool proxy_from_env = false;

  // ---- HA following ----
  // etcd endpoints, "http://etcd-a:2379,http://etcd-b:2379"; empty = none.
  std::vector<std::string> etcd_endpoints;
  std::string cluster_id = kDefaultClusterId;
  uint32_t event_port = 0;                  // the leader's publisher port; required with etcd
  uint32_t admin_port = kDefaultAdminPort;  // the leader's admin HTTP port
  uint32_t etcd_poll_ms = kDefaultEtcdPollMs;  // the leader view's poll, etcd or Redis
  // "redis://[:password@]host:port[/db]"; empty = none. Set: follow the
  // leader view in the Redis hash mooncake-store/{<ns>}/master_view
  // (feed/redis_view.h) instead of etcd; exclusive with etcd_endpoints.
  std::string redis_endpoint;

  // ---- the publisher's status (1.3; feed/tail_watch.h) ----
  // The master's GET /kv_events/status, read while the stream is connected
  // and quiet to find a loss at its tail. Empty: beside snapshot_url (same
  // scheme, host and port), or the leader's with HA following; no watch
  // without either. Must be empty with etcd_endpoints / redis_endpoint.
  std::string status_url;
  uint32_t status_poll_ms = kDefaultStatusPollMs;  // > 0; UINT32_MAX: never read
};

// Splits "a,b , c" into {"a", "b", "c"} (empty items dropped).
std::vector<std::string> SplitEndpointList(std::string_view list);

// kNoMemory: the subscriber could not do what was asked for want of memory
// (its index is cleared); asking again may succeed.
enum class SubscriberError : int32_t { kNone = 0, kInvalidArgument, kIo, kNoMemory };

class Subscriber {
 public:
  // Creates the socket and connects it on the calling thread, so that an
  // endpoint ZeroMQ rejects is reported here (kInvalidArgument), as is a
  // socket or thread that cannot be created (kIo); then hands the socket to
  // its own thread. An unreachable tcp endpoint is not an error: ZeroMQ keeps
  // reconnecting and the connection gauge says so. On failure returns null
  // and fills *code and *error (a message naming the option, e.g.
  // `endpoint "bogus://x": ...`). The thread shares ownership of `index`
  // until it has exited, which may be after Stop() returns (see Stop()).
  static std::unique_ptr<Subscriber> Start(std::shared_ptr<Index> index, const SubscriberOptions& options,
                                           SubscriberError* code, std::string* error);
  // For an index the caller keeps alive until the thread has exited, i.e.
  // until Stop() returns when Stop() is not called from the thread itself.
  static std::unique_ptr<Subscriber> Start(Index& index, const SubscriberOptions& options, SubscriberError* code,
                                           std::string* error);

  ~Subscriber();  // Stop()
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // Wakes the thread, joins it and closes the sockets (linger 0), promptly
  // whatever the publisher does. The connection gauge drops to false (not
  // counted as a disconnect). The index keeps its contents but no longer
  // follows the publisher. Idempotent; must not race with itself.
  //
  // Called from the subscriber's own thread (a log callback), it cannot join
  // that thread: it wakes it and returns at once, and the thread, once the
  // callback has returned, finishes the step it was in (the message being
  // applied at most; no socket read succeeds any more), drops the gauge,
  // then frees its sockets and its share of the index by itself.
  void Stop();

  // Moves a running subscriber to another publisher (an application doing
  // its own leader discovery): closes the connection, connects to
  // `endpoint`, clears the index and resyncs from `snapshot_url` (empty: no
  // resync, the index refills from new stored events). Waits until the
  // subscriber's thread has done it. kInvalidArgument for an endpoint or URL
  // that cannot work (nothing changes then); kIo once stopped. Must not be
  // called from the log callback.
  SubscriberError Retarget(const std::string& endpoint, const std::string& snapshot_url, std::string* error);

 private:
  class Loop;  // the thread's sockets and state; ZeroMQ stays out of this header

  explicit Subscriber(std::unique_ptr<Loop> loop);

  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace sci
