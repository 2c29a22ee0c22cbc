// A flag that lets one warning through per object that holds it (a layout
// warns once about a query's wrong block size, not once per query). Copies
// start unwarned: a copy is another object for the operator to hear about.
#pragma once

#include <atomic>

namespace sci {

class WarnOnce {
 public:
  WarnOnce() = default;
  WarnOnce(const WarnOnce&) {}
  WarnOnce& operator=(const WarnOnce&) { return *this; }

  // True for the first caller only (any thread).
  bool First() const { return !done_.load(std::memory_order_relaxed) && !done_.exchange(true, std::memory_order_relaxed); }

 private:
  mutable std::atomic<bool> done_{false};
};

}  // namespace sci
