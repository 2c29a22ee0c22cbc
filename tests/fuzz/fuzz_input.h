// Reads a fuzzer's bytes as a stream of small decisions. Past the end every
// read returns 0 (an empty string, false), so any prefix of an input is a
// valid input too, and the all-zero choices are the common, valid ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace sci::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  uint8_t Byte() { return offset_ < size_ ? data_[offset_++] : 0; }

  bool Bool() { return (Byte() & 1) != 0; }

  // Little-endian, so that a short tail still gives a small number.
  uint32_t U32() {
    uint32_t value = 0;
    for (int i = 0; i < 4; ++i) value |= uint32_t{Byte()} << (8 * i);
    return value;
  }

  // A length byte (at most `max_length`), then that many bytes (fewer if the
  // input ends).
  std::string String(size_t max_length) {
    const size_t wanted = Byte() % (max_length + 1);
    const size_t n = wanted < remaining() ? wanted : remaining();
    std::string out(reinterpret_cast<const char*>(data_ + offset_), n);
    offset_ += n;
    return out;
  }

  size_t remaining() const { return size_ - offset_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
};

}  // namespace sci::fuzz
