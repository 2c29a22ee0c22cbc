// One object of type T per thread, made on its first use and freed when
// the thread exits, that code running during the exit finds gone rather
// than freed. One per type: give each use a type of its own.
//
// The object is reached through a pointer and a flag that are trivially
// destructible (readable until the thread is gone), and freed by the
// destructor of a pthread key, which sets the flag: Get() then answers
// null, and the caller makes do without (a query of its own, an error
// without a message).
//
// Why a pthread key and not a thread_local: glibc destroys a thread's
// thread_locals first, in the reverse order of their construction, and
// runs pthread-key destructors after them, in rounds. A thread_local
// object was freed before a caller's own thread_local made earlier, whose
// destructor then queried freed memory (a review's reproducer aborted in
// glibc); a thread_local reaper registered by a first call made from a
// pthread-key destructor (a caller's client kept under a key) came too
// late to run at all, and leaked the thread's state, about 540 KB (a
// second review). Under a key, the state outlives every thread_local, and
// a first call from a key destructor is freed in the same or the next
// round. Only a first call in glibc's last round (the 4th; it takes three
// destructors each setting a key again) still leaks.
//
// The key is deleted when the library is unloaded (and at exit), so
// dlclose never leaves its destructor pointer behind nor uses up the
// process's keys over load cycles; a thread still holding state then
// leaks it. If no key can be made (the process used up PTHREAD_KEYS_MAX)
// or set, a thread_local reaper frees the object instead, with the
// ordering above.
#pragma once

#include <pthread.h>

#include <atomic>

namespace sci {

template <typename T>
class ThreadOwned {
 public:
  // The thread's T, made now if need be; null once the thread's exit has
  // freed it. Throws what making a T throws (bad_alloc), making nothing.
  static T* Get() {
    if (object_ != nullptr || gone_) return object_;
    const Key& key = TheKey();
    T* object = new T();
    object_ = object;
    if (!key.usable.load(std::memory_order_acquire) || pthread_setspecific(key.key, object) != 0) {
      // Registered now, so it runs at exit after the destructor of any
      // thread_local made later.
      thread_local Reaper reaper;
      (void)reaper;
    }
    return object;
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
    ~Reaper() { Reap(); }
  };

  struct Key {
    pthread_key_t key{};
    std::atomic<bool> usable{false};
    Key() { usable.store(pthread_key_create(&key, [](void*) { Reap(); }) == 0, std::memory_order_release); }
    ~Key() {
      if (usable.exchange(false, std::memory_order_acq_rel)) (void)pthread_key_delete(key);
    }
  };
  // Made by the first Get() of any thread.
  static const Key& TheKey() {
    static Key key;
    return key;
  }

  static inline thread_local T* object_ = nullptr;
  static inline thread_local bool gone_ = false;
};

}  // namespace sci
