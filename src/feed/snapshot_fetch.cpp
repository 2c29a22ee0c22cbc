#include "feed/snapshot_fetch.h"

#include <exception>
#include <utility>

#include "feed/snapshot_parser.h"

namespace sci {

SnapshotFetch::SnapshotFetch(Index& index, HttpRequest request, WakeSignal& done)
    : thread_([this, &index, request = std::move(request), &done] { Run(index, request, done); }) {}

SnapshotFetch::~SnapshotFetch() {
  download_.Cancel();
  if (thread_.joinable()) thread_.join();
}

void SnapshotFetch::ReserveForSnapshot(Index& index, std::span<const std::string_view> first_keys) const {
  // The body's length over its first keys' mean line length: the snapshot's
  // keys, give or take how much its lines differ. The tables are sized for
  // them before the load, so no table is rebuilt while it runs (a rebuild
  // holds the old and new arrays at once).
  const int64_t length = download_.content_length();
  if (length <= 0 || first_keys.empty()) return;  // no Content-Length: the tables grow as keys come
  uint64_t line_bytes = 0;
  for (std::string_view key : first_keys) line_bytes += key.size() + 1;
  index.ReserveKeys(static_cast<uint64_t>(length) / (line_bytes / first_keys.size()));
}

void SnapshotFetch::Run(Index& index, const HttpRequest& request, WakeSignal& done) noexcept {
  try {
    bool sized = false;
    SnapshotParser parser([&](std::span<const std::string_view> keys) {
      if (!sized) {
        sized = true;
        ReserveForSnapshot(index, keys);
      }
      index.LoadKeys(keys);
    });
    ok_ = download_.Run(
              request, [&parser](std::string_view chunk, std::string* error) { return parser.Feed(chunk, error); },
              &error_) &&
          parser.Finish(&error_);
    keys_ = parser.keys();
  } catch (const std::exception& e) {
    ok_ = false;
    error_ = e.what();
  }
  finished_.store(true, std::memory_order_release);
  done.Notify();
}

}  // namespace sci
