// One JSON object per output line, for the command-line tools, written with
// nlohmann::json (fields in insertion order).
//
// Object keys, group ids and topics are arbitrary bytes on the wire, but a
// JSON string holds Unicode. A field whose bytes are valid UTF-8 is written
// as is (escaped where JSON requires). Otherwise it is written lossily, each
// invalid byte as U+FFFD, and the exact bytes follow in a sibling field
// "<name>_hex", so nothing is ever lost or silently altered.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "text.h"

namespace sci::tools {

using Json = nlohmann::ordered_json;

// Whether nlohmann::json can write `bytes` as a string without replacing
// anything: its strict serializer is the UTF-8 check.
inline bool IsValidUtf8(std::string_view bytes) {
  try {
    (void)Json(std::string(bytes)).dump();
    return true;
  } catch (const Json::type_error&) {
    return false;
  }
}

// Sets object[name] to `bytes`; see the file comment for bytes that are not UTF-8.
inline void SetBytes(Json& object, const std::string& name, std::string_view bytes) {
  object[name] = std::string(bytes);
  if (!IsValidUtf8(bytes)) object[name + "_hex"] = HexOf(bytes);
}

// The value on one line, invalid UTF-8 replaced by U+FFFD (SetBytes has put
// the exact bytes beside it).
inline std::string JsonLine(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace sci::tools
