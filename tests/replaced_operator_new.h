// Replaces the global operator new / delete of the test binary whose one
// source file includes this header (a program may replace them once), so a
// test can count or fail allocations: every form of operator new calls
// sci_test::AllocateForTest(size, alignment), which that file defines
// (alignment 0: the default; a null return fails the allocation: the
// throwing forms throw std::bad_alloc, the nothrow forms return null), and
// may call sci_test::HeapAllocate for the memory itself. Every form of
// delete frees with std::free.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace sci_test {

void* AllocateForTest(std::size_t size, std::size_t alignment);

// True inside AllocateForTest when a nothrow form called it. Third-party
// code (libzmq) uses those forms and aborts when they return null, so a
// test that fails allocations on a thread that also runs such code fails
// only the throwing forms, which are the library's.
inline thread_local bool in_nothrow_new = false;
inline void* AllocateNothrow(std::size_t size, std::size_t alignment) {
  in_nothrow_new = true;
  void* p = AllocateForTest(size, alignment);
  in_nothrow_new = false;
  return p;
}

// Memory from the C heap, aligned as asked.
inline void* HeapAllocate(std::size_t size, std::size_t alignment) {
  if (size == 0) size = 1;
  return alignment > alignof(std::max_align_t)
             ? std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment)
             : std::malloc(size);
}

inline void* AllocateOrThrow(std::size_t size, std::size_t alignment) {
  if (void* p = AllocateForTest(size, alignment)) return p;
  throw std::bad_alloc();
}

}  // namespace sci_test

void* operator new(std::size_t size) { return sci_test::AllocateOrThrow(size, 0); }
void* operator new[](std::size_t size) { return sci_test::AllocateOrThrow(size, 0); }
void* operator new(std::size_t size, std::align_val_t al) {
  return sci_test::AllocateOrThrow(size, static_cast<std::size_t>(al));
}
void* operator new[](std::size_t size, std::align_val_t al) {
  return sci_test::AllocateOrThrow(size, static_cast<std::size_t>(al));
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return sci_test::AllocateNothrow(size, 0); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return sci_test::AllocateNothrow(size, 0); }
void* operator new(std::size_t size, std::align_val_t al, const std::nothrow_t&) noexcept {
  return sci_test::AllocateNothrow(size, static_cast<std::size_t>(al));
}
void* operator new[](std::size_t size, std::align_val_t al, const std::nothrow_t&) noexcept {
  return sci_test::AllocateNothrow(size, static_cast<std::size_t>(al));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
