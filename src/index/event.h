// One object event as the index consumes it, whatever wire format or C
// caller it came from. Strings are views: they must outlive the call that
// applies the event, nothing more.
#pragma once

#include <cstdint>
#include <string_view>

namespace sci {

enum class EventKind : int32_t {
  kStored = 1,
  kRemoved = 2,
  kAllCleared = 3,
  // Recognised but meaningless to an object index (an engine's block-hash
  // event, an unknown type tag): counted as ignored, never as malformed.
  kIgnored = 0,
};

struct Event {
  EventKind kind = EventKind::kIgnored;
  std::string_view object_key;
  std::string_view group_id;   // empty = none
  std::string_view tenant_id;  // empty = "default"
  std::string_view medium;     // may be empty
};

}  // namespace sci
