// One JSON object per output line, for the command-line tools.
//
// Object keys, group ids and topics are arbitrary bytes on the wire, but a
// JSON string holds Unicode. A field whose bytes are valid UTF-8 is written
// as is (escaped where JSON requires). Otherwise it is written lossily, each
// invalid byte as U+FFFD, and the exact bytes follow in a sibling field
// "<name>_hex", so nothing is ever lost or silently altered.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "text.h"

namespace sci::tools {

// Length of the valid UTF-8 sequence starting at s[i] (1 to 4), or 0 if the
// bytes there are not one (overlong forms, surrogates and code points past
// U+10FFFF are invalid, as RFC 3629 says).
inline size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b0 = byte(i);
  if (b0 < 0x80) return 1;
  size_t n = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

inline bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceLength(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// Appends `s` as a quoted JSON string; invalid UTF-8 bytes become U+FFFD.
inline void AppendJsonString(std::string* out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceLength(s, i);
    if (n == 0) {
      out->append("\\ufffd");
      ++i;
      continue;
    }
    if (n > 1) {
      out->append(s.substr(i, n));
      i += n;
      continue;
    }
    const char c = s[i++];
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (static_cast<uint8_t>(c) < 0x20 || c == 0x7F) {
          out->append("\\u00");
          out->push_back(kHex[static_cast<uint8_t>(c) >> 4]);
          out->push_back(kHex[static_cast<uint8_t>(c) & 0xF]);
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

// Builds `{"a":1,"b":"x",...}` field by field.
class JsonObject {
 public:
  JsonObject() : text_("{") {}

  // A byte string; see the file comment for bytes that are not UTF-8.
  JsonObject& Bytes(std::string_view name, std::string_view value) {
    Key(name);
    AppendJsonString(&text_, value);
    if (!IsValidUtf8(value)) {
      Key(std::string(name) + "_hex");
      AppendJsonString(&text_, HexOf(value));
    }
    return *this;
  }
  JsonObject& Uint(std::string_view name, uint64_t value) {
    Key(name);
    absl::StrAppend(&text_, value);
    return *this;
  }
  JsonObject& Int(std::string_view name, int64_t value) {
    Key(name);
    absl::StrAppend(&text_, value);
    return *this;
  }
  JsonObject& Bool(std::string_view name, bool value) {
    Key(name);
    text_.append(value ? "true" : "false");
    return *this;
  }
  // A value that is already JSON (a nested object or array).
  JsonObject& Raw(std::string_view name, std::string_view json) {
    Key(name);
    text_.append(json);
    return *this;
  }

  // Closes the object; the builder is spent afterwards.
  std::string Finish() {
    text_.push_back('}');
    return std::move(text_);
  }

 private:
  void Key(std::string_view name) {
    if (text_.size() > 1) text_.push_back(',');
    AppendJsonString(&text_, name);
    text_.push_back(':');
  }

  std::string text_;
};

// Builds `[v1,v2,...]` from values that are already JSON.
class JsonArray {
 public:
  JsonArray() : text_("[") {}
  JsonArray& Raw(std::string_view json) {
    if (text_.size() > 1) text_.push_back(',');
    text_.append(json);
    return *this;
  }
  std::string Finish() {
    text_.push_back(']');
    return std::move(text_);
  }

 private:
  std::string text_;
};

}  // namespace sci::tools
