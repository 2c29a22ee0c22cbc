// When to say, again, that something is still wrong: first after a grace,
// then after twice as long each time, up to a ceiling. A subscriber stuck
// for hours thus logs a handful of lines, not one per poll (never a flood),
// and a new user still hears about it within the grace.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>

namespace sci {

class WarningBackoff {
 public:
  using Clock = std::chrono::steady_clock;

  // The interval doubles up to `first` × 2^kMaxDoublings (10 s grows to ~10 min).
  static constexpr uint32_t kMaxDoublings = 6;

  // The trouble began at `since`: the first warning is due at since + first.
  // Does nothing while already armed (the trouble goes on).
  void Arm(Clock::time_point since, Clock::duration first) {
    if (armed_) return;
    armed_ = true;
    since_ = since;
    interval_ = first;
    first_ = first;
    due_ = since + first;
  }
  // The trouble is over: the next one starts from the grace again.
  void Disarm() { armed_ = false; }
  bool armed() const { return armed_; }

  // Whether a warning is due at `now`; if so the next one is scheduled.
  bool Due(Clock::time_point now) {
    if (!armed_ || now < due_) return false;
    interval_ = std::min<Clock::duration>(interval_ * 2, first_ * (int64_t{1} << kMaxDoublings));
    due_ = now + interval_;
    return true;
  }

  // When to wake up for the next warning (nullopt: none pending).
  std::optional<Clock::time_point> deadline() const {
    if (!armed_) return std::nullopt;
    return due_;
  }
  // How long the trouble has lasted at `now`.
  Clock::duration lasted(Clock::time_point now) const { return now - since_; }

 private:
  bool armed_ = false;
  Clock::time_point since_{};
  Clock::time_point due_{};
  Clock::duration first_{};
  Clock::duration interval_{};
};

}  // namespace sci
