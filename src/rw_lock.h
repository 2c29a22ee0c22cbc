// A reader/writer lock that prefers writers, on pthread_rwlock.
//
// Why not absl::Mutex or std::shared_mutex: glibc's default rwlock (what
// std::shared_mutex uses) lets a steady stream of readers starve the writer,
// and routers query without pause; absl::Mutex is fine on that score, but
// Debian's prebuilt abseil is not instrumented for ThreadSanitizer, which
// then cannot see the lock at all. pthread_rwlock with writer preference is
// both fair to the writer and visible to every sanitizer.
#pragma once

#include <pthread.h>

#include <new>

namespace sci {

class RwLock {
 public:
  RwLock() {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    const int rc = pthread_rwlock_init(&lock_, &attr);
    pthread_rwlockattr_destroy(&attr);
    if (rc != 0) throw std::bad_alloc();  // only fails when the system is out of resources
  }
  ~RwLock() { pthread_rwlock_destroy(&lock_); }
  RwLock(const RwLock&) = delete;
  RwLock& operator=(const RwLock&) = delete;

  void Lock() { pthread_rwlock_wrlock(&lock_); }
  void Unlock() { pthread_rwlock_unlock(&lock_); }
  void ReaderLock() const { pthread_rwlock_rdlock(&lock_); }
  void ReaderUnlock() const { pthread_rwlock_unlock(&lock_); }

 private:
  mutable pthread_rwlock_t lock_;
};

class WriterLock {
 public:
  explicit WriterLock(RwLock& lock) : lock_(lock) { lock_.Lock(); }
  ~WriterLock() { lock_.Unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  RwLock& lock_;
};

class ReaderLock {
 public:
  explicit ReaderLock(const RwLock& lock) : lock_(lock) { lock_.ReaderLock(); }
  ~ReaderLock() { lock_.ReaderUnlock(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  const RwLock& lock_;
};

}  // namespace sci
