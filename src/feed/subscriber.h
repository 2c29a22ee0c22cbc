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
// One subscriber per index. The index has one sequence cursor: a second
// subscriber on the same publisher makes every batch arrive twice (the
// second copy is a counted duplicate); on another publisher their sequences
// interleave, every batch looks like a gap and the index keeps clearing.
// The connection gauge is shared too. Use one index per publisher.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "index/index.h"

namespace sci {

struct SubscriberOptions {
  static constexpr uint32_t kDefaultReconnectMs = 100;
  static constexpr uint32_t kDefaultReconnectMaxMs = 5000;
  static constexpr uint32_t kDefaultStaleAfterMs = 10000;
  // Messages queued before ZeroMQ drops (a drop shows up as a sequence gap,
  // which clears: conservative). At 64 events per message this holds
  // millions of events, enough for a burst while the thread catches up.
  static constexpr int kDefaultReceiveHwm = 1 << 18;

  std::string endpoint;  // "tcp://host:port" or "ipc:///path"; required
  std::string topic;     // subscription prefix; empty = every message
  uint32_t reconnect_ms = kDefaultReconnectMs;
  uint32_t reconnect_max_ms = kDefaultReconnectMaxMs;
  uint32_t stale_after_ms = kDefaultStaleAfterMs;
  int receive_hwm = kDefaultReceiveHwm;
};

enum class SubscriberError : int32_t { kNone = 0, kInvalidArgument, kIo };

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

 private:
  class Loop;  // the thread's sockets and state; ZeroMQ stays out of this header

  explicit Subscriber(std::unique_ptr<Loop> loop);

  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace sci
