// What a resync needs to know of a buffered message before (or instead of)
// decoding it: its sequence, its number of events, and the event ids it
// begins and ends with. Read straight from the frames, allocating nothing,
// so that a message is judged the moment it arrives (resync.h) at a
// fraction of a decode's cost. A message of another shape peeks as unknown
// and is left to the replay's decoder, which drops it as malformed.
#pragma once

#include <cstdint>
#include <span>
#include <zmq.hpp>

namespace sci {

struct BatchPeek {
  bool has_sequence = false;  // frames [topic, 8-byte sequence, payload]
  uint64_t sequence = 0;
  bool has_events = false;  // payload [timestamp, [events...], ...]
  uint32_t events = 0;
  // Every event is a map with an unsigned event_id (the Mooncake production
  // format, as the decoder reads it: wire_decoder.h).
  bool ids_known = false;
  uint64_t first_id = 0;
  uint64_t last_id = 0;
};

BatchPeek PeekBatch(std::span<const zmq::message_t> frames);

// The number of events in a Mooncake batch's payload, read without
// decoding the events. False if the message has another shape.
bool PeekBatchEventCount(std::span<const zmq::message_t> frames, uint32_t* events);

}  // namespace sci
