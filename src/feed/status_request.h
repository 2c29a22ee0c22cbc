// One read of a Mooncake master's `GET /kv_events/status` (wire-formats.md,
// section 6), on a thread of its own so that the subscriber's thread keeps
// receiving meanwhile. The answer's counters are cumulative since that
// publisher started; only `published_batches` is used (tail_watch.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>

#include "feed/http_download.h"
#include "feed/wake_signal.h"

namespace sci {

// The answer, parsed: JSON with an unsigned `published_batches`, and
// `enabled` not false. False with *why otherwise.
bool ParsePublisherStatus(std::string_view body, uint64_t* published_batches, std::string* why);

// "http(s)://host:port/anything" -> "http(s)://host:port/kv_events/status":
// the status endpoint beside a snapshot URL (same admin server). Empty if
// `snapshot_url` is empty.
std::string StatusUrlBeside(std::string_view snapshot_url);

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
  uint64_t published_batches() const { return published_batches_; }
  const std::string& error() const { return error_; }

 private:
  void Run(const HttpRequest& request, WakeSignal& done) noexcept;

  HttpDownload download_;
  bool ok_ = false;
  uint64_t published_batches_ = 0;
  std::string error_;
  std::atomic<bool> finished_{false};
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace sci
