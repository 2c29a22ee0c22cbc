// Reading the one-line JSON objects the tools (sci-publish, sci-tail) print,
// for the benchmarks that run them as child processes. The lines are the
// tools' own, flat and without escapes; a field that is absent reads as 0 or
// empty.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

namespace sci::bench {

// The unsigned number after "<field>": in a one-line JSON object; 0 if absent.
inline uint64_t JsonNumber(const std::string& json, const std::string& field) {
  const std::string needle = "\"" + field + "\":";
  const size_t at = json.find(needle);
  return at == std::string::npos ? 0 : std::strtoull(json.c_str() + at + needle.size(), nullptr, 10);
}

// The string after "<field>":" in a one-line JSON object; empty if absent.
inline std::string JsonString(const std::string& json, const std::string& field) {
  const std::string needle = "\"" + field + "\":\"";
  const size_t at = json.find(needle);
  if (at == std::string::npos) return {};
  const size_t end = json.find('"', at + needle.size());
  return json.substr(at + needle.size(), end - at - needle.size());
}

}  // namespace sci::bench
