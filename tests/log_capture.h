// Test support: the library's log lines, collected for as long as a
// LogCapture lives (the process-wide callback is installed by the
// constructor and removed by the destructor, even when an assertion
// returns early).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/log.h"

namespace sci::testing {

struct LogCapture {
  LogCapture() { SetLogCallback(&LogCapture::Record, this); }
  ~LogCapture() { SetLogCallback(nullptr, nullptr); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  static void Record(void* user, int32_t level, const char* msg, size_t len) {
    static_cast<LogCapture*>(user)->lines.emplace_back(level, std::string(msg, len));
  }
  // The lines logged at `level`.
  std::vector<std::string> At(LogLevel level) const {
    std::vector<std::string> at;
    for (const auto& [line_level, text] : lines) {
      if (line_level == static_cast<int32_t>(level)) at.push_back(text);
    }
    return at;
  }

  std::vector<std::pair<int32_t, std::string>> lines;
};

}  // namespace sci::testing
