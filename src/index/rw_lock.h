// The index's reader/writer lock: a spinning lock with writer intent, its
// readers counted in per-thread stripes.
//
// Why not a sleeping lock. Readers hold it for one lookup or one page's keys
// and the writer for one event: well under a microsecond each. A lock that
// puts waiters to sleep (pthread_rwlock, std::shared_mutex, absl::Mutex
// under contention) turns every handoff into a kernel wake-up of tens of
// microseconds, and measured on an idle two-core machine a reader woken
// behind the writer found the writer back in the lock for its next event,
// again and again: queries waited through whole batches (p99 x138). Here a
// waiter spins briefly (then yields its CPU), so it takes the lock within
// nanoseconds of its release. Writer intent keeps a stream of readers from
// starving the writer: once the writer announces itself, new readers hold
// back until it is done; and a writer coming back for its next event lets
// readers that are already waiting in first. All synchronisation is through std::atomic, which
// every sanitizer understands.
//
// Why striped reader counts. With one word counting readers, every hold
// wrote that word twice, so querying threads pulled its line from each
// other's cores on every lookup; a reader now counts itself in its thread's
// stripe (thread_stripe.h) and only reads the writer's word, which stays in
// every reader's cache until a writer comes. The writer pays instead: it
// announces itself on its word, then reads every stripe until all are 0.
// The reader's count-then-check and the writer's announce-then-scan are
// sequentially consistent, so of a reader and a writer arriving together at
// least one sees the other (then the reader backs out and waits).
//
// It is a capability for clang's -Wthread-safety (abseil's macros): data
// marked ABSL_GUARDED_BY one is checked to be touched only with it held.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "index/thread_stripe.h"

namespace sci {

class ABSL_LOCKABLE RwLock {
 public:
  RwLock() = default;
  RwLock(const RwLock&) = delete;
  RwLock& operator=(const RwLock&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    // Readers already waiting go first, for a bounded while: the writer
    // takes the lock once per event, back to back, and the waiting reader
    // (whose cache line is remote) would otherwise lose every race for it
    // and wait through the whole batch.
    for (int i = 0; i < kMaxDeferToReaders && waiting_readers_.load(std::memory_order_relaxed) > 0; ++i) {
      Pause();
    }
    // Announce: new readers hold back from here on.
    for (Backoff backoff;; backoff.Wait()) {
      uint32_t state = 0;
      if (state_.compare_exchange_weak(state, kIntent, std::memory_order_seq_cst, std::memory_order_relaxed)) break;
    }
    // Then wait for the readers inside to leave, stripe by stripe (readers
    // that count themselves in a stripe already seen empty see the intent
    // and back out).
    const uint32_t stripes = StripesInUse();
    for (uint32_t i = 0; i < stripes; ++i) {
      for (Backoff backoff; reader_counts_[i].value.load(std::memory_order_seq_cst) != 0; backoff.Wait()) {
      }
    }
    state_.store(kWriter, std::memory_order_relaxed);
  }

  void Unlock() ABSL_UNLOCK_FUNCTION() { state_.store(0, std::memory_order_release); }

  void ReaderLock() const ABSL_SHARED_LOCK_FUNCTION() {
    std::atomic<uint32_t>& count = reader_counts_[ThreadStripe()].value;
    if (TryReaderLock(count)) return;
    waiting_readers_.fetch_add(1, std::memory_order_relaxed);
    for (Backoff backoff; !TryReaderLock(count); backoff.Wait()) {
    }
    waiting_readers_.fetch_sub(1, std::memory_order_relaxed);
  }

  // On the thread that took the hold (its stripe).
  void ReaderUnlock() const ABSL_UNLOCK_FUNCTION() {
    reader_counts_[ThreadStripe()].value.fetch_sub(1, std::memory_order_release);
  }

  // Observers for tests: a writer has announced itself (it holds the lock or
  // waits for the readers inside to leave); readers spinning for the lock.
  bool writer_announced() const { return state_.load(std::memory_order_relaxed) != 0; }
  uint32_t waiting_readers() const { return waiting_readers_.load(std::memory_order_relaxed); }

 private:
  // Counts this reader in `count` (its stripe) unless a writer has
  // announced itself: then it backs out.
  bool TryReaderLock(std::atomic<uint32_t>& count) const {
    if (state_.load(std::memory_order_relaxed) != 0) return false;
    count.fetch_add(1, std::memory_order_seq_cst);
    if (state_.load(std::memory_order_seq_cst) == 0) return true;
    count.fetch_sub(1, std::memory_order_release);
    return false;
  }

  static void Pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

  // The writer's word: 0 (no writer), kIntent (a writer waits for the
  // readers inside to leave) or kWriter (it holds the lock).
  static constexpr uint32_t kWriter = 1u << 31;
  static constexpr uint32_t kIntent = 1u << 30;

  // Spins with a pause for a short while, then gives the CPU away: the holder
  // may be a thread waiting for this very core.
  class Backoff {
   public:
    void Wait() {
      if (spins_ < kSpins) {
        ++spins_;
        Pause();
      } else {
        std::this_thread::yield();
      }
    }

   private:
    static constexpr int kSpins = 256;
    int spins_ = 0;
  };

  // About a microsecond of pauses: longer than a page's lookups, short
  // enough that a stream of readers cannot hold the writer off for long.
  static constexpr int kMaxDeferToReaders = 512;

  // Readers inside, per thread stripe; each on its own cache line.
  struct alignas(64) ReaderCount {
    std::atomic<uint32_t> value{0};
  };

  // The writer's word: readers only read it while no writer comes.
  alignas(64) std::atomic<uint32_t> state_{0};
  mutable ReaderCount reader_counts_[kThreadStripes];
  // Readers spinning for the lock; on its own cache line, so that waiting
  // does not slow the lock word itself.
  alignas(64) mutable std::atomic<uint32_t> waiting_readers_{0};
};

// Scoped holds of RwLock, or of any lock with the same four functions (the
// latency benchmark's absl::Mutex variant of the table lock: table_lock.h).
template <typename Lockable>
class ABSL_SCOPED_LOCKABLE WriterLock {
 public:
  explicit WriterLock(Lockable& lock) ABSL_EXCLUSIVE_LOCK_FUNCTION(lock) : lock_(lock) { lock_.Lock(); }
  ~WriterLock() ABSL_UNLOCK_FUNCTION() { lock_.Unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  Lockable& lock_;
};

template <typename Lockable>
class ABSL_SCOPED_LOCKABLE ReaderLock {
 public:
  explicit ReaderLock(const Lockable& lock) ABSL_SHARED_LOCK_FUNCTION(lock) : lock_(lock) { lock_.ReaderLock(); }
  ~ReaderLock() ABSL_UNLOCK_FUNCTION() { lock_.ReaderUnlock(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  const Lockable& lock_;
};

}  // namespace sci
