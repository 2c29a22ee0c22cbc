// One object event as the index consumes it, whatever wire format or C
// caller it came from. Strings are views: they must outlive the call that
// applies the event, nothing more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sci {

// The longest object key the index accepts (64 KiB). A longer key is
// ignored and counted, as an empty one is: it can only turn into a miss. The
// same bound caps a snapshot line (feed/snapshot_parser.h), so that a
// malformed snapshot cannot make a line buffer grow without end.
inline constexpr size_t kMaxObjectKeyBytes = size_t{64} << 10;

enum class EventKind : int32_t {
  kStored = 1,
  kRemoved = 2,
  kAllCleared = 3,
  // Every object of the event's tenant is gone (other tenants stay): the
  // second-generation `cleared`, or an event of a type the decoder does
  // not know that names no key (it may have emptied anything).
  kTenantCleared = 4,
  // Recognised but meaningless to an object index (an engine's block-hash
  // event, an unknown type tag): counted as ignored, never as malformed.
  kIgnored = 0,
};

// The Mooncake publisher generation an event's own bytes show
// (wire-formats.md): main's publisher writes the event map's `dp_rank` as
// nil, the conductor line's as an integer. A first-generation `removed`
// means "no replica left", whatever medium it names, so the index never
// keeps such a key on another medium (index-semantics.md, "Residency").
// Unknown for events that carry no such map (the C API's, other formats').
enum class PublisherGeneration : uint8_t { kUnknown = 0, kFirst = 1, kSecond = 2 };

// A batch's event_id numbers (the Mooncake production format's per-event
// counter), when every event of it carried one.
struct BatchEventIds {
  bool known = false;
  uint64_t first = 0;
  uint64_t last = 0;
};

// What applying one batch did to the sequence and the tables. The feed
// (the subscriber, a resync's replay) steers by this; the counters only
// report it.
struct BatchOutcome {
  enum class Sequence : uint8_t {
    kFirst,      // no cursor before it: it begins a history
    kContinued,  // last + 1, and its event ids (if any) continue the last batch's
    kDuplicate,  // the last sequence again: ignored
    kGap,        // a sequence other than last + 1: cleared first
    kRestart,    // last + 1 but not the same publisher (event ids): cleared first
  };
  Sequence sequence = Sequence::kFirst;
  bool cleared = false;  // the tables were emptied (a gap, a restart, an all-cleared event)
  bool applied() const { return sequence != Sequence::kDuplicate; }
};

struct Event {
  EventKind kind = EventKind::kIgnored;
  std::string_view object_key;
  std::string_view group_id;   // empty = none
  std::string_view tenant_id;  // empty = "default"
  std::string_view medium;     // may be empty
  PublisherGeneration generation = PublisherGeneration::kUnknown;
};

}  // namespace sci
