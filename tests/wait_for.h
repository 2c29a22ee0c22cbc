// Test support: a bounded wait on a condition another thread or process
// changes (counters, a child's output, a server's answer). Every wait in the
// tests is bounded; none is a bare sleep.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace sci::testing {

// Polls `done` every `interval` until it holds or `timeout` passes; returns
// whether it held.
inline bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout = std::chrono::seconds(10),
                    std::chrono::milliseconds interval = std::chrono::milliseconds(1)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return done();
    std::this_thread::sleep_for(interval);
  }
  return true;
}

}  // namespace sci::testing
