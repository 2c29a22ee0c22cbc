// std::mutex as a capability for clang's -Wthread-safety: libstdc++'s
// std::mutex carries no annotations, so data guarded by one could not be
// checked. Not absl::Mutex: the distribution's abseil is not built with
// ThreadSanitizer, which would then not see its synchronisation at all,
// while a pthread mutex underneath is one TSan understands. Held with
// WriterLock (rw_lock.h).
#pragma once

#include <mutex>

#include "absl/base/thread_annotations.h"

namespace sci {

class ABSL_LOCKABLE AnnotatedMutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

}  // namespace sci
