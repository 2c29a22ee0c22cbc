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
// thread is gone), and the reaper that frees the object, a thread_local
// registered just before it is made, sets the flag. Get() then answers
// null, and the caller makes do without (a query of its own, an error
// without a message).
//
// A pthread key backs the reaper up. glibc runs key destructors after the
// thread_local ones, so a reaper registered by a thread's first call made
// from a key destructor (a caller's client kept under a key) never runs;
// the object is also set as the key's value, and the key's destructor
// frees it in that round or the next (not after glibc's last, the 4th).
// The reaper clears the value as it runs, so the key's destructor runs
// only on a thread whose reaper is pending, and a pending thread_local
// destructor keeps the library loaded (glibc counts them per object):
// dlclose never unmaps code an exiting thread is about to run. For the
// same reason no thread holds a value when the library is unloaded, and
// the key is deleted then (or at exit), so load cycles do not use up the
// process's keys. Two reviews chose this over a key alone: without the
// reaper, dlclose could unmap the key's destructor under an exiting
// thread, and threads ending after exit() began leaked their state. The
// price: dlclose does not unload the library while a thread that used it
// lives, nor ever after a first call from a key destructor (that reaper
// stays pending).
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
    MakeKeyOnce();
    object_ = new T();
    SetKeyValue(object_);
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
      SetKeyValue(nullptr);
      Reap();
    }
  };

  // The key is made by the first Get() of any thread and deleted by the
  // maker's destructor, at dlclose or exit. Its state is trivially
  // destructible and never destroyed, so a reaper running after that reads
  // it safely. The mutex orders each value set against the deletion: at
  // exit() other threads still run, and a value set on a deleted key whose
  // slot another key had taken since would be handed, freed, to that
  // key's destructor (a review's reproducer).
  struct KeyMaker {
    KeyMaker() {
      pthread_mutex_lock(&key_mu_);
      key_usable_ = pthread_key_create(&key_, [](void*) { Reap(); }) == 0;
      pthread_mutex_unlock(&key_mu_);
    }
    ~KeyMaker() {
      pthread_mutex_lock(&key_mu_);
      if (key_usable_) (void)pthread_key_delete(key_);
      key_usable_ = false;
      pthread_mutex_unlock(&key_mu_);
    }
  };
  static void MakeKeyOnce() {
    static KeyMaker maker;
    (void)maker;
  }
  static void SetKeyValue(void* value) {
    pthread_mutex_lock(&key_mu_);
    if (key_usable_) (void)pthread_setspecific(key_, value);
    pthread_mutex_unlock(&key_mu_);
  }

  static inline pthread_mutex_t key_mu_ = PTHREAD_MUTEX_INITIALIZER;
  static inline pthread_key_t key_{};
  static inline bool key_usable_ = false;  // guarded by key_mu_
  static inline thread_local T* object_ = nullptr;
  static inline thread_local bool gone_ = false;
};

}  // namespace sci
