// The shared library loaded, used and unloaded again and again, as a
// plugin host does: a thread that made per-thread state (common/
// thread_owned.h) exits before each unload, so the library must really
// unload, and must leave the process's pthread keys as it found them.
// Each kind of per-thread state takes a key at its first use; when none
// was deleted, about 300 cycles used up the process's 1,024 keys, and
// then every pthread_key_create in the process failed (a review's
// reproducer). This binary does not link the library: it opens it.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <pthread.h>

#include <thread>
#include <vector>

#include "shared_cache_index.h"

namespace {

// How many more pthread keys the process can make now.
size_t FreePthreadKeys() {
  std::vector<pthread_key_t> taken;
  pthread_key_t key;
  while (pthread_key_create(&key, nullptr) == 0) taken.push_back(key);
  for (pthread_key_t k : taken) pthread_key_delete(k);
  return taken.size();
}

TEST(LibraryUnload, LoadCyclesLeaveThePthreadKeysAsTheyWere) {
  const size_t free_before = FreePthreadKeys();
  for (int cycle = 0; cycle < 300; ++cycle) {
    void* library = dlopen(SCI_SHARED_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(library, nullptr) << dlerror();
    const auto index_new = reinterpret_cast<decltype(&sci_index_new)>(dlsym(library, "sci_index_new"));
    const auto index_free = reinterpret_cast<decltype(&sci_index_free)>(dlsym(library, "sci_index_free"));
    const auto last_error = reinterpret_cast<decltype(&sci_last_error)>(dlsym(library, "sci_last_error"));
    ASSERT_TRUE(index_new != nullptr && index_free != nullptr && last_error != nullptr);
    std::thread([&] {
      EXPECT_EQ(index_new(nullptr, nullptr), SCI_ERR_INVALID_ARGUMENT);  // per-thread state: the message
      EXPECT_STREQ(last_error(), "sci_index_new: out is NULL");
      sci_index* index = nullptr;
      ASSERT_EQ(index_new(nullptr, &index), SCI_OK);
      index_free(index);
    }).join();
    ASSERT_EQ(dlclose(library), 0);
    ASSERT_EQ(dlopen(SCI_SHARED_LIBRARY_PATH, RTLD_NOW | RTLD_NOLOAD), nullptr)
        << "cycle " << cycle << ": the library stayed loaded";
  }
  EXPECT_EQ(FreePthreadKeys(), free_before);
}

}  // namespace
