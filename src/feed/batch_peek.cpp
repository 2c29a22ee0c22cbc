#include "feed/batch_peek.h"

#include <string_view>

#include "wire/msgpack_view.h"

namespace sci {
namespace {

// The event_id of the event map at the reader (the map consumed); false
// when the event is not a map or carries no unsigned event_id.
bool ReadEventId(MsgpackReader& reader, uint64_t* id) {
  if (reader.PeekType() != MsgpackType::kMap) {
    (void)reader.Skip();
    return false;
  }
  uint32_t fields = 0;
  if (!reader.ReadMapHeader(&fields)) return false;
  bool found = false;
  for (uint32_t f = 0; f < fields; ++f) {
    bool is_id = false;
    if (reader.PeekType() == MsgpackType::kStr) {
      std::string_view key;
      if (!reader.ReadStr(&key)) return false;
      is_id = key == "event_id";
    } else if (!reader.Skip()) {
      return false;
    }
    if (is_id && reader.PeekType() != MsgpackType::kNil) {
      if (!reader.ReadUint64(id)) return false;  // not unsigned: the decoder calls it malformed
      found = *id != 0;  // no publisher's number (wire_decoder.cpp)
    } else if (!reader.Skip()) {
      return false;
    }
  }
  return found;
}

}  // namespace

BatchPeek PeekBatch(std::span<const zmq::message_t> frames) {
  BatchPeek peek;
  if (frames.size() != 3) return peek;
  if (frames[1].size() == 8) {
    const auto* b = static_cast<const uint8_t*>(frames[1].data());
    for (int i = 0; i < 8; ++i) peek.sequence = (peek.sequence << 8) | b[i];
    peek.has_sequence = true;
  }
  MsgpackReader reader(std::span<const uint8_t>(static_cast<const uint8_t*>(frames[2].data()), frames[2].size()));
  uint32_t elements = 0;
  if (!reader.ReadArrayHeader(&elements) || elements < 2 || !reader.Skip() || !reader.ReadArrayHeader(&peek.events)) {
    return peek;
  }
  peek.has_events = true;
  bool all_numbered = peek.events > 0;
  for (uint32_t i = 0; i < peek.events && all_numbered; ++i) {
    uint64_t id = 0;
    all_numbered = ReadEventId(reader, &id);
    if (i == 0) peek.first_id = id;
    peek.last_id = id;
  }
  peek.ids_known = all_numbered;
  return peek;
}

bool PeekBatchEventCount(std::span<const zmq::message_t> frames, uint32_t* events) {
  const BatchPeek peek = PeekBatch(frames);
  *events = peek.events;
  return peek.has_events;
}

}  // namespace sci
