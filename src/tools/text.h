// Small string helpers for the tools. This abseil is built with its own
// string_view (not std::string_view), so StrCat / StrSplit / SimpleAtoi do
// not take the std::string_view the tools use; StrFormat does.
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sci::tools {

// Splits at any of `delimiters`; empty pieces are kept unless `skip_empty`.
inline std::vector<std::string_view> Split(std::string_view text, std::string_view delimiters, bool skip_empty) {
  std::vector<std::string_view> pieces;
  size_t start = 0;
  while (true) {
    const size_t end = text.find_first_of(delimiters, start);
    const std::string_view piece = text.substr(start, end == std::string_view::npos ? end : end - start);
    if (!piece.empty() || !skip_empty) pieces.push_back(piece);
    if (end == std::string_view::npos) return pieces;
    start = end + 1;
  }
}

// A whole unsigned decimal number, nothing around it.
template <typename T>
bool ParseUnsigned(std::string_view text, T* out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

inline std::string HexOf(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (char c : bytes) {
    hex.push_back(kHex[static_cast<uint8_t>(c) >> 4]);
    hex.push_back(kHex[static_cast<uint8_t>(c) & 0xF]);
  }
  return hex;
}

}  // namespace sci::tools
