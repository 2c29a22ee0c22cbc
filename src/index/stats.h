// The index's counters: live atomics that writers, readers and the
// subscriber bump without locks, and the plain snapshot the stats call
// returns. Both are generated from the one list in stat_list.h. Names and
// meanings follow docs/index-semantics.md ("Observability").
#pragma once

#include <atomic>
#include <cstdint>

#include "index/stat_list.h"
#include "index/thread_stripe.h"

namespace sci {

// A plain copy of every counter, read one by one (not one atomic snapshot).
struct Stats {
#define SCI_STAT_FIELD(name, type, kind, keeper, help) type name{};
  SCI_STAT_LIST(SCI_STAT_FIELD)
#undef SCI_STAT_FIELD
};

// A monotonic counter or a numeric gauge.
class Counter {
 public:
  void Add(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  void Sub(uint64_t n = 1) { value_.fetch_sub(n, std::memory_order_relaxed); }
  void Set(uint64_t v) { value_.store(v, std::memory_order_relaxed); }
  uint64_t Get() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// A monotonic counter bumped by querying threads: each thread adds to its
// own stripe (thread_stripe.h), a cache line no other running thread
// writes, and a read sums the stripes. So concurrent queries never write a
// shared line to count themselves.
class StripedCounter {
 public:
  void Add(uint64_t n = 1) { stripes_[ThreadStripe()].value.fetch_add(n, std::memory_order_relaxed); }
  uint64_t Get() const {
    uint64_t sum = 0;
    for (const Stripe& stripe : stripes_) sum += stripe.value.load(std::memory_order_relaxed);
    return sum;
  }

 private:
  struct alignas(64) Stripe {
    std::atomic<uint64_t> value{0};
  };
  Stripe stripes_[kThreadStripes];
};

// A yes/no gauge.
class Flag {
 public:
  void Set(bool v) { value_.store(v, std::memory_order_relaxed); }
  bool Get() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> value_{false};
};

namespace stats_internal {
template <typename T>
struct LiveCell;
template <>
struct LiveCell<uint64_t> {
  using type = Counter;
};
template <>
struct LiveCell<bool> {
  using type = Flag;
};
template <typename T>
using LiveCellOf = typename LiveCell<T>::type;

// Counters bumped by the apply path (the index itself: Index::ApplyBatch,
// Clear, the Count* calls of message_apply).
struct ApplyCounters {
#define SCI_STAT_MEMBER(name, type, kind, keeper, help) SCI_STAT_BY_WRITER_##keeper(LiveCellOf<type> name;)
  SCI_STAT_LIST(SCI_STAT_MEMBER)
#undef SCI_STAT_MEMBER
};
}  // namespace stats_internal

// Counters the subscriber's thread keeps of its own doings (connections,
// resyncs, the status it reads): Index::feed_counters().
struct FeedCounters {
#define SCI_STAT_MEMBER(name, type, kind, keeper, help) \
  SCI_STAT_BY_SUBSCRIBER_##keeper(stats_internal::LiveCellOf<type> name;)
  SCI_STAT_LIST(SCI_STAT_MEMBER)
#undef SCI_STAT_MEMBER
  // Leader-view reads that found no etcd endpoint answering. C++ only: not
  // in sci_stats, whose fields docs/c-api.md fixes; the log says it too.
  Counter etcd_failures;
};

// Counters bumped by readers: one add per query, not per page, each
// thread on its own stripes, off the writer's lines: Index::query_counters().
struct QueryCounters {
#define SCI_STAT_MEMBER(name, type, kind, keeper, help) SCI_STAT_ON_READER_LINE_##keeper(StripedCounter name;)
  SCI_STAT_LIST(SCI_STAT_MEMBER)
#undef SCI_STAT_MEMBER
};

// Counters that sit outside the index's tables: every row of the list not
// kept by TABLES, as a member of the same name. Gauges of the tables
// themselves (keys, groups, verified groups, cursor) are kept by the index.
// For observation only: nothing decides by reading them (the feed steers by
// Index::ApplyBatch's outcome, Index::cursor() and Index::clear_epoch()).
struct Counters : stats_internal::ApplyCounters, FeedCounters, QueryCounters {};

}  // namespace sci
