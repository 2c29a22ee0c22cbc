// Finds a loss at the tail of a quiet stream (issue #35 §3;
// index-semantics.md, "Bounds and liveness"). A gap shows only when the
// next message arrives: if the last batches before a quiet spell are lost
// (the publisher's send queue, a failed send), their removals stay unapplied
// for as long as the master is quiet, and removed keys answer hit. The
// master's status endpoint says how many batches it has sent
// (`published_batches`, from sequence 1): while connected and quiet, the
// subscriber reads it at a bounded rate, one read in flight at most. If the
// master has sent more batches than the last sequence applied, and no
// message arrives within a grace period after the read, those batches were
// lost: the caller clears the index (and resyncs if configured).
//
// Owned by the subscriber's thread; only StatusRequest runs elsewhere.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/warn_once.h"
#include "feed/status_request.h"
#include "feed/wake_signal.h"
#include "index/index.h"

namespace sci {

struct TailWatchOptions {
  static constexpr uint32_t kDefaultPollMs = 1000;
  static constexpr uint32_t kNever = UINT32_MAX;
  // Empty: beside the snapshot URL (StatusUrlBeside); neither: no watch.
  std::string status_url;
  uint32_t poll_ms = kDefaultPollMs;  // kNever: no watch
  bool proxy_from_env = false;
};

class TailWatch {
 public:
  using Clock = std::chrono::steady_clock;

  TailWatch(TailWatchOptions options, std::string snapshot_url, WakeSignal& wake);
  ~TailWatch();  // cancels a read in flight

  // A new leader: its snapshot URL (the status endpoint is beside it unless
  // one was given). Forgets what was suspected of the old stream.
  void SetSnapshotUrl(std::string snapshot_url) { SetStatusUrl(StatusUrlFor(snapshot_url)); }
  // The same in two steps, so that a leader change can allocate before it
  // changes anything: where the status is read for that snapshot URL, then
  // the switch (allocates nothing).
  std::string StatusUrlFor(const std::string& snapshot_url) const;
  void SetStatusUrl(std::string status_url);

  // On every wake-up of the loop. `watching`: connected, the stream trusted,
  // no resync under way, a cursor set. True when a loss at the tail is
  // established: the index is cleared, then counted in tail_losses.
  bool Poll(Clock::time_point now, bool watching, Clock::time_point last_message, Index& index);

  // `timeout_ms` (the loop's, -1 = none), shortened to the next read or the
  // grace period's end.
  long PollTimeoutMs(long timeout_ms, Clock::time_point now, bool watching, Clock::time_point last_message) const;

  bool enabled() const { return !url_.empty() && options_.poll_ms != TailWatchOptions::kNever; }

 private:
  struct Suspect {
    uint64_t sequence;  // the cursor when the read showed more batches sent
    uint64_t published_batches;
    Clock::time_point deadline;
  };

  Clock::duration PollInterval() const { return std::chrono::milliseconds(options_.poll_ms); }
  Clock::duration Grace() const;
  // When the next read is due (quiet for an interval, the back-off over).
  Clock::time_point NextReadAt(Clock::time_point last_message) const;
  void TakeAnswer(Clock::time_point now, Index& index);

  const TailWatchOptions options_;
  WakeSignal& wake_;
  std::string url_;
  std::unique_ptr<StatusRequest> request_;
  Clock::time_point next_read_{};  // no read before (interval, back-off)
  uint32_t consecutive_failures_ = 0;
  std::optional<Suspect> suspect_;
  // published_batches of the last loss established (0: none): its batches
  // were all sent before the resync that followed took its snapshot, which
  // therefore reflects them. Only a count beyond it can show a new loss, so
  // a status that keeps claiming the same batches (they are lost for good,
  // or it is another master's) costs one clear, not one every poll.
  uint64_t last_loss_published_ = 0;
  WarnOnce refused_warning_;
  WarnOnce unavailable_warning_;
};

}  // namespace sci
