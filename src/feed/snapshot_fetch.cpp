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

void SnapshotFetch::Run(Index& index, const HttpRequest& request, WakeSignal& done) noexcept {
  try {
    // Nothing is reserved ahead of the load: the body's length tells keys,
    // not pages, and the store grows outside the table lock (I38).
    SnapshotParser parser([&](std::span<const std::string_view> keys) { index.LoadKeys(keys); });
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
