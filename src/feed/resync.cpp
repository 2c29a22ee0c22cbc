#include "feed/resync.h"

#include <algorithm>
#include <utility>

#include "absl/strings/escaping.h"
#include "common/log.h"
#include "wire/message_apply.h"

namespace sci {
namespace {

// Bytes a buffered message costs beyond its frames (vector, message_t).
constexpr size_t kBufferedOverheadBytes = 256;

// Back-off doubles per consecutive failure, up to this many doublings.
constexpr uint32_t kMaxBackoffDoublings = 4;

// The sequence frame of a three-frame message, if it has that shape. A
// message without one is malformed and will be dropped by the replay.
bool PeekSequence(std::span<const zmq::message_t> frames, uint64_t* sequence) {
  if (frames.size() != 3 || frames[1].size() != 8) return false;
  const auto* b = static_cast<const uint8_t*>(frames[1].data());
  uint64_t s = 0;
  for (int i = 0; i < 8; ++i) s = (s << 8) | b[i];
  *sequence = s;
  return true;
}

}  // namespace

Resync::Resync(Index& index, ResyncOptions options, WakeSignal& wake)
    : index_(index), options_(std::move(options)), wake_(wake) {}

Resync::~Resync() {
  // Also when the subscriber never ran (a start that failed after Begin()):
  // the index must not stay held.
  try {
    SetUrl({});
  } catch (...) {
    Reset();
  }
}

void Resync::Reset() {
  fetch_.reset();  // cancels and joins: nothing writes to the index after this
  buffer_.clear();
  buffer_bytes_ = 0;
  has_buffered_sequence_ = false;
}

void Resync::Begin(Clock::time_point /*now*/) {
  if (!enabled()) return;
  Reset();
  index_.Hold();
  index_.counters().resyncing.Set(true);
  phase_ = Phase::kWaiting;
}

void Resync::SetUrl(std::string url) {
  const bool was_active = active();
  Reset();
  // A download cut short may have left part of a snapshot in the index:
  // never release that.
  if (was_active) index_.Hold();
  options_.snapshot_url = std::move(url);
  phase_ = Phase::kOff;
  consecutive_failures_ = 0;
  index_.counters().resyncing.Set(false);
  // The caller decides what the index becomes; a hold must not outlive us.
  index_.Release();
}

Resync::Clock::duration Resync::Backoff() const {
  const auto interval = std::chrono::milliseconds(options_.min_interval_ms);
  return interval * (uint64_t{1} << std::min(consecutive_failures_, kMaxBackoffDoublings));
}

void Resync::OnMessage(std::span<zmq::message_t> frames, Clock::time_point now) {
  if (phase_ == Phase::kOff) return;
  if (phase_ == Phase::kWaiting) {
    // Too early for another download: this message's effects will be in the
    // snapshot fetched after it, so it can go.
    if (download_started_ever_ && now - last_download_start_ < Backoff()) return;
    // The subscription is live: from this message on, everything is kept.
    StartFetch(now);
  }
  size_t bytes = kBufferedOverheadBytes;
  for (const zmq::message_t& f : frames) bytes += f.size();
  if (buffer_bytes_ + bytes > options_.buffer_bytes) {
    Fail(absl::StrFormat("the stream outran the download: buffer of %d bytes full", options_.buffer_bytes), now);
    return;
  }
  uint64_t sequence = 0;
  if (PeekSequence(frames, &sequence)) {
    if (has_buffered_sequence_ && sequence != last_buffered_sequence_ &&
        sequence != last_buffered_sequence_ + 1) {
      Fail(absl::StrFormat("sequence gap in the buffered stream: expected %d, got %d", last_buffered_sequence_ + 1,
                           sequence),
           now);
      return;
    }
    has_buffered_sequence_ = true;
    last_buffered_sequence_ = sequence;
  }
  Buffered message;
  message.frames.reserve(frames.size());
  for (zmq::message_t& f : frames) message.frames.push_back(std::move(f));
  buffer_.push_back(std::move(message));
  buffer_bytes_ += bytes;
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
  if (phase_ != Phase::kFetching || fetch_ == nullptr || !fetch_->finished()) return false;
  if (!fetch_->ok()) {
    Fail(absl::StrFormat("snapshot %s: %s", absl::CHexEscape(options_.snapshot_url), fetch_->error()), now);
    return false;
  }
  const uint64_t keys = fetch_->keys();
  const size_t replayed = buffer_.size();
  if (!Replay()) {
    Fail("sequence gap while replaying the buffered stream", now);
    return false;
  }
  Reset();
  phase_ = Phase::kOff;
  consecutive_failures_ = 0;
  index_.Release();
  index_.counters().snapshot_keys.Set(keys);
  index_.counters().resyncs.Add();
  index_.counters().resyncing.Set(false);
  Logf(LogLevel::kInfo, "resync: %d keys loaded from %s, %d buffered messages replayed; serving", keys,
       absl::CHexEscape(options_.snapshot_url), replayed);
  return true;
}

bool Resync::Replay() {
  // The download has finished: this thread is the index's only writer again.
  // Hold() left the cursor unset, so the first message begins a run.
  const Stats before = index_.GetStats();
  for (Buffered& message : buffer_) {
    spans_.clear();
    for (const zmq::message_t& f : message.frames) {
      spans_.emplace_back(static_cast<const uint8_t*>(f.data()), f.size());
    }
    try {
      (void)ApplyMessage(index_, spans_, scratch_, nullptr);  // a malformed one is counted and dropped
    } catch (const std::bad_alloc&) {
      return false;  // the index cleared itself; the resync starts over
    }
    if (index_.counters().sequence_gaps.Get() != before.sequence_gaps) return false;
  }
  return true;
}

void Resync::Fail(const std::string& why, Clock::time_point /*now*/) {
  Reset();
  index_.Hold();  // whatever was loaded goes: empty and answering miss
  ++consecutive_failures_;
  phase_ = Phase::kWaiting;
  index_.counters().resync_failures.Add();
  const auto retry = std::chrono::duration_cast<std::chrono::milliseconds>(Backoff()).count();
  Logf(LogLevel::kWarn,
       "resync failed (%d in a row): %s; the index stays empty (answers miss); next attempt in >= %d ms",
       consecutive_failures_, why, retry);
}

}  // namespace sci
