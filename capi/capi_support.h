// What every C thunk needs: the thread's last-error message, the guard that
// keeps C++ exceptions from crossing the boundary, and checked conversions
// of the C argument types. Thunks stay thin; the work happens in src/.
#pragma once

#include <cstddef>
#include <cstring>
#include <exception>
#include <new>
#include <string_view>

#include "common/format.h"
#include "shared_cache_index.h"

namespace sci::capi {

// Records `message` as this thread's last error and returns `status`.
sci_status Fail(sci_status status, std::string_view message);

template <typename... Args>
sci_status Failf(sci_status status, const absl::FormatSpec<Args...>& format, const Args&... args) {
  return Fail(status, sci::StrFormat(format, args...));
}

// Runs `body` (which returns a sci_status) and turns any exception into a
// status and a message naming the entry point.
template <typename Body>
sci_status Guard(const char* function, Body&& body) noexcept {
  // The messages are formatted into the stack, not a std::string: memory
  // may still be short here, and an exception out of a handler would cross
  // this noexcept boundary (std::terminate).
  char message[512];
  try {
    return body();
  } catch (const std::bad_alloc&) {
    absl::SNPrintF(message, sizeof message, "%s: out of memory", function);
    return Fail(SCI_ERR_NO_MEMORY, message);
  } catch (const std::exception& e) {
    absl::SNPrintF(message, sizeof message, "%s: internal error: %s", function, e.what());
    return Fail(SCI_ERR_INTERNAL, message);
  } catch (...) {
    absl::SNPrintF(message, sizeof message, "%s: internal error: unknown exception", function);
    return Fail(SCI_ERR_INTERNAL, message);
  }
}

// For entry points that return nothing: failures are recorded, not returned.
template <typename Body>
void GuardVoid(const char* function, Body&& body) noexcept {
  (void)Guard(function, [&] {
    body();
    return SCI_OK;
  });
}

// A sci_str as a view; false when it has a NULL pointer and a length.
inline bool ToView(sci_str s, std::string_view* out) {
  if (s.ptr == nullptr) {
    *out = {};
    return s.len == 0;
  }
  *out = std::string_view(s.ptr, s.len);
  return true;
}

// Copies `value` into a caller's versioned output struct, writing only the
// `out->struct_size` bytes the caller has; a newer caller's fields that this
// library does not know are zeroed. `value.struct_size` must already be set.
template <typename T>
void WriteVersioned(const T& value, T* out) {
  const size_t caller_size = out->struct_size;
  std::memcpy(out, &value, caller_size < sizeof value ? caller_size : sizeof value);
  if (caller_size > sizeof value) std::memset(reinterpret_cast<char*>(out) + sizeof value, 0, caller_size - sizeof value);
}

// Whether a caller's versioned struct is large enough to hold the fields up
// to and including the one that ends at `needed` bytes.
inline bool HasStructSize(uint32_t struct_size, size_t needed) { return struct_size >= needed; }

}  // namespace sci::capi

// The end of a field within its struct, for HasStructSize.
#define SCI_FIELD_END(type, field) (offsetof(type, field) + sizeof(((type*)nullptr)->field))
