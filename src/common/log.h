// The library's only way to speak: a process-wide callback the embedding
// application installs (sci_set_log_callback). Without one, nothing is
// formatted and nothing is printed.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/format.h"

namespace sci {

enum class LogLevel : int32_t { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

using LogFn = void (*)(void* user, int32_t level, const char* msg, size_t len);

// Installs `fn` (NULL: silence). Once it returns, the previous callback is
// not running on any thread and never runs again. Called from inside a
// callback, it takes effect when the outermost callback on this thread
// returns (waiting there would wait for itself).
void SetLogCallback(LogFn fn, void* user);
bool LogEnabled();
void LogLine(LogLevel level, std::string_view msg);

// Formats only when a callback is installed, so silent logging is free.
template <typename... Args>
void Logf(LogLevel level, const absl::FormatSpec<Args...>& format, const Args&... args) {
  if (!LogEnabled()) return;
  LogLine(level, sci::StrFormat(format, args...));
}

}  // namespace sci
