// Which of a few cache-line stripes a thread writes its share of a shared
// count to (the table lock's reader counts, the readers' counters).
//
// Why stripes. Querying threads would otherwise all write the same few
// lines: the reader-lock word twice per hold and the query counters once
// per query. On two cores every such write pulls the line from the other
// core, and a prefix query of an unrelated prompt (a few hundred
// nanoseconds) spent enough on those transfers that two threads answered
// 1.65-1.75 times what one does, not twice (bench/README.md, fifth pass).
// With a stripe each, a thread's writes stay in its own cache; whoever
// needs the total (the writer taking the lock, a stats read) reads every
// stripe.
//
// Threads take stripes in turn as they first ask, so the first
// kThreadStripes threads never share one; later ones wrap around and share
// (still correct: a stripe holds the sum of its threads' shares).
#pragma once

#include <atomic>
#include <cstdint>

namespace sci {

inline constexpr uint32_t kThreadStripes = 32;

namespace thread_stripe_internal {
// How many threads have taken a stripe.
inline std::atomic<uint32_t>& Taken() {
  static std::atomic<uint32_t> taken{0};
  return taken;
}
}  // namespace thread_stripe_internal

inline uint32_t ThreadStripe() {
  // Sequentially consistent, like StripesInUse's read: see there.
  thread_local const uint32_t stripe = thread_stripe_internal::Taken().fetch_add(1) % kThreadStripes;
  return stripe;
}

// Stripes 0..StripesInUse()-1 are all that any thread has taken, so a sum
// or a scan may stop there (a process with one querying thread scans one).
// A thread takes its stripe before it first writes to it: a scan that runs
// after an announcement both sides order sequentially consistently (the
// table lock's writer intent) sees either the stripe or, on the thread's
// side, the announcement.
inline uint32_t StripesInUse() {
  const uint32_t taken = thread_stripe_internal::Taken().load();
  return taken < kThreadStripes ? taken : kThreadStripes;
}

}  // namespace sci
