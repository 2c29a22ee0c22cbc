// The apply_message fuzzer's input format: one ZeroMQ multipart message.
//
//   byte 0            frame count (mod 8, so wrong counts are reachable too)
//   per frame         16-bit little-endian length, then that many bytes
//
// A length longer than what is left is cut to what is left; a frame whose
// length bytes are missing is empty. So every byte string is a message, and
// the seed generator writes real messages by PackFrames.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace sci::fuzz {

inline constexpr size_t kMaxFuzzFrames = 8;
inline constexpr size_t kMaxFuzzFrameBytes = 0xFFFF;

// Frames as views into `data`.
inline std::vector<std::span<const uint8_t>> ParseFrames(const uint8_t* data, size_t size) {
  std::vector<std::span<const uint8_t>> frames;
  if (size == 0) return frames;
  const size_t count = data[0] % kMaxFuzzFrames;
  size_t at = 1;
  for (size_t f = 0; f < count; ++f) {
    size_t length = 0;
    if (size - at >= 2) {
      length = size_t{data[at]} | (size_t{data[at + 1]} << 8);
      at += 2;
    } else {
      at = size;
    }
    if (length > size - at) length = size - at;
    frames.emplace_back(data + at, length);
    at += length;
  }
  return frames;
}

// The inverse, for seeds: false when a frame is too long for the format.
inline bool PackFrames(const std::vector<std::string>& frames, std::string* out) {
  if (frames.size() >= kMaxFuzzFrames) return false;
  out->assign(1, static_cast<char>(frames.size()));
  for (const std::string& frame : frames) {
    if (frame.size() > kMaxFuzzFrameBytes) return false;
    out->push_back(static_cast<char>(frame.size() & 0xFF));
    out->push_back(static_cast<char>(frame.size() >> 8));
    out->append(frame);
  }
  return true;
}

}  // namespace sci::fuzz
