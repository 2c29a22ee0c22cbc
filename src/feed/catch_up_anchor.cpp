#include "feed/catch_up_anchor.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "common/format.h"
#include "wire/msgpack_view.h"

namespace sci {
namespace {

// One read: a few counters from the master's admin server.
constexpr uint32_t kReadTimeoutMs = 2000;

}  // namespace

CatchUpAnchor::CatchUpAnchor(bool proxy_from_env, Clock::duration reread, WakeSignal& wake)
    : proxy_from_env_(proxy_from_env), reread_(reread), wake_(wake) {}

CatchUpAnchor::~CatchUpAnchor() = default;

void CatchUpAnchor::Stop() {
  read_.reset();  // cancels and joins
  state_ = State::kOff;
  shown_before_read_ = 0;
  bound_known_ = false;
  bound_ = 0;
  highest_short_batch_ = 0;
  quiet_candidate_ = false;
  quiet_total_ = 0;
  detail_.clear();
}

void CatchUpAnchor::Start(Clock::time_point now, std::string status_url) {
  Stop();
  url_ = std::move(status_url);
  if (url_.empty()) {
    state_ = State::kUnavailable;
    detail_ = "no status endpoint";
    return;
  }
  state_ = State::kReading;
  next_read_ = now;
}

void CatchUpAnchor::OnBatch(uint64_t sequence, uint32_t events) {
  if (state_ != State::kReading && state_ != State::kWaiting) return;
  if (events < kFullBatch) highest_short_batch_ = std::max(highest_short_batch_, sequence);
  CheckAnchor();
}

void CatchUpAnchor::CheckAnchor() {
  if (!bound_known_ || highest_short_batch_ <= bound_) return;
  state_ = State::kAnchored;
  detail_ = sci::StrFormat("anchored at batch %d (every batch taken before the status read is at most %d)",
                           highest_short_batch_, bound_);
  read_.reset();
}

CatchUpAnchor::State CatchUpAnchor::Poll(Clock::time_point now, bool has_last_sequence, uint64_t last_sequence,
                                         Index& index) {
  if (state_ != State::kReading && state_ != State::kWaiting) return state_;
  if (read_ != nullptr && read_->finished()) TakeAnswer(now, has_last_sequence, last_sequence, index);
  if ((state_ == State::kReading || state_ == State::kWaiting) && read_ == nullptr && now >= next_read_) {
    HttpRequest request;
    request.url = url_;
    request.timeout_ms = kReadTimeoutMs;
    request.proxy_from_env = proxy_from_env_;
    read_ = std::make_unique<StatusRequest>(std::move(request), wake_);
    next_read_ = now + reread_;
    // Every batch shown so far was sent before this read: its answer must
    // account for it (the bound's check in TakeAnswer).
    shown_before_read_ = has_last_sequence ? last_sequence : 0;
  }
  return state_;
}

void CatchUpAnchor::TakeAnswer(Clock::time_point now, bool has_last_sequence, uint64_t last_sequence,
                               Index& index) {
  const std::unique_ptr<StatusRequest> read = std::move(read_);
  std::string why;
  if (!read->ok()) {
    index.feed_counters().status_unavailable.Add();
    why = read->error();
  } else if (!read->status().has_dropped_events) {
    why = "the answer has no dropped_events";
  }
  if (!why.empty()) {
    if (!bound_known_) {
      // No bound: the caller's timer ends the catch-up, as in 1.2.
      state_ = State::kUnavailable;
      detail_ = sci::StrFormat("status %s: %s", absl::CHexEscape(url_), why);
    }
    next_read_ = std::max(next_read_, now + reread_);  // after a good answer: only retried
    return;
  }
  const PublisherStatus& status = read->status();
  // Both are cumulative counts a publisher keeps in 64 bits; a sum that
  // would overflow bounds nothing. A bound below a batch the stream showed
  // before the read is not this stream's publisher's (another master's, or
  // counters reset by a restart): it would anchor the catch-up too early.
  const uint64_t total = status.published_batches + status.dropped_events;
  if (total < status.published_batches || total == UINT64_MAX) {
    why = "published_batches + dropped_events overflows";
  } else if (total + 1 < shown_before_read_) {
    why = sci::StrFormat(
        "its bound (published_batches + dropped_events + 1 = %d) is below batch %d, which the stream showed before "
        "the read: not this stream's publisher, or its counters were reset",
        total + 1, shown_before_read_);
  }
  if (!why.empty()) {
    index.feed_counters().status_refused.Add();
    if (!bound_known_) {
      state_ = State::kUnavailable;
      detail_ = sci::StrFormat("status %s refused: %s", absl::CHexEscape(url_), why);
    }
    return;
  }
  if (!bound_known_) {
    bound_known_ = true;
    bound_ = total + 1;
    state_ = State::kWaiting;
    CheckAnchor();
    if (state_ == State::kAnchored) return;
  }
  // The quiet rule: this answer and the one before it both account for
  // exactly the sequences the stream showed, and nothing moved between.
  const bool quiet = has_last_sequence && total == last_sequence;
  if (quiet && quiet_candidate_ && quiet_total_ == total) {
    state_ = State::kQuiet;
    detail_ = sci::StrFormat("anchored on a quiet master (published + dropped = %d, the last sequence, twice)", total);
    return;
  }
  quiet_candidate_ = quiet;
  quiet_total_ = total;
}

long CatchUpAnchor::MsUntilNextRead(Clock::time_point now) const {
  if ((state_ != State::kReading && state_ != State::kWaiting) || read_ != nullptr) return -1;
  if (next_read_ <= now) return 0;
  return static_cast<long>(std::chrono::ceil<std::chrono::milliseconds>(next_read_ - now).count());
}

}  // namespace sci
