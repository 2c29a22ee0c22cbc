// Downloads a snapshot of the master's keys into a concealed index, on a thread
// of its own, so that the subscriber's thread keeps receiving (and
// buffering) the live stream meanwhile. The body is streamed: HttpDownload
// hands chunks to SnapshotParser, which hands batches of keys to
// Index::LoadKeys.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <thread>

#include "feed/http_download.h"
#include "feed/wake_signal.h"
#include "index/index.h"

namespace sci {

class SnapshotFetch {
 public:
  // Starts downloading `request` into `index` (which the caller has held:
  // Index::Conceal) and notifies `done` when finished, successfully or not.
  SnapshotFetch(Index& index, HttpRequest request, WakeSignal& done);
  // Cancels and joins.
  ~SnapshotFetch();
  SnapshotFetch(const SnapshotFetch&) = delete;
  SnapshotFetch& operator=(const SnapshotFetch&) = delete;

  bool finished() const { return finished_.load(std::memory_order_acquire); }
  // Valid once finished(): whether every key arrived, how many, and why not.
  bool ok() const { return ok_; }
  uint64_t keys() const { return keys_; }
  const std::string& error() const { return error_; }

 private:
  void Run(Index& index, const HttpRequest& request, WakeSignal& done) noexcept;

  HttpDownload download_;
  bool ok_ = false;
  uint64_t keys_ = 0;
  std::string error_;
  std::atomic<bool> finished_{false};
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace sci
