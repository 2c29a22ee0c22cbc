// What a Mooncake master's GET /kv_events/status reports (wire-formats.md,
// section 6), kept by the stand-in master: cumulative since the publisher
// started, written by the publishing threads, read by the admin server's.
#pragma once

#include <atomic>
#include <cstdint>

namespace sci::tools {

struct PublisherCounters {
  // Batches sent; a scripted `gap` counts its batches here too (sent, then
  // lost on the way), so that a subscriber's tail watch can find them.
  std::atomic<uint64_t> published_batches{0};
  std::atomic<uint64_t> published_events{0};
  // Events dropped from a full queue (publisher_queue.h), each of which
  // consumed a sequence number.
  std::atomic<uint64_t> dropped_events{0};
};

}  // namespace sci::tools
