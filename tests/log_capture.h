// Test support: the library's log lines, collected for as long as a
// LogCapture lives (the process-wide callback is installed by the
// constructor and removed by the destructor, even when an assertion
// returns early).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
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
    auto* capture = static_cast<LogCapture*>(user);
    std::lock_guard<std::mutex> lock(capture->mu);
    capture->lines.emplace_back(level, std::string(msg, len));
  }
  // The lines logged at `level` (safe while other threads log).
  std::vector<std::string> At(LogLevel level) const {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::string> at;
    for (const auto& [line_level, text] : lines) {
      if (line_level == static_cast<int32_t>(level)) at.push_back(text);
    }
    return at;
  }

  // How many lines logged at `level` contain `text` (safe while other
  // threads log).
  size_t Count(LogLevel level, const std::string& text) const {
    size_t n = 0;
    for (const std::string& line : At(level)) n += line.find(text) != std::string::npos ? 1 : 0;
    return n;
  }

  mutable std::mutex mu;  // guards `lines` against the threads that log
  std::vector<std::pair<int32_t, std::string>> lines;
};

}  // namespace sci::testing
