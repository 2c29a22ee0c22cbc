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
//
// A pthread key backs the reaper up. glibc runs the pthread-key
// destructors after the thread_local ones, so a thread whose first call
// comes from a key destructor (a caller's per-thread client kept under a
// pthread key) registers its reaper too late for it ever to run; the
// key's destructor, which glibc runs in the same or the next of its
// rounds, frees the object instead. The reaper clears the key's value as
// it runs, so on every other thread the key's destructor is never called.
// It is called only on a thread whose reaper is still pending, and a
// pending thread_local destructor keeps the library from being unloaded
// (glibc counts them per object), so dlclose cannot leave the key's
// destructor pointer dangling. If the key cannot be made (the process
// used up PTHREAD_KEYS_MAX) or set, the backstop is simply missing: only
// that late first call's state leaks, as without it.
#pragma once

#include <pthread.h>

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
    const Backstop& backstop = TheBackstop();
    if (backstop.made) (void)pthread_setspecific(backstop.key, object_);
    return object_;
  }

  // The thread's T if made and not freed yet; never makes one.
  static T* Peek() { return object_; }

 private:
  static void Reap() {
    T* object = object_;
    object_ = nullptr;
    gone_ = true;  // before the destructor runs: a call it makes finds T gone
    delete object;
  }

  struct Reaper {
    ~Reaper() {
      const Backstop& backstop = TheBackstop();
      if (backstop.made) (void)pthread_setspecific(backstop.key, nullptr);
      Reap();
    }
  };

  struct Backstop {
    pthread_key_t key{};
    bool made = false;
    Backstop() { made = pthread_key_create(&key, [](void*) { Reap(); }) == 0; }
  };
  // Made on the first Get() of any thread; never deleted (see above).
  static const Backstop& TheBackstop() {
    static const Backstop backstop;
    return backstop;
  }

  static inline thread_local T* object_ = nullptr;
  static inline thread_local bool gone_ = false;
};

}  // namespace sci
