// The index's counters: live atomics that writers, readers and the
// subscriber bump without locks, and the plain snapshot the stats call
// returns. Names and meanings follow index-semantics.md ("Observability").
#pragma once

#include <atomic>
#include <cstdint>

namespace sci {

// A plain copy of every counter, read one by one (not one atomic snapshot).
struct Stats {
  uint64_t keys = 0;
  uint64_t groups = 0;
  uint64_t verified_groups = 0;
  uint64_t batches_applied = 0;
  uint64_t events_applied = 0;
  uint64_t duplicate_batches = 0;
  uint64_t sequence_gaps = 0;
  uint64_t clears = 0;
  uint64_t malformed_messages = 0;
  uint64_t ignored_events = 0;
  uint64_t capacity_refusals = 0;
  uint64_t last_sequence = 0;
  bool has_sequence = false;
  bool subscriber_connected = false;
  uint64_t subscriber_connects = 0;
  uint64_t subscriber_disconnects = 0;
  uint64_t messages_received = 0;
  uint64_t queries = 0;
  uint64_t pages_checked = 0;
  uint64_t page_hits = 0;
  uint64_t fast_path_hits = 0;
  uint64_t resyncs = 0;
  uint64_t resync_failures = 0;
  uint64_t snapshot_keys = 0;
  bool resyncing = false;
  uint64_t leader_changes = 0;
  uint64_t etcd_failures = 0;  // not in sci_stats (c-api.md fixes its fields); Prometheus shows it
};

class Counter {
 public:
  void Add(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  void Sub(uint64_t n = 1) { value_.fetch_sub(n, std::memory_order_relaxed); }
  void Set(uint64_t v) { value_.store(v, std::memory_order_relaxed); }
  uint64_t Get() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// Counters that sit outside the index's tables. Gauges of the tables
// themselves (keys, groups, verified groups, cursor) are kept by the index.
struct Counters {
  Counter batches_applied;
  Counter events_applied;
  Counter duplicate_batches;
  Counter sequence_gaps;
  Counter clears;
  Counter malformed_messages;
  Counter ignored_events;
  Counter capacity_refusals;

  // Written by the subscriber thread.
  std::atomic<bool> subscriber_connected{false};
  Counter subscriber_connects;
  Counter subscriber_disconnects;
  Counter messages_received;

  // Written by the subscriber's resync (feed/resync.h) and leader following.
  Counter resyncs;          // snapshots loaded and caught up with the stream
  Counter resync_failures;  // downloads failed, timed out, malformed, or aborted by a gap / overflow
  Counter snapshot_keys;    // keys loaded by the last completed resync (a gauge, Set)
  std::atomic<bool> resyncing{false};
  Counter leader_changes;   // new leader views followed
  Counter etcd_failures;    // leader-view reads that found no etcd endpoint answering (C++ / Prometheus only)

  // Bumped by readers: one add per query, not per page, to keep the hot path
  // off shared cache lines.
  alignas(64) Counter queries;
  Counter pages_checked;
  Counter page_hits;
  Counter fast_path_hits;
};

}  // namespace sci
