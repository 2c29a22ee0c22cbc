// Decodes one ZeroMQ multipart KV-event message, in any wire format of
// docs/wire-formats.md, into the events the index applies.
//
// Formats and how they are told apart (per event, never by frame or order):
//   - kMooncake: production Mooncake master. Events are msgpack maps that
//     carry `event_type` or `object_key`; fields are read by name, unknown
//     fields skipped, nil and absent fields tolerated.
//   - kMooncakeV1: first-generation Mooncake arrays tagged BlockStoreEvent /
//     BlockUpdateEvent / RemoveAllEvent. Tenant "default", no group.
//   - kEngine: vLLM / SGLang worker events, arrays tagged BlockStored /
//     BlockRemoved / AllBlocksCleared or maps with `type` (and neither
//     `event_type` nor `object_key`). AllBlocksCleared clears; the
//     block-hash events become EventKind::kIgnored.
// One message holds events of one format only; mixing is malformed.
//
// Decisions where the documents leave room (each leans to "miss"):
//   - A production event whose `event_type` is not "stored"/"removed" (or,
//     when `event_type` is absent or nil, whose legacy `type` is not
//     "BlockStored"/"BlockRemoved") is not malformed: it is counted in
//     unknown_event_types (ApplyMessage adds it to ignored_events). If it
//     names an object key, that key's state is no longer known, so it is
//     decoded as a removal of the key (with its group id, if any) on no
//     medium, so that it drops the key under both residency rules: the
//     worst it can cost is a miss, where ignoring it, or taking away its
//     medium alone, could leave a false hit (an unknown "evicted", say). Without an object key it is decoded as
//     kTenantCleared of its tenant: it may have emptied anything there.
//   - `event_type` "cleared" (or, without `event_type`, legacy `type`
//     "AllBlocksCleared") is kTenantCleared: the second generation's
//     "every medium of this tenant is empty". An engine-format map of type
//     AllBlocksCleared clears its tenant if it names one, else everything.
//   - `event_type` decides when it disagrees with the legacy `type`.
//   - A v1 store or update whose replica list is empty leaves the object with
//     no replica: decoded as a removal.
//   - Array events with an unknown string tag are kIgnored (a newer engine's
//     event type), never malformed.
//   - The payload array may carry elements after the documented ones (an
//     epoch, some day); they are skipped. Map events may carry any fields.
//
// Hostile input: parsing goes through MsgpackReader (msgpack_view.h), which
// allocates nothing and checks every length against the bytes present. The
// only allocations are `events` (and the error string): reserved once per message for at most remaining-bytes / 2
// entries (the smallest event takes two bytes; an Event is 72 bytes, so 36
// bytes per payload byte at worst), whatever count the message claims; none
// once a reused DecodedMessage is warm.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "index/event.h"

namespace sci {

enum class WireFormat : int32_t { kMooncake = 1, kMooncakeV1 = 2, kEngine = 3 };

// "mooncake", "mooncake-v1", "engine".
std::string_view WireFormatName(WireFormat format);

struct DecodedMessage {
  std::string_view topic;        // frame 0
  uint64_t sequence = 0;         // frame 1, big-endian
  WireFormat format = WireFormat::kMooncake;
  std::vector<Event> events;     // views into the frames' bytes; reused across calls (clear(), not shrink)

  // Batch timestamp in ms. Formats that send float seconds are converted
  // (rounded); a non-finite or out-of-range float gives 0.
  int64_t timestamp_ms = 0;
  // The payload's third element (dp_rank / data_parallel_rank), if present
  // and not nil.
  bool has_dp_rank = false;
  uint64_t dp_rank = 0;
  // Production events with an event type this decoder does not know (see
  // above: decoded as removals of their key, or kIgnored without one).
  uint32_t unknown_event_types = 0;
  // The type of the first of them that named no key (decoded as a clear of
  // its tenant), for the log; empty if none. A view into the frames.
  std::string_view unknown_keyless_type;
  // The production events' event_id numbers: per publisher, per event sent,
  // from 1, consecutive across the batches it sends (an event dropped from
  // its queue gets none); a restarted publisher starts again at 1
  // (wire-formats.md). The first and last of this message's map events,
  // valid when event_ids_known: every one of them carried a number.
  bool event_ids_known = false;
  uint64_t first_event_id = 0;
  uint64_t last_event_id = 0;
};

// Decodes one ZeroMQ multipart message. On malformed input returns false and sets *error to a
// one-line human-readable reason; *out is then unspecified. Never throws on hostile bytes
// (std::bad_alloc aside). `error` may be null.
bool DecodeMessage(std::span<const std::span<const uint8_t>> frames, DecodedMessage* out, std::string* error);

}  // namespace sci
