// How the page store files an object key: as a page and a slot of it, or
// whole.
//
// A key that carries a page's digest -- a run of 64 lowercase hex digits, a
// SHA-256 -- decomposes into that digest (the page) and the bytes around it
// (the slot), whatever the family that named it: "<hash>_<rank>_<k|v>",
// "<hash>__swa", "<prefix><hash>", "<prefix>@<digest>" all do. The index
// knows no family; a layout brings its own key names and finds their slots
// by the same rule. Every key of one page shares the digest; every page
// of one layout shares the layout's few slots. The digest is the first 64
// digits of the key's first run of at least 64 hex digits (either case), the
// rule the key fingerprints already split by (fingerprint.h); if those 64
// digits are not all lowercase the key does not decompose (the digest would
// not give the key's bytes back) and is stored whole.
//
// Exact: ShapeOf is a function of the key, and prefix + digits + suffix is
// the key again, so two different keys never share (prefix, digest,
// suffix). A layout asks for a page by the same rule: it must check once
// that its own keys put the digest where this rule finds it (a prefix that
// ends with a hex digit, or holds 64 of them, would not).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "index/fingerprint.h"

namespace sci {

using PageDigest = std::array<uint8_t, 32>;

struct KeyShape {
  bool decomposes = false;
  std::string_view prefix;  // the key's bytes before the digest (a view of the key)
  std::string_view suffix;  // ... and after it
  PageDigest digest{};      // the 32 bytes the 64 digits spell
};

inline KeyShape ShapeOf(std::string_view key) {
  KeyShape shape;
  const size_t end = HexRunEnd(key);
  if (end == kNoHexRun) return shape;
  const size_t start = end - kFingerprintHexRun;
  if (!LowercaseHexBytes(key.data() + start, shape.digest.data())) return shape;
  shape.decomposes = true;
  shape.prefix = key.substr(0, start);
  shape.suffix = key.substr(end);
  return shape;
}

// The key of `digest`'s page in slot (prefix, suffix): ShapeOf's inverse.
inline std::string KeyOf(std::string_view prefix, const PageDigest& digest, std::string_view suffix) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string key;
  key.reserve(prefix.size() + 2 * digest.size() + suffix.size());
  key += prefix;
  for (const uint8_t byte : digest) {
    key += kDigits[byte >> 4];
    key += kDigits[byte & 0xF];
  }
  key += suffix;
  return key;
}

}  // namespace sci
