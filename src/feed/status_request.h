// One read of a Mooncake master's `GET /kv_events/status` (wire-formats.md,
// section 6), on a thread of its own so that the subscriber's thread keeps
// receiving meanwhile. The answer's counters are cumulative since that
// publisher started: `published_batches` (tail_watch.h) and `dropped_events`
// (catch_up_anchor.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>

#include "feed/http_download.h"
#include "feed/wake_signal.h"

namespace sci {

struct PublisherStatus {
  uint64_t published_batches = 0;
  // Absent from an answer that does not carry it (then no bound on the
  // sequences dropped events consumed: catch_up_anchor.h cannot use it).
  bool has_dropped_events = false;
  uint64_t dropped_events = 0;
};

// The answer, parsed: JSON with an unsigned `published_batches`, and
// `enabled` not false; `dropped_events`, if present, unsigned. False with
// *why otherwise.
bool ParsePublisherStatus(std::string_view body, PublisherStatus* status, std::string* why);

// "http(s)://host:port/anything" -> "http(s)://host:port/kv_events/status":
// the status endpoint beside a snapshot URL (same admin server). Empty if
// `snapshot_url` is empty.
std::string StatusUrlBeside(std::string_view snapshot_url);

// Where the status is read: `configured` if set, else beside the snapshot.
std::string ResolveStatusUrl(std::string_view configured, std::string_view snapshot_url);

class StatusRequest {
 public:
  // Starts the request and notifies `done` when it has finished.
  StatusRequest(HttpRequest request, WakeSignal& done);
  ~StatusRequest();  // cancels and joins
  StatusRequest(const StatusRequest&) = delete;
  StatusRequest& operator=(const StatusRequest&) = delete;

  bool finished() const { return finished_.load(std::memory_order_acquire); }
  // Valid once finished().
  bool ok() const { return ok_; }
  const PublisherStatus& status() const { return status_; }
  const std::string& error() const { return error_; }

 private:
  void Run(const HttpRequest& request, WakeSignal& done) noexcept;

  HttpDownload download_;
  bool ok_ = false;
  PublisherStatus status_;
  std::string error_;
  std::atomic<bool> finished_{false};
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace sci
