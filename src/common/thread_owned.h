// One object of type T per thread, made on its first use and freed when
// the thread exits, that code running during the exit finds gone rather
// than freed. One per type: give each use a type of its own.
//
// Why not a plain thread_local: a thread's thread_locals are destroyed in
// the reverse order of their construction, so a caller's own thread_local
// made before the thread's first query outlives the library's, and a
// library call from its destructor (a per-thread client that asks once
// more, or reports an error, as it goes) used freed memory: a review's
// reproducer aborted in glibc. Here the object is reached through a
// pointer and a flag that are trivially destructible (readable until the
// thread is gone), and the reaper that frees the object, registered just
// before it is made, sets the flag. Get() then answers null, and the
// caller makes do without (a query of its own, an error without a
// message).
#pragma once

namespace sci {

template <typename T>
class ThreadOwned {
 public:
  // The thread's T, made now if need be; null once the thread's exit has
  // freed it. Throws what making a T throws (bad_alloc), making nothing.
  static T* Get() {
    if (object_ != nullptr || gone_) return object_;
    // Constructed, so registered to run at exit, before the object exists:
    // it runs after the destructor of any thread_local made later.
    thread_local Reaper reaper;
    (void)reaper;
    object_ = new T();
    return object_;
  }

  // The thread's T if made and not freed yet; never makes one.
  static T* Peek() { return object_; }

 private:
  struct Reaper {
    ~Reaper() {
      delete object_;
      object_ = nullptr;
      gone_ = true;
    }
  };

  static inline thread_local T* object_ = nullptr;
  static inline thread_local bool gone_ = false;
};

}  // namespace sci
