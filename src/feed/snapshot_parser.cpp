#include "feed/snapshot_parser.h"

#include "common/format.h"
#include "index/event.h"

namespace sci {
namespace {

// Keys handed to the sink per call: amortises the call, stays in cache.
constexpr size_t kBatchKeys = 4096;

}  // namespace

bool SnapshotParser::Emit(std::string_view line, std::string* error) {
  ++lines_;
  if (line.empty()) {
    ++empty_lines_;
    return true;
  }
  if (line.size() > kMaxObjectKeyBytes) {
    *error = sci::StrFormat("line %d is %d bytes, longer than the longest key the index accepts (%d)", lines_,
                             line.size(), kMaxObjectKeyBytes);
    return false;
  }
  batch_.push_back(line);
  ++keys_;
  return true;
}

void SnapshotParser::Flush() {
  if (batch_.empty()) return;
  sink_(batch_);
  batch_.clear();
}

bool SnapshotParser::Feed(std::string_view chunk, std::string* error) {
  size_t start = 0;
  if (!partial_.empty()) {
    // Finish the line the last chunk began.
    const size_t end = chunk.find('\n');
    const size_t take = end == std::string_view::npos ? chunk.size() : end;
    if (partial_.size() + take > kMaxObjectKeyBytes) {
      *error = sci::StrFormat("line %d is longer than the longest key the index accepts (%d bytes)", lines_ + 1,
                               kMaxObjectKeyBytes);
      return false;
    }
    partial_.append(chunk.substr(0, take));
    if (end == std::string_view::npos) return true;
    if (!Emit(partial_, error)) return false;
    Flush();  // the batch points into partial_: hand it over before reusing it
    partial_.clear();
    start = end + 1;
  }
  while (start < chunk.size()) {
    const size_t end = chunk.find('\n', start);
    if (end == std::string_view::npos) {
      const std::string_view rest = chunk.substr(start);
      if (rest.size() > kMaxObjectKeyBytes) {
        *error = sci::StrFormat("line %d is longer than the longest key the index accepts (%d bytes)", lines_ + 1,
                                 kMaxObjectKeyBytes);
        return false;
      }
      partial_.assign(rest);
      break;
    }
    if (!Emit(chunk.substr(start, end - start), error)) return false;
    if (batch_.size() >= kBatchKeys) Flush();
    start = end + 1;
  }
  Flush();  // views into `chunk` must not outlive this call
  return true;
}

bool SnapshotParser::Finish(std::string* error) {
  if (!partial_.empty()) {
    *error = sci::StrFormat("the body ends inside line %d (%d bytes without their '\\n'): cut off?", lines_ + 1,
                             partial_.size());
    return false;
  }
  return true;
}

}  // namespace sci
