#include "encode/mooncake_encoder.h"

#include <charconv>
#include <stdexcept>

#include <msgpack.hpp>

namespace sci {
namespace {

// msgpack-cxx's packer writes through any type with write(const char*, size_t).
struct StringSink {
  std::string* out;
  void write(const char* data, size_t size) { out->append(data, size); }
};

using Packer = msgpack::packer<StringSink>;

uint32_t CheckedLength(size_t size) {
  if (size > UINT32_MAX) throw std::length_error("msgpack string or array longer than 2^32-1");
  return static_cast<uint32_t>(size);
}

void PackStr(Packer& packer, std::string_view s) {
  const uint32_t length = CheckedLength(s.size());
  packer.pack_str(length);
  packer.pack_str_body(s.data(), length);
}

void PackStrOrNil(Packer& packer, std::string_view s) {
  if (s.empty()) {
    packer.pack_nil();
  } else {
    PackStr(packer, s);
  }
}

// The publisher writes timestamps as fixed-width 8-byte integers (0xcf in
// every capture), not in the shortest encoding.
void PackTimestamp(Packer& packer, int64_t timestamp_ms) {
  if (timestamp_ms >= 0) {
    packer.pack_fix_uint64(static_cast<uint64_t>(timestamp_ms));
  } else {
    packer.pack_fix_int64(timestamp_ms);
  }
}

// The fields every event kind begins with, in the publisher's order.
void PackHead(Packer& packer, int64_t timestamp_ms, const MooncakeEvent& event, std::string_view event_type,
              std::string_view type) {
  PackStr(packer, "event_id");
  if (event.event_id_nil) {
    packer.pack_nil();
  } else {
    packer.pack_uint64(event.event_id);
  }
  PackStr(packer, "timestamp");
  PackTimestamp(packer, timestamp_ms);
  PackStr(packer, "event_type");
  PackStr(packer, event_type);
  PackStr(packer, "type");
  PackStr(packer, type);
  PackStr(packer, "model_name");
  PackStrOrNil(packer, event.model_name);
  PackStr(packer, "block_size");
  if (event.block_size == 0) {
    packer.pack_nil();
  } else {
    packer.pack_uint64(event.block_size);
  }
  for (std::string_view unknown_to_the_pool : {"additional_salt", "lora_name"}) {
    PackStr(packer, unknown_to_the_pool);
    packer.pack_nil();
  }
  PackStr(packer, "tenant_id");
  PackStr(packer, event.tenant_id);
  PackStr(packer, "backend_id");
  PackStr(packer, event.backend_id);
}

// msg0009 and msg0012 of testdata/mooncake-publisher/media-and-cleared: no
// object fields at all, medium nil and dp_rank 0 (not nil, unlike the
// object events of the first-generation captures).
void PackCleared(Packer& packer, int64_t timestamp_ms, const MooncakeEvent& event) {
  packer.pack_map(12);
  PackHead(packer, timestamp_ms, event, "cleared", "AllBlocksCleared");
  PackStr(packer, "medium");
  packer.pack_nil();
  PackStr(packer, "dp_rank");
  packer.pack_uint64(0);
}

void PackEvent(Packer& packer, int64_t timestamp_ms, const MooncakeEvent& event) {
  if (event.cleared) return PackCleared(packer, timestamp_ms, event);
  const bool stored = event.stored && event.unknown_type.empty();  // an unknown type has a removal's shape
  // Stored events carry three trailing nil fields that removals omit.
  packer.pack_map(stored ? 20 : 17);
  if (!event.unknown_type.empty()) {
    PackHead(packer, timestamp_ms, event, event.unknown_type, event.unknown_type);
  } else {
    PackHead(packer, timestamp_ms, event, stored ? "stored" : "removed",
             stored ? "BlockStored" : "BlockRemoved");
  }
  if (event.second_generation) {
    // testdata/mooncake-publisher/media-and-cleared: the medium first, a
    // dp_rank of 0, then the group.
    PackStr(packer, "medium");
    PackStrOrNil(packer, event.medium);
    PackStr(packer, "dp_rank");
    packer.pack_uint64(0);
    PackStr(packer, "group_id");
    PackStrOrNil(packer, event.group_id);
  } else {
    PackStr(packer, "group_id");
    PackStrOrNil(packer, event.group_id);
    PackStr(packer, "medium");
    PackStrOrNil(packer, event.medium);
    PackStr(packer, "dp_rank");
    packer.pack_nil();
  }
  PackStr(packer, "object_key");
  PackStr(packer, event.object_key);

  const std::optional<uint64_t> number = ObjectKeyNumber(event.object_key);
  PackStr(packer, "seq_hashes");
  packer.pack_array(number ? 1 : 0);
  if (number) packer.pack_uint64(*number);
  // The legacy alias holds the same values as int64: >= 2^63 turns negative.
  PackStr(packer, "block_hashes");
  packer.pack_array(number ? 1 : 0);
  if (number) packer.pack_int64(static_cast<int64_t>(*number));

  PackStr(packer, "base_block_idx");
  if (stored && !event.second_generation) {
    packer.pack_uint64(event.base_block_idx);
  } else {
    packer.pack_nil();  // the second generation sends none, even when storing
  }
  if (stored) {
    for (std::string_view stored_only : {"parent_hash", "token_ids", "parent_block_hash"}) {
      PackStr(packer, stored_only);
      packer.pack_nil();
    }
  }
}

}  // namespace

void EncodeMooncakePayload(int64_t timestamp_ms, std::span<const MooncakeEvent> events, std::string* out) {
  // About 450 bytes per event with SGLang-length keys: one growth step at most.
  out->reserve(out->size() + 16 + events.size() * 480);
  StringSink sink{out};
  Packer packer(sink);
  packer.pack_array(3);
  PackTimestamp(packer, timestamp_ms);
  packer.pack_array(CheckedLength(events.size()));
  for (const MooncakeEvent& event : events) PackEvent(packer, timestamp_ms, event);
  packer.pack_uint64(0);  // dp_rank: always 0 from the storage pool
}

std::array<uint8_t, 8> EncodeSequence(uint64_t sequence) {
  std::array<uint8_t, 8> frame{};
  for (size_t i = 0; i < frame.size(); ++i) frame[i] = static_cast<uint8_t>(sequence >> (56 - 8 * i));
  return frame;
}

std::optional<uint64_t> ObjectKeyNumber(std::string_view object_key) {
  int base = 10;
  std::string_view digits = object_key;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    base = 16;
    digits.remove_prefix(2);
  }
  if (digits.empty()) return std::nullopt;
  // from_chars takes no '-' for an unsigned type, no '+', no spaces and no
  // prefix: exactly the digits we allow, and it reports overflow.
  uint64_t value = 0;
  const char* end = digits.data() + digits.size();
  const auto [ptr, ec] = std::from_chars(digits.data(), end, value, base);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace sci
