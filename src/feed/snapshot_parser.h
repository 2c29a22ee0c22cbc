// Splits the body of a Mooncake master's `GET /get_all_keys` into object
// keys as it streams in (docs/wire-formats.md, section 4): one key per line,
// every line ending in '\n', an empty body for an empty pool.
//
// The parser holds at most one partial line (bounded by kMaxObjectKeyBytes)
// plus one batch of views into the current chunk; it never holds the body.
// What it refuses, because the body cannot then be trusted whole:
//   - a line longer than the longest key the index accepts;
//   - a body whose last line lacks its '\n' (a cut-off transfer).
// Empty lines name no object and are skipped (counted in empty_lines()).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sci {

class SnapshotParser {
 public:
  // Receives complete keys in body order, in batches; the views are valid
  // only during the call.
  using KeySink = std::function<void(std::span<const std::string_view> keys)>;

  explicit SnapshotParser(KeySink sink) : sink_(std::move(sink)) {}

  // Feeds the next chunk of the body. False (with a reason in *error) when
  // the body is malformed; the parser is then done.
  bool Feed(std::string_view chunk, std::string* error);

  // The body has ended. False (with a reason) when it ended mid-line.
  bool Finish(std::string* error);

  uint64_t keys() const { return keys_; }
  uint64_t empty_lines() const { return empty_lines_; }

 private:
  bool Emit(std::string_view line, std::string* error);
  void Flush();

  KeySink sink_;
  std::string partial_;  // the start of a line that continues in the next chunk
  std::vector<std::string_view> batch_;
  uint64_t keys_ = 0;
  uint64_t empty_lines_ = 0;
  uint64_t lines_ = 0;
};

}  // namespace sci
