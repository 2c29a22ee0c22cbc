#include "feed/tail_watch.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "common/log.h"

namespace sci {
namespace {

// One read: a few counters from the master's admin server.
constexpr uint32_t kReadTimeoutMs = 2000;
// A batch sent before the read may still be on its way: the grace period
// is at least this, and at least one poll interval.
constexpr auto kMinGrace = std::chrono::milliseconds(250);
// Reads that fail back off, doubling, up to this.
constexpr auto kMaxBackoff = std::chrono::seconds(60);

long MsUntil(TailWatch::Clock::time_point at, TailWatch::Clock::time_point now) {
  if (at <= now) return 0;
  return static_cast<long>(std::chrono::ceil<std::chrono::milliseconds>(at - now).count());
}

}  // namespace

TailWatch::TailWatch(TailWatchOptions options, std::string snapshot_url, WakeSignal& wake)
    : options_(std::move(options)), wake_(wake) {
  SetSnapshotUrl(std::move(snapshot_url));
}

TailWatch::~TailWatch() = default;

std::string TailWatch::StatusUrlFor(const std::string& snapshot_url) const {
  return ResolveStatusUrl(options_.status_url, snapshot_url);
}

void TailWatch::SetStatusUrl(std::string status_url) {
  request_.reset();
  suspect_.reset();
  last_loss_published_ = 0;  // another publisher's counters
  consecutive_failures_ = 0;
  next_read_ = {};
  url_ = std::move(status_url);
}

TailWatch::Clock::duration TailWatch::Grace() const {
  return std::max<Clock::duration>(PollInterval(), kMinGrace);
}

TailWatch::Clock::time_point TailWatch::NextReadAt(Clock::time_point last_message) const {
  return std::max(next_read_, last_message + PollInterval());
}

void TailWatch::TakeAnswer(Clock::time_point now, Index& index) {
  const std::unique_ptr<StatusRequest> request = std::move(request_);
  if (!request->ok()) {
    index.feed_counters().status_unavailable.Add();
    ++consecutive_failures_;
    const auto backoff = std::min<Clock::duration>(PollInterval() * (1u << std::min(consecutive_failures_, 16u)),
                                                   kMaxBackoff);
    next_read_ = now + backoff;
    if (unavailable_warning_.First()) {
      Logf(LogLevel::kWarn,
           "publisher status %s: %s; a loss at the stream's tail is not watched while it fails "
           "(status_unavailable counts the reads; next in %d ms)",
           absl::CHexEscape(url_), request->error(),
           std::chrono::duration_cast<std::chrono::milliseconds>(backoff).count());
    }
    return;
  }
  consecutive_failures_ = 0;
  const Index::Cursor stats = index.cursor();
  // Sequences start at 1 and every sent batch takes one: a master that has
  // sent more batches than our cursor sent some we have not seen. Fewer: a
  // restarted publisher, judged by the event ids (Index::RequireEventContinuity).
  const PublisherStatus& status = request->status();
  const uint64_t published_batches = status.published_batches;
  // Evidence, not authority: counters that cannot account for the batches
  // already applied are another publisher's, or were reset (a restart the
  // stream itself shows). They prove no loss.
  if (stats.has_sequence && status.has_dropped_events &&
      published_batches + status.dropped_events + 1 < stats.last_sequence) {
    index.feed_counters().status_refused.Add();
    if (refused_warning_.First()) {
      Logf(LogLevel::kWarn,
           "publisher status %s: %d batches published and %d events dropped cannot account for batch %d, already "
           "applied: not this stream's publisher, or its counters were reset; ignored (status_refused)",
           absl::CHexEscape(url_), published_batches, status.dropped_events, stats.last_sequence);
    }
    return;
  }
  if (stats.has_sequence && published_batches > stats.last_sequence && published_batches > last_loss_published_) {
    suspect_ = Suspect{stats.last_sequence, published_batches, now + Grace()};
  }
}

bool TailWatch::Poll(Clock::time_point now, bool watching, Clock::time_point last_message, Index& index) {
  if (!enabled()) return false;
  if (request_ != nullptr && request_->finished()) TakeAnswer(now, index);
  if (suspect_) {
    const Index::Cursor stats = index.cursor();
    if (!watching || !stats.has_sequence || stats.last_sequence != suspect_->sequence) {
      suspect_.reset();  // the stream moved on: its sequence rule judges it
    } else if (now >= suspect_->deadline) {
      const Suspect lost = *suspect_;
      suspect_.reset();
      last_loss_published_ = lost.published_batches;
      // Cleared and logged before it is counted: whoever sees tail_losses
      // move finds the index cleared (the cursor goes with it: a resync
      // waits for the next message) and the warning written.
      index.Clear();
      Logf(LogLevel::kWarn,
           "publisher status %s: %d batches published, the last applied is %d, and nothing came for %d ms: "
           "the stream's tail was lost; index cleared",
           absl::CHexEscape(url_), lost.published_batches, lost.sequence,
           std::chrono::duration_cast<std::chrono::milliseconds>(Grace()).count());
      index.feed_counters().tail_losses.Add();
      return true;
    }
  }
  if (request_ == nullptr && watching && !suspect_ && now >= NextReadAt(last_message)) {
    HttpRequest read;
    read.url = url_;
    read.timeout_ms = kReadTimeoutMs;
    read.proxy_from_env = options_.proxy_from_env;
    request_ = std::make_unique<StatusRequest>(std::move(read), wake_);
    next_read_ = now + PollInterval();
  }
  return false;
}

long TailWatch::PollTimeoutMs(long timeout_ms, Clock::time_point now, bool watching,
                              Clock::time_point last_message) const {
  if (!enabled() || !watching) return timeout_ms;
  long due = -1;
  if (suspect_) {
    due = MsUntil(suspect_->deadline, now);
  } else if (request_ == nullptr) {
    due = MsUntil(NextReadAt(last_message), now);
  }  // else a read in flight wakes the loop when it finishes
  if (due < 0) return timeout_ms;
  return timeout_ms < 0 ? due : std::min(timeout_ms, due);
}

}  // namespace sci
