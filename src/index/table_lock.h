// The lock over the index's tables: RwLock (rw_lock.h), whose comment says
// why a spinning lock. The latency benchmark also builds the index with
// SCI_TABLE_LOCK_ABSL_MUTEX defined, where it is an absl::Mutex (a sleeping
// reader/writer lock), so that the reason for the custom lock stays measured
// side by side (bench/README.md, "Reader latency under a writer"). The
// library itself is never built that way.
#pragma once

#include "index/rw_lock.h"

#ifdef SCI_TABLE_LOCK_ABSL_MUTEX
#include "absl/synchronization/mutex.h"
#endif

namespace sci {

#ifdef SCI_TABLE_LOCK_ABSL_MUTEX
class ABSL_LOCKABLE TableLock {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.Lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.Unlock(); }
  void ReaderLock() const ABSL_SHARED_LOCK_FUNCTION() { mu_.ReaderLock(); }
  void ReaderUnlock() const ABSL_UNLOCK_FUNCTION() { mu_.ReaderUnlock(); }

 private:
  mutable absl::Mutex mu_;
};
#else
using TableLock = RwLock;
#endif

}  // namespace sci
