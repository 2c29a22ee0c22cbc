#include "encode/mooncake_payload_reader.h"

#include <string_view>
#include <utility>

#include "common/format.h"
#include "wire/msgpack_view.h"

namespace sci {
namespace {

bool Fail(std::string* error, std::string reason) {
  if (error != nullptr) *error = std::move(reason);
  return false;
}

bool ReadStrOrNil(MsgpackReader& reader, std::string_view* value) {
  if (reader.PeekType() == MsgpackType::kNil) {
    *value = {};
    return reader.ReadNil();
  }
  return reader.ReadStr(value);
}

bool ReadUintOrNil(MsgpackReader& reader, uint64_t* value) {
  if (reader.PeekType() == MsgpackType::kNil) {
    *value = 0;
    return reader.ReadNil();
  }
  return reader.ReadUint64(value);
}

// One event map, every field the encoder writes from a MooncakeEvent.
bool ReadEvent(MsgpackReader& reader, MooncakeEvent* event) {
  uint32_t entries = 0;
  if (!reader.ReadMapHeader(&entries)) return false;
  *event = MooncakeEvent{};
  event->tenant_id = {};
  event->backend_id = {};
  std::string_view event_type, type;
  for (uint32_t e = 0; e < entries; ++e) {
    std::string_view key;
    if (!reader.ReadStr(&key)) return false;
    bool ok = true;
    if (key == "event_id") {
      ok = ReadUintOrNil(reader, &event->event_id);
    } else if (key == "event_type") {
      ok = ReadStrOrNil(reader, &event_type);
    } else if (key == "type") {
      ok = ReadStrOrNil(reader, &type);
    } else if (key == "object_key") {
      ok = ReadStrOrNil(reader, &event->object_key);
    } else if (key == "group_id") {
      ok = ReadStrOrNil(reader, &event->group_id);
    } else if (key == "tenant_id") {
      ok = ReadStrOrNil(reader, &event->tenant_id);
    } else if (key == "medium") {
      ok = ReadStrOrNil(reader, &event->medium);
    } else if (key == "backend_id") {
      ok = ReadStrOrNil(reader, &event->backend_id);
    } else if (key == "base_block_idx") {
      ok = ReadUintOrNil(reader, &event->base_block_idx);
    } else if (key == "dp_rank") {
      // nil from the first-generation publisher, 0 from the second: the
      // one field that tells their layouts apart.
      event->second_generation = reader.PeekType() != MsgpackType::kNil;
      ok = reader.Skip();
    } else if (key == "model_name") {
      ok = ReadStrOrNil(reader, &event->model_name);
    } else if (key == "block_size") {
      ok = ReadUintOrNil(reader, &event->block_size);
    } else {
      ok = reader.Skip();
    }
    if (!ok) return false;
  }
  event->cleared = event_type == "cleared" || (event_type.empty() && type == "AllBlocksCleared");
  event->stored = event_type == "stored" || (event_type.empty() && type == "BlockStored");
  return true;
}

}  // namespace

bool ReadMooncakePayload(std::span<const uint8_t> payload, MooncakePayload* out, std::string* error) {
  MsgpackReader reader(payload);
  out->events.clear();
  uint32_t elements = 0;
  if (!reader.ReadArrayHeader(&elements) || elements < 2) {
    return Fail(error, "payload is not an array [timestamp, events, ...]");
  }
  if (!reader.ReadInt64(&out->timestamp_ms)) return Fail(error, "timestamp is not an int64");
  uint32_t count = 0;
  if (!reader.ReadArrayHeader(&count)) return Fail(error, "events is not an array");
  out->events.resize(count);  // the reader checked the count against the bytes left
  for (uint32_t i = 0; i < count; ++i) {
    if (!ReadEvent(reader, &out->events[i])) {
      return Fail(error, sci::StrFormat("event %d is not a production event map (byte %d: %s)", i, reader.offset(),
                                         MsgpackErrorName(reader.error())));
    }
  }
  for (uint32_t extra = 2; extra < elements; ++extra) {
    if (!reader.Skip()) return Fail(error, sci::StrFormat("payload element %d is truncated", extra));
  }
  if (!reader.AtEnd()) return Fail(error, sci::StrFormat("%d trailing bytes after the payload", reader.remaining()));
  return true;
}

}  // namespace sci
