// printf-style formatting that an allocation failure cannot turn into a
// crash. Debian's Abseil aborts (std::terminate) when the std::string that
// absl::StrFormat builds fails to grow: the exception cannot unwind through
// its formatting code. The library promises that an allocation failure
// costs a status or a clear, never the process (issue #34), and formats its
// messages on exactly those paths. So the library formats with these:
// absl::SNPrintF into a buffer allocated here, where std::bad_alloc
// propagates like any other. Same format checking as absl::StrFormat.
// (Tools and tests may use absl::StrFormat: a CLI that runs out of memory
// may die.)
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/str_format.h"

namespace sci {

template <typename... Args>
void StrAppendFormat(std::string* out, const absl::FormatSpec<Args...>& format, const Args&... args) {
  char small[256];
  const int n = absl::SNPrintF(small, sizeof small, format, args...);
  if (n <= 0) return;
  const size_t len = static_cast<size_t>(n);
  if (len < sizeof small) {
    out->append(small, len);
    return;
  }
  const size_t old_size = out->size();
  out->resize(old_size + len);  // may throw std::bad_alloc, unwinding normally
  // Writes len characters and a NUL at [old_size + len], the string's own
  // terminator slot.
  absl::SNPrintF(out->data() + old_size, len + 1, format, args...);
}

template <typename... Args>
std::string StrFormat(const absl::FormatSpec<Args...>& format, const Args&... args) {
  std::string out;
  sci::StrAppendFormat(&out, format, args...);
  return out;
}

}  // namespace sci
