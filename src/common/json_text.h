// JSON text as the readers of worker-published configs take it
// (sglang/runtime_config.h, vllm/layout_spec.h): parsed without exceptions,
// with the parser's own message when it is not JSON, and values quoted
// briefly in the errors that name a field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <new>
#include <vector>

namespace sci {

// A parsed document that an allocation failure cannot turn into
// std::terminate when it goes. nlohmann's destructor of an array or an
// object reserves a vector to destroy its children iteratively, inside a
// noexcept function: under memory pressure that is std::terminate (found by
// capi_allocation_sweep_test). This one empties the containers children
// first, so that each container is empty when destroyed (nothing to
// reserve); if even that cannot get memory, the tree is leaked -- once per
// failure -- rather than destroyed.
struct JsonDocument {
  nlohmann::json value;

  JsonDocument() = default;
  JsonDocument(const JsonDocument&) = delete;
  JsonDocument& operator=(const JsonDocument&) = delete;
  ~JsonDocument() {
    try {
      std::vector<nlohmann::json*> pending{&value};
      std::vector<nlohmann::json*> containers;  // parents before their children
      while (!pending.empty()) {
        nlohmann::json* node = pending.back();
        pending.pop_back();
        if (!node->is_structured()) continue;
        containers.push_back(node);
        if (node->is_array()) {
          for (nlohmann::json& child : *node) pending.push_back(&child);
        } else {
          for (auto it = node->begin(); it != node->end(); ++it) pending.push_back(&it.value());
        }
      }
      for (auto it = containers.rbegin(); it != containers.rend(); ++it) (*it)->clear();
    } catch (...) {
      new (&value) nlohmann::json();  // leaks the tree: destroying it would allocate
    }
  }
};

// A SAX handler that accepts every value and stops at the first parse
// error: derive and override what a pass looks at.
struct JsonSaxAcceptingAll : nlohmann::json_sax<nlohmann::json> {
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception&) override { return false; }
};

// Parses `text`. On failure returns false and sets *why to the parser's
// message ("parse error at line 1, column 17: ..."). The first pass keeps
// exceptions off; the second, run only for text that failed, exists because
// a discarded value carries no message.
inline bool ParseJson(std::string_view text, nlohmann::json* out, std::string* why) {
  // nlohmann's lexer takes a NUL byte for the end of the input, so
  // "{...}\0<anything>" would read as "{...}"; JSON text holds no raw NUL,
  // and serde_json (the Rust crate's reader) refuses one.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    *out = nlohmann::json(nlohmann::json::value_t::discarded);
    *why = "a NUL byte at offset " + std::to_string(nul);
    return false;
  }
  *out = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (!out->is_discarded()) return true;

  struct ErrorOnly : JsonSaxAcceptingAll {
    std::string message;
    bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& e) override {
      message = e.what();
      return false;
    }
  } sax;
  nlohmann::json::sax_parse(text.begin(), text.end(), &sax);
  // "[json.exception.parse_error.101] parse error ...": the bracketed id
  // means nothing to whoever wrote the config.
  const size_t id_end = sax.message.find("] ");
  const std::string_view message =
      std::string_view(sax.message).substr(id_end == std::string::npos ? 0 : id_end + 2);
  // The message quotes the bytes it stopped at ("last read: ..."), which
  // may be anything: escape what is not printable ASCII, so the error stays
  // text a log line or a Rust String can carry.
  why->clear();
  for (const char c : message) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7F) {
      why->push_back(c);
    } else {
      constexpr char kHex[] = "0123456789abcdef";
      why->append({'\\', 'x', kHex[byte >> 4], kHex[byte & 0xF]});
    }
  }
  if (why->empty()) *why = "parse error";
  return false;
}

// `value` as an error message quotes it: scalars as JSON (long strings cut),
// non-empty objects and arrays as {...} and [...] -- dumping a hostile
// document whole could be megabytes, or recurse as deep as it nests.
inline std::string JsonValueText(const nlohmann::json& value) {
  constexpr size_t kMaxQuoted = 64;
  if (value.is_object()) return value.empty() ? "{}" : "{...}";
  if (value.is_array()) return value.empty() ? "[]" : "[...]";
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > kMaxQuoted) {
    text.resize(kMaxQuoted);
    text += "...";
  }
  return text;
}

// A whole number from 0 to UINT32_MAX, as JSON wrote it: nlohmann's get<>
// would wrap -64 to 4294967232 and truncate 64.5 to 64, so a typo would
// become a layout nobody asked for.
inline bool JsonUint32(const nlohmann::json& value, uint32_t* out) {
  if (!value.is_number_integer()) return false;
  if (value.is_number_unsigned()) {
    const uint64_t n = value.get<uint64_t>();
    if (n > UINT32_MAX) return false;
    *out = static_cast<uint32_t>(n);
    return true;
  }
  if (value.get<int64_t>() != 0) return false;  // negative ("-0" parses as a signed zero)
  *out = 0;
  return true;
}

// The member `name` of `object`, or null when it is absent or JSON null
// (the configs' "unset").
inline const nlohmann::json* JsonMember(const nlohmann::json& object, std::string_view name) {
  const auto it = object.find(name);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace sci
