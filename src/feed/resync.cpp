#include "feed/resync.h"
#include "common/format.h"

#include <algorithm>
#include <climits>
#include <utility>

#include "absl/strings/escaping.h"
#include "common/log.h"
#include "feed/batch_peek.h"
#include "feed/status_request.h"
#include "wire/message_apply.h"

namespace sci {
namespace {

// Back-off doubles per consecutive failure, up to this many doublings.
constexpr uint32_t kMaxBackoffDoublings = 4;
// The anchor's reads on a quiet master are catch_up_ms apart, at least this.
constexpr auto kMinStatusReread = std::chrono::milliseconds(10);

// How long a resync holds the index past its snapshot waiting for its
// anchor once the publisher's bound is known: a queue lagging longer is
// released with its stores deferred (Release::kWithholding) instead.
constexpr auto kMaxAnchorHold = std::chrono::seconds(5);
// A deferral on a stream that stays silent this long after the release
// (not one batch: a worker paused with one holds back all that follow)
// applies what it deferred. The bound of what a paused worker can fool.
constexpr auto kQuietConfirm = std::chrono::seconds(5);

}  // namespace

Resync::Resync(Index& index, ResyncOptions options, WakeSignal& wake)
    : index_(index),
      options_(std::move(options)),
      wake_(wake),
      buffer_(ResyncBuffer::Limits{options_.buffer_bytes, options_.spill_bytes, options_.spill_dir}),
      anchor_(options_.proxy_from_env,
              std::max<Clock::duration>(std::chrono::milliseconds(options_.catch_up_ms), kMinStatusReread), wake) {}

std::string Resync::StatusUrl() const {
  if (!options_.read_status) return {};
  return ResolveStatusUrl(options_.status_url, options_.snapshot_url);
}

Resync::~Resync() {
  // Also when the subscriber never ran (a start that failed after Begin()):
  // the index must not stay held.
  try {
    SetUrls({}, {});
  } catch (...) {
    Reset();
  }
}

void Resync::Reset() {
  fetch_.reset();  // cancels and joins: nothing writes to the index after this
  anchor_.Stop();
  DropBuffer();
  EndWithholding(/*apply=*/false);
}

void Resync::EndWithholding(bool apply) {
  if (!withholding_) return;
  withholding_.reset();
  index_.EndDeferral(apply);
}

void Resync::DropBuffer() { buffer_.Clear(); }

void Resync::Begin(Clock::time_point /*now*/) {
  if (!enabled()) return;
  Reset();
  index_.Conceal();
  index_.feed_counters().resyncing.Set(true);
  phase_ = Phase::kWaiting;
  // A new history (start-up, a new leader, a clear that reset the cursor):
  // nothing proves the subscription yet, and no sequence is known to follow.
  live_ = false;
  has_stream_sequence_ = false;
  has_stream_ids_ = false;
  continuity_required_ = false;
}

void Resync::BeginAfterClear(Clock::time_point now, bool connection_live) {
  if (!enabled()) return;
  const Index::Cursor before = index_.cursor();  // Begin's hold unsets it
  Begin(now);
  // A gap or an all-cleared event leaves the cursor at its batch: the
  // stream goes on from there. A clear by hand or by the stale rule
  // reset it: the next message begins a new history.
  if (!before.has_sequence) return;
  has_stream_sequence_ = true;
  last_stream_sequence_ = before.last_sequence;
  has_stream_ids_ = before.has_event_id;
  last_stream_event_id_ = before.last_event_id;
  live_ = connection_live;
}

bool Resync::SamePublisher(const BatchPeek& peek) const {
  if (peek.ids_known && has_stream_ids_) return peek.first_id == last_stream_event_id_ + 1;
  return !continuity_required_;
}

void Resync::SetUrls(std::string url, std::string status_url) {
  const bool was_active = active();
  Reset();
  // A download cut short may have left part of a snapshot in the index:
  // never release that.
  if (was_active) index_.Conceal();
  // Moved: allocates nothing (a leader change relies on it).
  options_.snapshot_url = std::move(url);
  options_.status_url = std::move(status_url);
  phase_ = Phase::kOff;
  consecutive_failures_ = 0;
  live_ = false;
  has_stream_sequence_ = false;  // a new leader is a new sequence space
  has_stream_ids_ = false;
  continuity_required_ = false;
  index_.feed_counters().resyncing.Set(false);
  // The caller decides what the index becomes; a hold must not outlive us.
  index_.Reveal();
}

Resync::Clock::duration Resync::Backoff() const {
  const auto interval = std::chrono::milliseconds(options_.min_interval_ms);
  return interval * (uint64_t{1} << std::min(consecutive_failures_, kMaxBackoffDoublings));
}

bool Resync::ReadyToFetch() const {
  // Live: a message buffered, or the clear's own batch (nothing buffered
  // then, but the stream's last sequence is known, and the cursor resumes
  // there after the load).
  return phase_ == Phase::kWaiting && live_ && (!buffer_.empty() || has_stream_sequence_);
}

bool Resync::DownloadDue(Clock::time_point now) const {
  if (!ReadyToFetch()) return false;
  return !download_started_ever_ || now - last_download_start_ >= Backoff();
}

// Milliseconds from `now` to `at`, rounded up so that the wake-up is never
// just before it; 0 if it has passed.
long MsUntil(Resync::Clock::time_point at, Resync::Clock::time_point now) {
  const auto left = at - now;
  if (left <= Resync::Clock::duration::zero()) return 0;
  return static_cast<long>(std::min<int64_t>(std::chrono::ceil<std::chrono::milliseconds>(left).count(), INT_MAX));
}

long Resync::PollTimeoutMs(long timeout_ms, Clock::time_point now) const {
  if (withholding_) {
    const long quiet_ms = MsUntil(withholding_->last_batch_at + kQuietConfirm, now);
    timeout_ms = timeout_ms < 0 ? quiet_ms : std::min(timeout_ms, quiet_ms);
  }
  if (phase_ == Phase::kCatchingUp) {
    // The timer, or the anchor's next read (one in flight wakes the loop).
    long due_ms = anchor_.state() == CatchUpAnchor::State::kUnavailable ? MsUntil(catch_up_until_, now)
                                                                         : anchor_.MsUntilNextRead(now);
    if (anchor_.bound_known()) {
      const long hold_ms = MsUntil(hold_limit_at_, now);
      due_ms = due_ms < 0 ? hold_ms : std::min(due_ms, hold_ms);
    }
    if (due_ms < 0) return timeout_ms;
    return timeout_ms < 0 ? due_ms : std::min(timeout_ms, due_ms);
  }
  if (!ReadyToFetch()) return timeout_ms;
  const long due_ms = download_started_ever_ ? MsUntil(last_download_start_ + Backoff(), now) : 0;
  return timeout_ms < 0 ? due_ms : std::min(timeout_ms, due_ms);
}

void Resync::OnMessage(std::span<zmq::message_t> frames, Clock::time_point now) {
  if (phase_ == Phase::kOff) return;
  // Sequence gaps, each counted once. Every pair of consecutive messages
  // (previous, this) is judged by one side only: by the index when it
  // applies `this`, else here. While a resync is active every message comes
  // here, none to the index, and is judged against the last sequence the
  // stream showed: BeginAfterClear takes it over from the index's cursor
  // (the batch that made the clear, whose own gap the index counted), and it
  // carries across failures. The buffer never holds a gap (it restarts at
  // one) and its replay begins with the cursor unset, so the index does not
  // count these again; once the resync completes, the index's cursor is the
  // last buffered sequence (or resumes at the last one seen) and the index
  // judges the next message. A message without a readable sequence is
  // judged by nobody here (the replay drops it as malformed).
  const BatchPeek peek = PeekBatch(frames);
  std::string why;  // a break in the stream, if this message shows one
  if (peek.has_sequence && has_stream_sequence_ && peek.sequence != last_stream_sequence_) {
    if (peek.sequence != last_stream_sequence_ + 1) {
      index_.CountStreamBreak(/*restart=*/false);
      why = sci::StrFormat("sequence gap in the buffered stream: expected %d, got %d", last_stream_sequence_ + 1,
                           peek.sequence);
    } else if (peek.events > 0 && !SamePublisher(peek)) {
      // The same judgement as the index's (Index::ApplyBatch): a restart
      // whose sequence runs on must not splice two publishers' histories.
      index_.CountStreamBreak(/*restart=*/true);
      why = peek.ids_known && has_stream_ids_
                ? sci::StrFormat("publisher restart in the buffered stream: batch %d begins at event id %d, not %d",
                                 peek.sequence, peek.first_id, last_stream_event_id_ + 1)
                : sci::StrFormat("publisher restart suspected in the buffered stream: batch %d after a reconnect "
                                 "shows no event ids continuing the last ones",
                                 peek.sequence);
    }
  }
  if (!why.empty()) {
    if (SnapshotUnderWay()) {
      Fail(why, now);  // and this message begins the next buffer, below
    } else if (!buffer_.empty()) {
      // No download yet: the snapshot will be taken after this message,
      // which begins the buffer anew (and a run, when replayed).
      Logf(LogLevel::kInfo, "resync: %s; the buffer restarts there", why);
      DropBuffer();
    }
  }
  if (peek.has_sequence) {
    has_stream_sequence_ = true;
    last_stream_sequence_ = peek.sequence;
    if (peek.events > 0) {
      has_stream_ids_ = peek.ids_known;
      last_stream_event_id_ = peek.last_id;
      continuity_required_ = false;
    }
  }
  live_ = true;  // it came on the current connection
  // Read before the buffer takes the frames: the batch may anchor the
  // catch-up (catch_up_anchor.h), once it is buffered below.
  const bool anchor_candidate = phase_ == Phase::kCatchingUp && peek.has_sequence && peek.has_events;
  const bool spilling = buffer_.spilled_bytes() > 0;
  std::string full;
  if (!buffer_.Add(frames, &full)) {
    const std::string overflow = "the stream outran the download: " + full;
    if (SnapshotUnderWay()) {
      Fail(overflow, now);
    } else if (!buffer_.empty()) {
      Logf(LogLevel::kInfo, "resync: %s before the download; the buffer restarts at this message", overflow);
      DropBuffer();
    }
    // Too large for the buffer on its own: dropped. It precedes the
    // snapshot, which is all that needs (the cursor resumes after it if
    // nothing follows).
    if (!buffer_.Add(frames, &full)) return;
  }
  if (anchor_candidate && phase_ == Phase::kCatchingUp) anchor_.OnBatch(peek.sequence, peek.events);
  if (!spilling && buffer_.spilled_bytes() > 0) {
    Logf(LogLevel::kInfo, "resync: %d bytes of stream buffered in memory; the rest goes to a temporary file",
         buffer_.memory_bytes());
  }
  // The subscription is live: the download starts now if the back-off allows
  // (else Poll starts it when the back-off ends).
  if (DownloadDue(now)) StartFetch(now);
}

void Resync::StartFetch(Clock::time_point now) {
  download_started_ever_ = true;
  last_download_start_ = now;
  phase_ = Phase::kFetching;
  HttpRequest request;
  request.url = options_.snapshot_url;
  request.timeout_ms = options_.timeout_ms;
  request.proxy_from_env = options_.proxy_from_env;
  Logf(LogLevel::kInfo, "resync: downloading the snapshot %s", absl::CHexEscape(options_.snapshot_url));
  fetch_ = std::make_unique<SnapshotFetch>(index_, std::move(request), wake_);
}

bool Resync::Poll(Clock::time_point now) {
  if (withholding_ && now - withholding_->last_batch_at >= kQuietConfirm) {
    // Silent since the release (or the last batch): a worker paused with a
    // batch for this long is the bound docs/operations.md states.
    EndWithholding(/*apply=*/true);
    Logf(LogLevel::kInfo, "resync: the stream stayed silent for %d ms; the deferred stores applied",
         std::chrono::duration_cast<std::chrono::milliseconds>(kQuietConfirm).count());
  }
  // The back-off may have ended with no message since: start now (issue 24).
  if (DownloadDue(now)) {
    StartFetch(now);
    return false;
  }
  if (phase_ == Phase::kFetching) {
    if (fetch_ == nullptr || !fetch_->finished()) return false;
    if (!fetch_->ok()) {
      // What is buffered is still exact for the next download, taken after it.
      Fail(sci::StrFormat("snapshot %s: %s", absl::CHexEscape(options_.snapshot_url), fetch_->error()), now,
           /*keep_buffer=*/true);
      return false;
    }
    // Loaded: the events it may already reflect are still on their way.
    phase_ = Phase::kCatchingUp;
    snapshot_loaded_at_ = now;
    catch_up_until_ = now + std::chrono::milliseconds(options_.catch_up_ms);
    hold_limit_at_ = now + kMaxAnchorHold;
    anchor_.Start(now, StatusUrl());
  }
  if (phase_ == Phase::kCatchingUp) {
    const CatchUpAnchor::State before = anchor_.state();
    if (anchor_.Poll(now, has_stream_sequence_, last_stream_sequence_, index_) == CatchUpAnchor::State::kUnavailable &&
        before != CatchUpAnchor::State::kUnavailable && anchor_unavailable_warning_.First()) {
      Logf(LogLevel::kWarn,
           "resync: %s; the catch-up ends on the %d ms timer, as in 1.2, which a publisher queue lagging longer "
           "does not cover (resyncs_timed counts such resyncs; docs/operations.md, \"Resync\")",
           anchor_.detail(), options_.catch_up_ms);
    }
  }
  if (!ReplayDue(now)) return false;
  // How the catch-up ends (resync.h): anchored, the buffer replayed whole;
  // on the timer without the endpoint, as in 1.2; otherwise (a quiet
  // master, the hold's limit) released with stored events withheld until
  // the anchor comes.
  const CatchUpAnchor::State how = anchor_.state();
  const Release release = how == CatchUpAnchor::State::kAnchored      ? Release::kAnchored
                          : how == CatchUpAnchor::State::kUnavailable ? Release::kTimed
                                                                      : Release::kWithholding;
  const uint64_t bound = anchor_.bound();
  const std::string catch_up = release == Release::kAnchored ? anchor_.detail()
                               : release == Release::kTimed
                                   ? "timed: " + anchor_.detail()
                                   : sci::StrFormat("not anchored yet (%s); stored events withheld until a batch "
                                                    "beyond %d of fewer than %d events",
                                                    how == CatchUpAnchor::State::kQuiet
                                                        ? anchor_.detail()
                                                        : std::string("the hold's limit"),
                                                    bound, CatchUpAnchor::kFullBatch);
  const uint64_t keys = fetch_->keys();
  const size_t replayed = buffer_.messages();
  const size_t spilled = buffer_.spilled_bytes();
  // The index defers from the replay on, and withholding_ says so before
  // anything can fail: every way out (Fail, Reset, the loop's recovery from
  // an exception out of Replay) ends the deferral through EndWithholding.
  if (release == Release::kWithholding) {
    withholding_ = Withholding{bound, now + std::chrono::milliseconds(options_.catch_up_max_ms), now};
    index_.DeferStores();
  }
  if (std::string why = Replay(); !why.empty()) {
    Fail(why, now);
    return false;
  }
  // Reset() but the deferral, which goes on.
  fetch_.reset();
  anchor_.Stop();
  DropBuffer();
  phase_ = Phase::kOff;
  consecutive_failures_ = 0;
  // How the catch-up ends is counted before the index serves: a reader who
  // meets a hit only a timed catch-up can give (a removal lagging past its
  // timer) finds resyncs_timed already moved. Counted after, the simulation
  // met such a hit with the counter still behind (2 seeds in its soak).
  switch (release) {
    case Release::kAnchored: index_.feed_counters().resyncs_anchored.Add(); break;
    case Release::kTimed: index_.feed_counters().resyncs_timed.Add(); break;
    case Release::kWithholding: index_.feed_counters().resyncs_withholding.Add(); break;
  }
  index_.Reveal();
  index_.feed_counters().snapshot_keys.Set(keys);
  Logf(LogLevel::kInfo,
       "resync: %d keys loaded from %s, %d buffered messages replayed (%d bytes from the file); catch-up %s; serving",
       keys, absl::CHexEscape(options_.snapshot_url), replayed, spilled, catch_up);
  // The conductor line's /get_all_keys lists puts still in progress (main
  // lists readable objects only): docs/operations.md, "Resync".
  if (index_.counters().stream_generation.Get() == 2 && unfinished_puts_warning_.First()) {
    Logf(LogLevel::kWarn,
         "resync: the master is second-generation (the conductor line): its snapshot may list puts still in "
         "progress, which answer hit until they complete, or for good if revoked (docs/operations.md, \"Resync\")");
  }
  // Counted last: whoever sees `resyncs` move finds the resync logged too.
  index_.feed_counters().resyncing.Set(false);
  index_.feed_counters().resyncs.Add();
  return true;
}

void Resync::OnLiveBatch(std::span<const zmq::message_t> frames, Clock::time_point now) {
  if (!withholding_) return;
  const BatchPeek peek = PeekBatch(frames);
  // The anchor (catch_up_anchor.h): taken from a queue the worker emptied
  // after the status read, so every event the snapshot may reflect is in
  // this batch or an earlier one. It is applied whole. Only a batch that
  // continues the stream can be it: one that shows a gap or a restart
  // clears instead (what waits must not show even for the moment between).
  const Index::Cursor cursor = index_.cursor();
  const bool continues = cursor.has_sequence && peek.sequence == cursor.last_sequence + 1 &&
                         (!peek.ids_known || !cursor.has_event_id || peek.first_id == cursor.last_event_id + 1);
  if (peek.has_sequence && peek.has_events && peek.events < CatchUpAnchor::kFullBatch &&
      peek.sequence > withholding_->bound && continues) {
    const uint64_t bound = withholding_->bound;
    EndWithholding(/*apply=*/true);
    Logf(LogLevel::kInfo, "resync: the anchor came, batch %d (beyond %d); the deferred stores applied",
         peek.sequence, bound);
    return;
  }
  withholding_->last_batch_at = now;
  if (now < withholding_->until) return;
  // Batches flow and none anchors: the bound was not this stream's (a
  // status from another master, dropped_events over-counted by failed
  // sends). Stores apply again; what that leaves open is stated in
  // docs/operations.md ("Where the catch-up ends").
  const uint64_t bound = withholding_->bound;
  EndWithholding(/*apply=*/true);
  if (unanchored_warning_.First()) {
    Logf(LogLevel::kWarn,
         "resync: no batch beyond %d of fewer than %d events within %d ms of serving while the stream flowed; "
         "the deferred stores applied without the anchor (catch_ups_unanchored; is the status endpoint this "
         "master's?)",
         bound, CatchUpAnchor::kFullBatch, options_.catch_up_max_ms);
  }
  index_.feed_counters().catch_ups_unanchored.Add();
}

std::string Resync::Replay() {
  // The download has finished: this thread is the index's only writer again.
  // Conceal() left the cursor unset, so the first message begins a run.
  std::string why;
  const bool replayed = buffer_.ForEach(
      [&](std::span<const std::span<const uint8_t>> frames) {
        BatchOutcome outcome;
        try {
          // A malformed one is counted and dropped.
          if (!ApplyMessage(index_, frames, scratch_, nullptr, &outcome)) return true;
        } catch (const std::bad_alloc&) {
          why = "out of memory replaying the buffered stream";  // the index cleared itself; the resync starts over
          return false;
        }
        if (outcome.sequence == BatchOutcome::Sequence::kGap || outcome.sequence == BatchOutcome::Sequence::kRestart) {
          why = "sequence gap or publisher restart while replaying the buffered stream";
          return false;
        }
        return true;
      },
      &why);
  if (!replayed) return why;
  // Nothing buffered (the clear's own batch proved the subscription, and
  // the stream stayed quiet): the stream goes on after its last sequence,
  // all of which came before the snapshot.
  if (buffer_.empty() && has_stream_sequence_) {
    index_.ResumeAt(Index::Cursor{true, last_stream_sequence_, has_stream_ids_, last_stream_event_id_});
  }
  // Without a cursor the next live message would be accepted whatever was
  // lost before it (a buffer of malformed messages only).
  if (!index_.cursor().has_sequence) return "no buffered message could be applied";
  return {};
}

void Resync::RestartAfterFailure(Clock::time_point now) {
  if (!enabled()) return;
  if (active()) {
    Fail("the subscriber's loop failed", now);
  } else {
    Begin(now);
  }
}

void Resync::Fail(const std::string& why, Clock::time_point /*now*/, bool keep_buffer) {
  fetch_.reset();  // cancels and joins: nothing writes to the index after this
  anchor_.Stop();
  EndWithholding(/*apply=*/false);
  if (!keep_buffer) DropBuffer();
  index_.Conceal();  // whatever was loaded goes: empty and answering miss
  ++consecutive_failures_;
  phase_ = Phase::kWaiting;
  index_.feed_counters().resync_failures.Add();
  const auto retry = std::chrono::duration_cast<std::chrono::milliseconds>(Backoff()).count();
  Logf(LogLevel::kWarn,
       "resync failed (%d in a row): %s; the index stays empty (answers miss); next attempt in >= %d ms",
       consecutive_failures_, why, retry);
}

}  // namespace sci
