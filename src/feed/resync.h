// The resync state machine: refills a cleared index from a snapshot of the
// master's keys and stays exact (docs/index-semantics.md, "Resync").
//
//   kOff ──Begin()──▶ kWaiting ──subscription live, back-off over──▶ kFetching
//     ▲                  ▲                                               │
//     │                  ├──────── failure (counted, logged) ◀───────────┤
//     │                  │                                  snapshot loaded
//     │                  │                                               ▼
//     │                  └──── gap, overflow ◀──────────────────── kCatchingUp
//     └────────────── catch-up over, buffer replayed ◀───────────────────┘
//
// Begin() empties and holds the index (every query answers miss). From the
// first message on the connection, which proves the subscription live,
// every message is buffered (bounded; resync_buffer.h: in memory, then
// spilled to a file), in kWaiting too: the snapshot is
// downloaded after them, and replaying a message older than the snapshot is
// exact (a key it stores is in the snapshot or removed later in the buffer;
// a key it removes is gone or stored later in the buffer). A clear made by
// the stream itself (a gap, an all-cleared event: BeginAfterClear) on a
// connection that delivered it is already proven live. The download starts
// as soon as the subscription is live and the back-off is over: on a
// message, or on Poll() once the back-off ends (the subscriber wakes for
// it: PollTimeoutMs), so a master gone quiet is resynced all the same.
// SnapshotFetch downloads and loads the snapshot. The stream is then
// buffered a while more (kCatchingUp): Mooncake changes its metadata before
// its publisher thread sends the event (a queue between them), and the
// snapshot carries no sequence, so it may already reflect events that
// arrive after its last byte; a store it has seen removed, applied after
// it, would show the key until the removal came (a false hit). Buffered and
// replayed before the hold ends, such events only bring the index to where
// the snapshot was. The catch-up ends where the publisher's own counters
// prove every event older than the snapshot buffered (catch_up_anchor.h:
// counted in resyncs_anchored); without its status endpoint, after
// catch_up_ms, as in 1.2 (resyncs_timed). Then the buffer is
// replayed in order with the index's cursor unset, so the first buffered
// message begins a run (the early-gap rule for the Mooncake format) -- or,
// the buffer being empty, the cursor resumes at the last sequence the
// stream showed -- and the hold is released.
//
// Where the catch-up ends (1.3.0). The quiet rule (catch_up_anchor.h)
// cannot tell a quiet master from a worker paused with a batch it took
// before the snapshot, and a lagging queue may not anchor for long; so
// either (the quiet rule, or kMaxAnchorHold with a bound and no anchor)
// releases the hold at once with the index's stores deferred
// (Index::DeferStores: each key's last store waits, removals apply), and
// the deferral ends -- what waits applied -- at the anchor (OnLiveBatch),
// after kQuietConfirm without any batch, or after catch_up_max_ms of
// batches without the anchor (catch_ups_unanchored). A reset or failure
// drops what waits. docs/operations.md states what a pause longer than
// those bounds can still show.
//
// A failure -- the download's (status, time-out, truncation, malformed
// body), a buffer overflow or a gap while it runs, a gap during the replay
// -- is counted (resync_failures) and logged, leaves the index empty and
// held, and the next download starts no earlier than resync_min_interval_ms
// after the previous one, doubled per consecutive failure (up to 16 times).
// While no download runs, a gap or an overflow only restarts the buffer at
// the message that showed it (the snapshot comes after it: nothing lost).
//
// Sequence gaps the stream shows while a resync waits or runs are counted
// here (sequence_gaps), each once: see OnMessage.
//
// Owned by the subscriber's thread; only SnapshotFetch runs elsewhere.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/warn_once.h"
#include "feed/batch_peek.h"
#include "feed/catch_up_anchor.h"
#include "feed/resync_buffer.h"
#include "feed/snapshot_fetch.h"
#include "feed/wake_signal.h"
#include "index/index.h"
#include "wire/wire_decoder.h"

namespace sci {

struct ResyncOptions {
  static constexpr uint32_t kDefaultMinIntervalMs = 5000;
  static constexpr uint32_t kDefaultTimeoutMs = 60000;
  // Messages buffered while a resync waits and its snapshot downloads, in
  // bytes (frames plus a per-message overhead): the first buffer_bytes in
  // memory, then up to spill_bytes in a temporary file (resync_buffer.h).
  // A live stream of 100k production events/s is ~30 MB/s: memory holds
  // about a second of a busy master, the file over two minutes (a 30M-key
  // resync takes about 20 s). Beyond both a running download fails (before
  // one, the buffer restarts).
  static constexpr size_t kDefaultBufferBytes = size_t{32} << 20;
  static constexpr size_t kDefaultSpillBytes = size_t{4} << 30;

  std::string snapshot_url;  // empty = no resync (1.0 behaviour)
  uint32_t min_interval_ms = kDefaultMinIntervalMs;
  uint32_t timeout_ms = kDefaultTimeoutMs;
  size_t buffer_bytes = kDefaultBufferBytes;
  // Without the status endpoint: how long the stream is still buffered once
  // the snapshot is loaded (see above). Mooncake's publisher sends an event
  // within a few ms of the change when its queue is short: 100 ms covers
  // that, for a hold 100 ms longer (a lagging queue it does not cover: the
  // anchor does). 0: replay what has come at once. With the endpoint: the
  // interval between its reads on a quiet master.
  static constexpr uint32_t kDefaultCatchUpMs = 100;
  uint32_t catch_up_ms = kDefaultCatchUpMs;
  // The bound on a catch-up released before its anchor (its stores
  // deferred): past it, a batch that is not the anchor ends the deferral.
  static constexpr uint32_t kDefaultCatchUpMaxMs = 30000;
  uint32_t catch_up_max_ms = kDefaultCatchUpMaxMs;
  // The master's GET /kv_events/status, which anchors the catch-up
  // (catch_up_anchor.h). Empty: beside snapshot_url (StatusUrlBeside).
  std::string status_url;
  bool read_status = true;  // false: never read it (the timer alone)
  size_t spill_bytes = kDefaultSpillBytes;  // 0: never spill
  std::string spill_dir;                    // empty: $TMPDIR, else /tmp
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

  // Replaces the snapshot URL and the status URL (a new leader: its own
  // admin server's, never the old one's) : stops what runs and goes back to
  // kOff, without counting a failure. The caller clears or Begin()s.
  void SetUrls(std::string url, std::string status_url);

  // A message received while active(): its frames are moved out of
  // `frames` (the first `n_frames`).
  void OnMessage(std::span<zmq::message_t> frames, Clock::time_point now);

  // Begin() after a clear the stream made (a gap, an all-cleared event),
  // the index's cursor still at the batch that made it. `connection_live`:
  // that batch came on the current connection, which proves the
  // subscription live: the download needs no further message.
  void BeginAfterClear(Clock::time_point now, bool connection_live);

  // The subscriber's loop failed (out of memory, no thread for a download)
  // and has emptied the index: a resync under way fails (counted, back-off),
  // otherwise one begins (the next message proves the subscription live:
  // the cursor went with the index, so nothing links it to the last one).
  void RestartAfterFailure(Clock::time_point now);

  // The connection the stream came on is gone: a message on the next one
  // must prove the subscription live again before a download starts (what
  // is buffered stays; the sequence check judges the next message).
  // `restart_possible`: nothing will show a restart behind the reconnect
  // but the event ids, which the next batch that continues the sequence
  // must then continue (Index::RequireEventContinuity's rule, here for the
  // buffered stream).
  void OnConnectionLost() {
    live_ = false;
    continuity_required_ = true;
  }

  // Whether a message (or the clear) proved the subscription live since
  // Begin() and no connection was lost since.
  bool live() const { return live_; }

  // Starts a download that is due; finishes one that ended. Call after
  // every wake-up of the loop. True when a resync completed just now (the
  // index serves again).
  bool Poll(Clock::time_point now);

  // The catch-up is over: the next Poll() replays the buffer. What the
  // socket already holds should be handed to OnMessage() first, so that the
  // replay is as recent as the stream allows.
  bool ReplayDue(Clock::time_point now) const {
    return phase_ == Phase::kCatchingUp &&
           (anchor_.ended() || (anchor_.state() == CatchUpAnchor::State::kUnavailable && now >= catch_up_until_) ||
            (anchor_.bound_known() && now >= hold_limit_at_));
  }

  // Serving, with stored events deferred until the catch-up's anchor comes
  // (a resync released before it: see "Where the catch-up ends" above).
  bool withholding() const { return withholding_.has_value(); }
  // A live message about to be applied while withholding(): if it is the
  // anchor, withholding ends before it is applied (it applies whole); past
  // catch_up_max_ms from the snapshot, withholding ends unanchored
  // (catch_ups_unanchored, warned once).
  void OnLiveBatch(std::span<const zmq::message_t> frames, Clock::time_point now);

  // `timeout_ms` (the loop's own, -1 = none), shortened to the end of the
  // back-off if a download waits for it, or to the end of the catch-up.
  long PollTimeoutMs(long timeout_ms, Clock::time_point now) const;

 private:
  enum class Phase { kOff, kWaiting, kFetching, kCatchingUp };
  // How a catch-up ended (Poll).
  enum class Release { kAnchored, kTimed, kWithholding };
  struct Withholding {
    uint64_t bound;                   // the anchor is a batch beyond it of fewer than 64 events
    Clock::time_point until;          // a batch after this ends it without the anchor
    Clock::time_point last_batch_at;  // silent kQuietConfirm since: ended too
  };

  // Downloading or loaded: a gap or an overflow now fails the resync.
  bool SnapshotUnderWay() const { return phase_ == Phase::kFetching || phase_ == Phase::kCatchingUp; }

  void StartFetch(Clock::time_point now);
  // Waiting, and the subscription proven live: only the back-off may delay
  // the download.
  bool ReadyToFetch() const;
  bool DownloadDue(Clock::time_point now) const;
  std::string Replay();  // empty, or why it failed
  void Fail(const std::string& why, Clock::time_point now, bool keep_buffer = false);
  void Reset();  // stops the download, drops the buffer
  void DropBuffer();
  // Stops deferring the index's stores; `apply`: what waits is applied.
  void EndWithholding(bool apply);
  // Whether a batch that continues the buffered stream's sequence comes
  // from its publisher (its event ids continue the last ones).
  bool SamePublisher(const BatchPeek& peek) const;
  std::string StatusUrl() const;  // where the anchor reads (empty: nowhere)
  Clock::duration Backoff() const;

  Index& index_;
  ResyncOptions options_;
  WakeSignal& wake_;

  Phase phase_ = Phase::kOff;
  std::unique_ptr<SnapshotFetch> fetch_;
  ResyncBuffer buffer_;
  bool live_ = false;  // see live()
  // The last sequence the stream showed (buffered or not, across failures),
  // for gap counting and for resuming the cursor with nothing buffered.
  bool has_stream_sequence_ = false;
  uint64_t last_stream_sequence_ = 0;
  // The last event id the stream showed, in a batch with events.
  bool has_stream_ids_ = false;
  uint64_t last_stream_event_id_ = 0;
  bool continuity_required_ = false;  // a connection was lost since (OnConnectionLost)
  bool download_started_ever_ = false;
  Clock::time_point last_download_start_{};
  Clock::time_point catch_up_until_{};  // kCatchingUp without the anchor: when the replay is due
  Clock::time_point snapshot_loaded_at_{};
  Clock::time_point hold_limit_at_{};  // kCatchingUp with a bound: released (withholding) at the latest then
  std::optional<Withholding> withholding_;
  CatchUpAnchor anchor_;
  uint32_t consecutive_failures_ = 0;
  DecodedMessage scratch_;
  WarnOnce unfinished_puts_warning_;
  WarnOnce anchor_unavailable_warning_;
  WarnOnce unanchored_warning_;
};

}  // namespace sci
