// The resync state machine: refills a cleared index from a snapshot of the
// master's keys and stays exact (docs/index-semantics.md, "Resync").
//
//   kOff ──Begin()──▶ kWaiting ──first message, slot open──▶ kFetching
//     ▲                  ▲                                       │
//     │                  └──── failure (counted, logged) ◀───────┤
//     └──────────── snapshot loaded, buffer replayed ◀───────────┘
//
// Begin() empties and holds the index (every query answers miss) and waits
// for the first message on the connection, which proves the subscription
// live. Messages before it, and while a back-off runs, are dropped: their
// effects are in the snapshot downloaded after them. That first message and
// every later one are buffered (bounded) while SnapshotFetch downloads and
// loads the snapshot; then the buffer is replayed in order with the
// index's cursor unset, so the first buffered message begins a run (the
// early-gap rule for the Mooncake format), and the hold is released.
//
// A failure -- the download's (status, time-out, truncation, malformed
// body), a buffer overflow, a gap inside the buffer or during its replay --
// is counted (resync_failures) and logged, leaves the index empty and held,
// and the next download starts no earlier than resync_min_interval_ms after
// the previous one, doubled per consecutive failure (up to 16 times).
//
// Owned by the subscriber's thread; only SnapshotFetch runs elsewhere.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "feed/snapshot_fetch.h"
#include "feed/wake_signal.h"
#include "index/index.h"
#include "wire/wire_decoder.h"

namespace sci {

struct ResyncOptions {
  static constexpr uint32_t kDefaultMinIntervalMs = 5000;
  static constexpr uint32_t kDefaultTimeoutMs = 60000;
  // Messages buffered while a snapshot downloads, in bytes (frames plus a
  // per-message overhead). A live stream of 100k events/s is ~15 MB/s, so
  // this holds several seconds of a busy master; beyond it the resync fails.
  static constexpr size_t kDefaultBufferBytes = size_t{64} << 20;

  std::string snapshot_url;  // empty = no resync (1.0 behaviour)
  uint32_t min_interval_ms = kDefaultMinIntervalMs;
  uint32_t timeout_ms = kDefaultTimeoutMs;
  size_t buffer_bytes = kDefaultBufferBytes;
  bool proxy_from_env = false;
};

class Resync {
 public:
  using Clock = std::chrono::steady_clock;

  Resync(Index& index, ResyncOptions options, WakeSignal& wake);
  ~Resync();  // cancels a running download; releases the index (emptied if a resync was under way)
  Resync(const Resync&) = delete;
  Resync& operator=(const Resync&) = delete;

  bool enabled() const { return !options_.snapshot_url.empty(); }
  // While active, messages go to OnMessage, not to the index.
  bool active() const { return phase_ != Phase::kOff; }
  // Waiting for the message that starts the first download, no failure yet
  // (after a failure the wait is the back-off, and Fail() has said so).
  bool waiting_for_first_message() const { return phase_ == Phase::kWaiting && consecutive_failures_ == 0; }

  // The index was cleared, or holds nothing proven yet: start (over).
  // Without a snapshot URL this does nothing.
  void Begin(Clock::time_point now);

  // Replaces the snapshot URL (a new leader): stops what runs and goes back
  // to kOff, without counting a failure. The caller clears or Begin()s.
  void SetUrl(std::string url);

  // A message received while active(): its frames are moved out of
  // `frames` (the first `n_frames`).
  void OnMessage(std::span<zmq::message_t> frames, Clock::time_point now);

  // After a wake-up: finishes a download that ended. True when a resync
  // completed just now (the index serves again).
  bool Poll(Clock::time_point now);

 private:
  enum class Phase { kOff, kWaiting, kFetching };

  struct Buffered {
    std::vector<zmq::message_t> frames;
  };

  void StartFetch(Clock::time_point now);
  bool Replay();
  void Fail(const std::string& why, Clock::time_point now);
  void Reset();  // stops the download, drops the buffer
  Clock::duration Backoff() const;

  Index& index_;
  ResyncOptions options_;
  WakeSignal& wake_;

  Phase phase_ = Phase::kOff;
  std::unique_ptr<SnapshotFetch> fetch_;
  std::vector<Buffered> buffer_;
  size_t buffer_bytes_ = 0;
  bool has_buffered_sequence_ = false;
  uint64_t last_buffered_sequence_ = 0;
  bool download_started_ever_ = false;
  Clock::time_point last_download_start_{};
  uint32_t consecutive_failures_ = 0;
  DecodedMessage scratch_;
  std::vector<std::span<const uint8_t>> spans_;
};

}  // namespace sci
