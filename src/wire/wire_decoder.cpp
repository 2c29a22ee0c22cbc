#include "wire/wire_decoder.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "common/format.h"
#include "wire/msgpack_view.h"

namespace sci {
namespace {

constexpr std::string_view kDefaultTenant = "default";
constexpr size_t kFrameCount = 3;
constexpr size_t kSequenceBytes = 8;

// Float seconds to integer ms, only when the result is representable.
int64_t SecondsToMillis(double seconds) {
  const double ms = seconds * 1000.0;
  if (!std::isfinite(ms) || std::fabs(ms) >= 9.0e18) return 0;
  return std::llround(ms);
}

// The fields of a map event this decoder reads; everything else is skipped.
struct MapEventFields {
  bool has_event_type_field = false;  // the key is there (its value may be nil)
  bool has_object_key_field = false;
  std::string_view event_type;
  std::string_view type;
  std::string_view object_key;
  std::string_view group_id;
  std::string_view tenant_id;
  std::string_view medium;
  PublisherGeneration generation = PublisherGeneration::kUnknown;  // from dp_rank
  bool has_event_id = false;
  uint64_t event_id = 0;
};

class PayloadDecoder {
 public:
  PayloadDecoder(std::span<const uint8_t> payload, DecodedMessage* out, std::string* error)
      : reader_(payload), out_(out), error_(error) {}

  bool Decode() {
    uint32_t elements = 0;
    if (!reader_.ReadArrayHeader(&elements)) {
      return ReadFailure("payload", "an array [timestamp, events, ...]");
    }
    if (elements < 2) {
      return Fail(sci::StrFormat("payload array has %d elements, expected at least 2 (timestamp, events)", elements));
    }
    if (!DecodeTimestamp()) return false;

    uint32_t count = 0;
    if (!reader_.ReadArrayHeader(&count)) return ReadFailure("events", "an array");
    // The smallest event ([""]) takes 2 bytes, so this reserves at most one
    // Event per two payload bytes, however large the claimed count.
    const size_t plausible = std::min<size_t>(count, reader_.remaining() / 2);
    out_->events.reserve(plausible);
    for (uint32_t i = 0; i < count; ++i) {
      if (!DecodeEvent(i)) return false;
    }

    if (elements >= 3) {
      if (reader_.PeekType() == MsgpackType::kNil) {
        reader_.ReadNil();
      } else if (reader_.ReadUint64(&out_->dp_rank)) {
        out_->has_dp_rank = true;
      } else {
        return ReadFailure("dp_rank", "uint or nil");
      }
    }
    for (uint32_t extra = 3; extra < elements; ++extra) {
      if (!reader_.Skip()) return ReadFailure(sci::StrFormat("payload element %d", extra), "a msgpack value");
    }
    if (!reader_.AtEnd()) {
      return Fail(sci::StrFormat("%d trailing bytes after the payload", reader_.remaining()));
    }
    return SettleFormat();
  }

 private:
  // ---------------------------------------------------------------- payload --

  bool DecodeTimestamp() {
    const MsgpackType type = reader_.PeekType();
    if (type == MsgpackType::kFloat) {
      double seconds = 0;
      if (!reader_.ReadDouble(&seconds)) return ReadFailure("timestamp", "a number");
      out_->timestamp_ms = SecondsToMillis(seconds);
      float_timestamp_ = true;
      return true;
    }
    if (!reader_.ReadInt64(&out_->timestamp_ms)) return ReadFailure("timestamp", "an int64 or a float");
    return true;
  }

  // Every event named the format it belongs to, or none did (an empty batch,
  // only unknown tags): then it is only a label, guessed from the v1 default
  // topic and the timestamp's type (msgpack-c packs a whole-number double as
  // an integer, so the type alone cannot tell).
  bool SettleFormat() {
    if (!format_) {
      if (out_->topic == "mooncake") {
        format_ = WireFormat::kMooncakeV1;
      } else {
        format_ = float_timestamp_ ? WireFormat::kEngine : WireFormat::kMooncake;
      }
    }
    if (*format_ == WireFormat::kMooncake && float_timestamp_) {
      return Fail("timestamp is a float, expected int64 milliseconds in a mooncake message");
    }
    out_->format = *format_;
    return true;
  }

  bool ClaimFormat(uint32_t event, WireFormat format) {
    if (!format_) {
      format_ = format;
      return true;
    }
    if (*format_ == format) return true;
    return Fail(sci::StrFormat("event %d (%s format) in a message of %s events", event,
                                WireFormatName(format), WireFormatName(*format_)));
  }

  // ----------------------------------------------------------------- events --

  bool DecodeEvent(uint32_t i) {
    switch (reader_.PeekType()) {
      case MsgpackType::kMap: return DecodeMapEvent(i);
      case MsgpackType::kArray: return DecodeArrayEvent(i);
      default: {
        uint32_t unused = 0;
        reader_.ReadMapHeader(&unused);  // records why: end of data or wrong type
        return ReadFailure(sci::StrFormat("event %d", i), "a map or an array");
      }
    }
  }

  bool DecodeMapEvent(uint32_t i) {
    uint32_t entries = 0;
    if (!reader_.ReadMapHeader(&entries)) return ReadFailure(sci::StrFormat("event %d", i), "a map");
    MapEventFields f;
    for (uint32_t e = 0; e < entries; ++e) {
      std::string_view key;
      if (!reader_.ReadStr(&key)) return ReadFailure(sci::StrFormat("event %d map key", i), "str");
      if (!ReadMapField(i, key, &f)) return false;
    }
    if (f.has_event_type_field || f.has_object_key_field) return AddMooncakeEvent(i, f);
    if (!f.type.empty()) {
      if (!ClaimFormat(i, WireFormat::kEngine)) return false;
      if (f.type == "AllBlocksCleared" && !f.tenant_id.empty()) {
        // A clear that names its tenant empties that tenant only.
        out_->events.push_back(Event{EventKind::kTenantCleared, {}, {}, f.tenant_id, {}});
      } else {
        AddEvent(f.type == "AllBlocksCleared" ? EventKind::kAllCleared : EventKind::kIgnored);
      }
      return true;
    }
    return Fail(sci::StrFormat("event %d is a map with none of event_type, object_key, type", i));
  }

  // Reads the value of one map entry into `f` if the index needs it; checks
  // the type of the other fields the production format defines (a
  // publisher that gets those wrong is not one this decoder understands);
  // skips the rest.
  bool ReadMapField(uint32_t i, std::string_view key, MapEventFields* f) {
    // Dispatch on length first: one compare for most keys.
    switch (key.size()) {
      case 4:
        if (key == "type") return ReadStrOrNil(i, key, &f->type);
        break;
      case 6:
        if (key == "medium") return ReadStrOrNil(i, key, &f->medium);
        break;
      case 7:
        if (key == "dp_rank") {
          // nil: Mooncake main's publisher; an integer: the conductor
          // line's (PublisherGeneration). Anything else says nothing.
          if (reader_.PeekType() == MsgpackType::kNil) {
            f->generation = PublisherGeneration::kFirst;
          } else if (reader_.PeekType() == MsgpackType::kUint) {
            f->generation = PublisherGeneration::kSecond;
          }
        }
        break;
      case 8:
        if (key == "group_id") return ReadStrOrNil(i, key, &f->group_id);
        if (key == "event_id") return ReadEventId(i, key, f);
        break;
      case 9:
        if (key == "tenant_id") return ReadStrOrNil(i, key, &f->tenant_id);
        if (key == "timestamp") {
          int64_t unused = 0;
          if (reader_.PeekType() == MsgpackType::kNil) return reader_.ReadNil();
          if (!reader_.ReadInt64(&unused)) return ReadFailure(FieldName(i, key), "int64 or nil");
          return true;
        }
        break;
      case 10:
        if (key == "object_key") {
          f->has_object_key_field = true;
          return ReadStrOrNil(i, key, &f->object_key);
        }
        if (key == "event_type") {
          f->has_event_type_field = true;
          return ReadStrOrNil(i, key, &f->event_type);
        }
        if (key == "backend_id") {
          std::string_view unused;
          return ReadStrOrNil(i, key, &unused);
        }
        break;
      case 14:
        if (key == "base_block_idx") return CheckUintOrNil(i, key);
        break;
      default:
        break;
    }
    if (!reader_.Skip()) return ReadFailure(FieldName(i, key), "a msgpack value");
    return true;
  }

  bool AddMooncakeEvent(uint32_t i, const MapEventFields& f) {
    if (!ClaimFormat(i, WireFormat::kMooncake)) return false;
    // The message's event ids: known while every event carries one.
    if (i == 0) {
      out_->event_ids_known = f.has_event_id;
      out_->first_event_id = f.event_id;
    } else if (!f.has_event_id) {
      out_->event_ids_known = false;
    }
    out_->last_event_id = f.event_id;
    EventKind kind;
    const std::string_view type = f.event_type;
    if (type == "stored" || (type.empty() && f.type == "BlockStored")) {
      kind = EventKind::kStored;
    } else if (type == "removed" || (type.empty() && f.type == "BlockRemoved")) {
      kind = EventKind::kRemoved;
    } else if (type == "cleared" || (type.empty() && f.type == "AllBlocksCleared")) {
      kind = EventKind::kTenantCleared;  // the second generation's: every medium of the tenant is empty
    } else {
      // Unknown: whatever it did to the key, we no longer know the key is
      // there, and "not there" can only cost a miss. Without a key it may
      // have emptied anything of its tenant: the tenant is cleared.
      ++out_->unknown_event_types;
      if (f.object_key.empty()) {
        kind = EventKind::kTenantCleared;
        if (out_->unknown_keyless_type.empty()) out_->unknown_keyless_type = type.empty() ? f.type : type;
      } else {
        // Dropped on every medium: an event we cannot read says nothing
        // about the media it left the key on. Its medium is not passed on,
        // so that the per-medium rule does not keep the key because another
        // medium holds it (a removal without a medium drops the key).
        out_->events.push_back(Event{EventKind::kRemoved, f.object_key, f.group_id, f.tenant_id, {}});
        return true;
      }
    }
    out_->events.push_back(Event{kind, f.object_key, f.group_id, f.tenant_id, f.medium, f.generation});
    return true;
  }

  bool DecodeArrayEvent(uint32_t i) {
    uint32_t n = 0;
    if (!reader_.ReadArrayHeader(&n)) return ReadFailure(sci::StrFormat("event %d", i), "an array");
    if (n == 0) return Fail(sci::StrFormat("event %d is an empty array, expected a type tag first", i));
    std::string_view tag;
    if (!reader_.ReadStr(&tag)) return ReadFailure(sci::StrFormat("event %d type tag", i), "str");
    uint32_t consumed = 1;
    if (tag == "BlockStoreEvent" || tag == "BlockUpdateEvent") {
      if (!ClaimFormat(i, WireFormat::kMooncakeV1)) return false;
      if (n < 3) {
        return Fail(sci::StrFormat("event %d (%s) has %d elements, expected a key and replicas", i, tag, n));
      }
      if (!DecodeV1ObjectEvent(i)) return false;
      consumed = 3;
    } else if (tag == "RemoveAllEvent") {
      if (!ClaimFormat(i, WireFormat::kMooncakeV1)) return false;
      AddEvent(EventKind::kAllCleared);
    } else if (tag == "BlockStored" || tag == "BlockRemoved") {
      if (!ClaimFormat(i, WireFormat::kEngine)) return false;
      if (n >= 2) {
        if (!CheckBlockHashes(i)) return false;
        consumed = 2;
      }
      AddEvent(EventKind::kIgnored);
    } else if (tag == "AllBlocksCleared") {
      if (!ClaimFormat(i, WireFormat::kEngine)) return false;
      AddEvent(EventKind::kAllCleared);
    } else {
      AddEvent(EventKind::kIgnored);  // a tag from a newer publisher
    }
    for (; consumed < n; ++consumed) {
      if (!reader_.Skip()) return ReadFailure(sci::StrFormat("event %d element %d", i, consumed), "a msgpack value");
    }
    return true;
  }

  // [tag, mooncake_key, replicas, ...]: the tag is read, key and replicas
  // follow. The object is stored on its first replica's medium; with no
  // replica left it is gone.
  bool DecodeV1ObjectEvent(uint32_t i) {
    std::string_view key;
    if (!reader_.ReadStr(&key)) return ReadFailure(sci::StrFormat("event %d mooncake_key", i), "str");
    uint32_t replicas = 0;
    if (!reader_.ReadArrayHeader(&replicas)) return ReadFailure(sci::StrFormat("event %d replicas", i), "an array");
    std::string_view medium;
    for (uint32_t r = 0; r < replicas; ++r) {
      uint32_t parts = 0;
      if (!reader_.ReadArrayHeader(&parts)) {
        return ReadFailure(sci::StrFormat("event %d replica %d", i, r), "an array [type, location]");
      }
      if (parts == 0) {
        return Fail(sci::StrFormat("event %d replica %d is an empty array, expected [type, location]", i, r));
      }
      std::string_view replica_type;
      if (!reader_.ReadStr(&replica_type)) {
        return ReadFailure(sci::StrFormat("event %d replica %d type", i, r), "str");
      }
      if (r == 0) medium = replica_type;
      for (uint32_t p = 1; p < parts; ++p) {
        if (!reader_.Skip()) return ReadFailure(sci::StrFormat("event %d replica %d", i, r), "a msgpack value");
      }
    }
    out_->events.push_back(
        Event{replicas > 0 ? EventKind::kStored : EventKind::kRemoved, key, {}, kDefaultTenant, medium});
    return true;
  }

  // An engine event's block hashes: integers (u64 or int64) or byte strings.
  bool CheckBlockHashes(uint32_t i) {
    uint32_t hashes = 0;
    if (!reader_.ReadArrayHeader(&hashes)) return ReadFailure(sci::StrFormat("event %d block_hashes", i), "an array");
    for (uint32_t h = 0; h < hashes; ++h) {
      const MsgpackType type = reader_.PeekType();
      if (type != MsgpackType::kUint && type != MsgpackType::kInt && type != MsgpackType::kBin &&
          type != MsgpackType::kStr) {
        return Fail(sci::StrFormat("event %d block_hashes[%d] is %s, expected an integer or bytes", i, h,
                                    MsgpackTypeName(type)));
      }
      if (!reader_.Skip()) return ReadFailure(sci::StrFormat("event %d block_hashes[%d]", i, h), "a hash");
    }
    return true;
  }

  void AddEvent(EventKind kind) { out_->events.push_back(Event{kind, {}, {}, {}, {}}); }

  // ---------------------------------------------------------------- fields --

  bool ReadStrOrNil(uint32_t i, std::string_view key, std::string_view* value) {
    if (reader_.PeekType() == MsgpackType::kNil) {
      *value = {};
      return reader_.ReadNil();
    }
    if (!reader_.ReadStr(value)) return ReadFailure(FieldName(i, key), "str or nil");
    return true;
  }

  bool ReadEventId(uint32_t i, std::string_view key, MapEventFields* f) {
    if (reader_.PeekType() == MsgpackType::kNil) return reader_.ReadNil();
    if (!reader_.ReadUint64(&f->event_id)) return ReadFailure(FieldName(i, key), "uint or nil");
    // Both publishers number events from 1 (next_event_id_{1}): a 0 is no
    // publisher's number, and shows nothing about continuity.
    f->has_event_id = f->event_id != 0;
    return true;
  }

  bool CheckUintOrNil(uint32_t i, std::string_view key) {
    if (reader_.PeekType() == MsgpackType::kNil) return reader_.ReadNil();
    uint64_t unused = 0;
    if (!reader_.ReadUint64(&unused)) return ReadFailure(FieldName(i, key), "uint or nil");
    return true;
  }

  // Keys come from the wire: escaped and cut short, so the reason stays one
  // readable line.
  static std::string FieldName(uint32_t i, std::string_view key) {
    constexpr size_t kMaxShown = 64;
    std::string shown;
    for (unsigned char c : key.substr(0, kMaxShown)) {
      if (c >= 0x20 && c < 0x7f && c != '\\') {
        shown.push_back(static_cast<char>(c));
      } else {
        shown += sci::StrFormat("\\x%02x", c);
      }
    }
    if (key.size() > kMaxShown) shown += "...";
    return sci::StrFormat("event %d field %s", i, shown);
  }

  // ---------------------------------------------------------------- errors --

  bool Fail(std::string_view reason) {
    if (error_ != nullptr) *error_ = sci::StrFormat("frame 2 (payload): %s", reason);
    return false;
  }

  // The reader refused the value at its cursor: say what was there instead.
  bool ReadFailure(std::string_view what, std::string_view expected) {
    switch (reader_.error()) {
      case MsgpackError::kWrongType:
        return Fail(sci::StrFormat("%s is %s, expected %s", what, MsgpackTypeName(reader_.PeekType()), expected));
      case MsgpackError::kTruncated:
        return Fail(sci::StrFormat("%s is truncated at byte %d", what, reader_.offset()));
      default:
        return Fail(sci::StrFormat("%s at byte %d: %s", what, reader_.offset(), MsgpackErrorName(reader_.error())));
    }
  }

  MsgpackReader reader_;
  DecodedMessage* out_;
  std::string* error_;
  std::optional<WireFormat> format_;
  bool float_timestamp_ = false;
};

bool FailFrames(std::string* error, std::string reason) {
  if (error != nullptr) *error = std::move(reason);
  return false;
}

}  // namespace

std::string_view WireFormatName(WireFormat format) {
  switch (format) {
    case WireFormat::kMooncake: return "mooncake";
    case WireFormat::kMooncakeV1: return "mooncake-v1";
    case WireFormat::kEngine: return "engine";
  }
  return "unknown";
}

bool DecodeMessage(std::span<const std::span<const uint8_t>> frames, DecodedMessage* out, std::string* error) {
  out->events.clear();
  out->timestamp_ms = 0;
  out->has_dp_rank = false;
  out->dp_rank = 0;
  out->unknown_event_types = 0;
  out->unknown_keyless_type = {};
  out->event_ids_known = false;
  out->first_event_id = 0;
  out->last_event_id = 0;
  if (frames.size() != kFrameCount) {
    return FailFrames(error, sci::StrFormat("message has %d frames, expected 3 (topic, sequence, payload)",
                                             frames.size()));
  }
  if (frames[1].size() != kSequenceBytes) {
    return FailFrames(error, sci::StrFormat("frame 1 (sequence) has %d bytes, expected 8", frames[1].size()));
  }
  out->topic = std::string_view(reinterpret_cast<const char*>(frames[0].data()), frames[0].size());
  uint64_t sequence = 0;
  for (uint8_t byte : frames[1]) sequence = (sequence << 8) | byte;
  out->sequence = sequence;
  return PayloadDecoder(frames[2], out, error).Decode();
}

}  // namespace sci
