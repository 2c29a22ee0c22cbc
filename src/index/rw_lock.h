// The index's reader/writer lock: a spinning lock on one atomic word, with
// writer intent.
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
// It is a capability for clang's -Wthread-safety (abseil's macros): data
// marked ABSL_GUARDED_BY one is checked to be touched only with it held.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"

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
      uint32_t state = state_.load(std::memory_order_relaxed);
      if ((state & (kWriter | kIntent)) == 0 &&
          state_.compare_exchange_weak(state, state | kIntent, std::memory_order_relaxed)) {
        break;
      }
    }
    // Then wait for the readers inside to leave.
    for (Backoff backoff;; backoff.Wait()) {
      uint32_t state = kIntent;
      if (state_.compare_exchange_weak(state, kWriter, std::memory_order_acquire, std::memory_order_relaxed)) return;
    }
  }

  void Unlock() ABSL_UNLOCK_FUNCTION() { state_.store(0, std::memory_order_release); }

  void ReaderLock() const ABSL_SHARED_LOCK_FUNCTION() {
    if (TryReaderLock()) return;
    waiting_readers_.fetch_add(1, std::memory_order_relaxed);
    for (Backoff backoff; !TryReaderLock(); backoff.Wait()) {
    }
    waiting_readers_.fetch_sub(1, std::memory_order_relaxed);
  }

  void ReaderUnlock() const ABSL_UNLOCK_FUNCTION() { state_.fetch_sub(1, std::memory_order_release); }

  // Observers for tests: a writer has announced itself (it holds the lock or
  // waits for the readers inside to leave); readers spinning for the lock.
  bool writer_announced() const { return (state_.load(std::memory_order_relaxed) & (kWriter | kIntent)) != 0; }
  uint32_t waiting_readers() const { return waiting_readers_.load(std::memory_order_relaxed); }

 private:
  bool TryReaderLock() const {
    uint32_t state = state_.load(std::memory_order_relaxed);
    return (state & (kWriter | kIntent)) == 0 &&
           state_.compare_exchange_strong(state, state + 1, std::memory_order_acquire, std::memory_order_relaxed);
  }

  static void Pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

  static constexpr uint32_t kWriter = 1u << 31;  // the writer holds the lock
  static constexpr uint32_t kIntent = 1u << 30;  // the writer waits for readers to leave
  // Low bits: readers inside.

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

  mutable std::atomic<uint32_t> state_{0};
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
