// Says when a subscriber is stuck, which it otherwise would not: an
// unreachable endpoint is no error to ZeroMQ (it keeps reconnecting in
// silence), and a resync waits for a first message that may never come,
// while every query misses. Warned once the trouble has lasted
// stale_after_ms, then again with exponential back-off (warning_backoff.h)
// for as long as it lasts; its end is logged at info level.
//
// Owned by the subscriber's thread, which reports its state after every
// wake-up and sleeps no longer than deadline().
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "feed/warning_backoff.h"

namespace sci {

struct SubscriberState {
  bool has_endpoint = false;     // false: following a leader view that has named no leader yet
  bool connected = false;        // a ZMTP handshake succeeded, no disconnect since
  bool resync_waiting = false;   // a resync waits for its first message (no failure yet: those log themselves)
};

class StuckReport {
 public:
  using Clock = std::chrono::steady_clock;

  explicit StuckReport(Clock::duration grace) : grace_(grace) {}

  // After every wake-up of the subscriber's thread. `endpoint` is for the
  // log line (already escaped).
  void Update(Clock::time_point now, const SubscriberState& state, const std::string& endpoint);

  std::optional<Clock::time_point> deadline() const { return backoff_.deadline(); }

 private:
  const Clock::duration grace_;
  WarningBackoff backoff_;
  bool warned_ = false;  // a warning went out for the current trouble
};

}  // namespace sci
