// A field of a worker-published JSON object that the reader does not know
// is ignored (newer workers publish more; that stays readable), but a typo
// ("tp_sz") then leaves a layout that silently never hits. So each unknown
// field is named in one warning through the log callback, with the known
// field it most likely meant. The 1.x meaning holds: nothing is refused.
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/escaping.h"
#include "common/log.h"

namespace sci {

// Edit distance (insertions, deletions, substitutions), for short names.
inline size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The known name `name` is most likely a misspelling of: within 2 edits and
// fewer than half its letters; empty if none is that close.
inline std::string_view ClosestKnownField(std::string_view name, std::initializer_list<std::string_view> known) {
  std::string_view best;
  size_t best_distance = 3;
  for (std::string_view candidate : known) {
    const size_t distance = EditDistance(name, candidate);
    if (distance < best_distance && 2 * distance < std::max(name.size(), candidate.size())) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

// Warns once per member of `object` not in `known` nor in `also_ignored`
// (fields the format documents that this reader has no use for). `where`
// says which document ("SGLang runtime config"), `path` the object's JSON
// path ("" at the top, "pools[0]"). At most 16 warnings a call: a hostile
// document cannot flood the log.
inline void WarnUnknownFields(const nlohmann::json& object, std::string_view where, std::string_view path,
                              std::initializer_list<std::string_view> known,
                              std::span<const std::string_view> also_ignored = {}) {
  if (!object.is_object() || !LogEnabled()) return;
  constexpr size_t kMaxWarnings = 16;
  constexpr size_t kMaxNameBytes = 64;
  size_t warned = 0, unknown = 0;
  for (auto it = object.begin(); it != object.end(); ++it) {
    const std::string& name = it.key();  // (not a structured binding: clang 14 cannot capture one)
    const auto is = [&name](std::string_view field) { return field == name; };
    if (std::any_of(known.begin(), known.end(), is) || std::any_of(also_ignored.begin(), also_ignored.end(), is)) {
      continue;
    }
    ++unknown;
    if (warned == kMaxWarnings) continue;
    ++warned;
    const std::string shown = absl::CHexEscape(name.substr(0, kMaxNameBytes));
    const std::string field = path.empty() ? shown : std::string(path) + "." + shown;
    const std::string_view closest = ClosestKnownField(name, known);
    if (closest.empty()) {
      Logf(LogLevel::kWarn, "%s: unknown field \"%s\" ignored", where, field);
    } else {
      Logf(LogLevel::kWarn, "%s: unknown field \"%s\" ignored (did you mean \"%s\"?)", where, field, closest);
    }
  }
  if (unknown > warned) {
    Logf(LogLevel::kWarn, "%s: %d more unknown fields in %s ignored", where, unknown - warned,
         path.empty() ? std::string_view("the top level") : path);
  }
}

}  // namespace sci
