// The encoder writes the production Mooncake format byte for byte: every
// golden message, read back in full (ReadMooncakePayload) and re-encoded,
// gives back the captured bytes of all three frames. The reader agrees with
// the library's decoder on every event.
#include <gtest/gtest.h>

#include <msgpack.hpp>
#include <string>
#include <vector>

#include "golden_capture.h"
#include "encode/mooncake_encoder.h"
#include "encode/mooncake_payload_reader.h"
#include "wire/wire_decoder.h"

namespace sci {
namespace {

using sci_test::GoldenMessage;
using sci_test::LoadCapture;

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

class EncoderRoundTrip : public ::testing::TestWithParam<const char*> {};

TEST_P(EncoderRoundTrip, ReencodingEveryGoldenMessageReproducesAllThreeFrames) {
  const std::vector<GoldenMessage> messages = LoadCapture(GetParam());
  ASSERT_FALSE(messages.empty());
  DecodedMessage decoded;
  MooncakePayload full;
  for (const GoldenMessage& message : messages) {
    SCOPED_TRACE(message.name);
    const auto frames = message.FrameSpans();
    std::string error;
    ASSERT_TRUE(DecodeMessage(frames, &decoded, &error)) << error;
    ASSERT_TRUE(ReadMooncakePayload(frames[2], &full, &error)) << error;
    EXPECT_EQ(full.timestamp_ms, decoded.timestamp_ms);
    ASSERT_EQ(full.events.size(), decoded.events.size());
    for (size_t i = 0; i < full.events.size(); ++i) {
      EXPECT_EQ(full.events[i].stored, decoded.events[i].kind == EventKind::kStored);
      EXPECT_EQ(full.events[i].object_key, decoded.events[i].object_key);
      EXPECT_EQ(full.events[i].group_id, decoded.events[i].group_id);
      EXPECT_EQ(full.events[i].tenant_id, decoded.events[i].tenant_id);
      EXPECT_EQ(full.events[i].medium, decoded.events[i].medium);
    }

    EXPECT_EQ(std::string(decoded.topic), message.frames[0]);  // empty: the publisher sends no topic
    const std::array<uint8_t, 8> sequence = EncodeSequence(decoded.sequence);
    EXPECT_EQ(std::string(sequence.begin(), sequence.end()), message.frames[1]);
    std::string payload;
    EncodeMooncakePayload(full.timestamp_ms, full.events, &payload);
    EXPECT_EQ(payload, message.frames[2]);
  }
}

INSTANTIATE_TEST_SUITE_P(AllCaptures, EncoderRoundTrip, ::testing::ValuesIn(sci_test::kCaptures),
                         [](const ::testing::TestParamInfo<const char*>& info) { return sci_test::CaptureTestName(info.param); });

// The second-generation publisher's `cleared` (its object events have
// another field order, which the encoder does not write): the two captured
// ones, read back and re-encoded, and built from scratch, give back their
// bytes, and the library decodes them as a clear of their tenant alone.
TEST(MooncakeEncoder, ClearedIsWrittenByteForByteAsTheSecondGenerationPublisherWritesIt) {
  const std::vector<GoldenMessage> messages = LoadCapture("media-and-cleared");
  ASSERT_EQ(messages.size(), 13u);
  struct Case {
    size_t message;
    uint64_t event_id;
    const char* tenant;
  };
  for (const Case& c : {Case{9, 17, "tenant-a"}, Case{12, 20, "default"}}) {
    const GoldenMessage& message = messages[c.message];
    SCOPED_TRACE(message.name);
    const auto frames = message.FrameSpans();
    MooncakePayload full;
    std::string error;
    ASSERT_TRUE(ReadMooncakePayload(frames[2], &full, &error)) << error;
    ASSERT_EQ(full.events.size(), 1u);
    const MooncakeEvent& read = full.events[0];
    EXPECT_TRUE(read.cleared);
    EXPECT_FALSE(read.stored);
    EXPECT_EQ(read.event_id, c.event_id);
    EXPECT_EQ(read.tenant_id, c.tenant);
    EXPECT_EQ(read.object_key, "");
    EXPECT_EQ(read.medium, "");
    std::string payload;
    EncodeMooncakePayload(full.timestamp_ms, full.events, &payload);
    EXPECT_EQ(payload, message.frames[2]);

    MooncakeEvent built;
    built.cleared = true;
    built.event_id = c.event_id;
    built.tenant_id = c.tenant;
    built.model_name = "Qwen3-8B";
    built.block_size = 64;
    payload.clear();
    EncodeMooncakePayload(full.timestamp_ms, std::span(&built, 1), &payload);
    EXPECT_EQ(payload, message.frames[2]);

    DecodedMessage decoded;
    ASSERT_TRUE(DecodeMessage(frames, &decoded, &error)) << error;
    ASSERT_EQ(decoded.events.size(), 1u);
    EXPECT_EQ(decoded.events[0].kind, EventKind::kTenantCleared);
    EXPECT_EQ(decoded.events[0].tenant_id, c.tenant);
  }
}

// The second-generation publisher's object events too: every message of
// its capture, read back and re-encoded, gives back its bytes, except the
// vLLM connector's store (msg0008), whose connector fields
// (connector_block_hash, cache_prefix, tp_rank, ...) the encoder does not
// write; its fields the encoder does write read back as captured.
TEST(MooncakeEncoder, SecondGenerationMessagesReencodeByteForByte) {
  const std::vector<GoldenMessage> messages = LoadCapture("media-and-cleared");
  ASSERT_EQ(messages.size(), 13u);
  for (const GoldenMessage& message : messages) {
    SCOPED_TRACE(message.name);
    const auto frames = message.FrameSpans();
    MooncakePayload full;
    std::string error;
    ASSERT_TRUE(ReadMooncakePayload(frames[2], &full, &error)) << error;
    for (const MooncakeEvent& event : full.events) {
      EXPECT_TRUE(event.second_generation);
      EXPECT_EQ(event.model_name, "Qwen3-8B");
      EXPECT_EQ(event.block_size, 64u);
    }
    if (message.name == "msg0008") {
      ASSERT_EQ(full.events.size(), 1u);
      EXPECT_EQ(full.events[0].group_id, "0");
      EXPECT_EQ(full.events[0].tenant_id, "tenant-a");
      EXPECT_EQ(full.events[0].medium, "cpu");
      continue;
    }
    std::string payload;
    EncodeMooncakePayload(full.timestamp_ms, full.events, &payload);
    EXPECT_EQ(payload, message.frames[2]);
  }
}

TEST(MooncakeEncoder, FullReadingRecoversTheFieldsTheIndexDoesNotNeed) {
  const std::vector<GoldenMessage> basic = LoadCapture("basic");
  ASSERT_EQ(basic.size(), 5u);
  MooncakePayload full;
  const auto frames = basic[2].FrameSpans();
  ASSERT_TRUE(ReadMooncakePayload(frames[2], &full, nullptr));
  ASSERT_EQ(full.events.size(), 1u);
  const MooncakeEvent& e = full.events[0];
  EXPECT_EQ(e.event_id, 3u);
  EXPECT_TRUE(e.stored);
  EXPECT_EQ(e.object_key, "12345");
  EXPECT_EQ(e.group_id, "");
  EXPECT_EQ(e.tenant_id, "tenant-a");
  EXPECT_EQ(e.medium, "disk");
  EXPECT_EQ(e.backend_id, "mooncake-master-0");
  EXPECT_EQ(e.base_block_idx, 0u);
  EXPECT_EQ(full.timestamp_ms, 1796008706444);
}

TEST(MooncakeEncoder, FullReadingRefusesWhatIsNotAProductionPayload) {
  MooncakePayload full;
  std::string error;
  const uint8_t not_an_array[] = {0xc0};
  EXPECT_FALSE(ReadMooncakePayload(not_an_array, &full, &error));
  EXPECT_NE(error.find("not an array"), std::string::npos) << error;
  const uint8_t array_event[] = {0x92, 0x01, 0x91, 0x91, 0xa1, 'x'};  // [1, [["x"]]]: a v1-style array event
  EXPECT_FALSE(ReadMooncakePayload(array_event, &full, &error));
  EXPECT_NE(error.find("event 0"), std::string::npos) << error;
  const uint8_t trailing[] = {0x92, 0x01, 0x90, 0xc0};  // [1, []] then a stray nil
  EXPECT_FALSE(ReadMooncakePayload(trailing, &full, &error));
  EXPECT_NE(error.find("trailing"), std::string::npos) << error;
}

TEST(MooncakeEncoder, AppendsToWhatIsAlreadyInTheBuffer) {
  std::string out = "prefix";
  MooncakeEvent event;
  event.object_key = "k";
  EncodeMooncakePayload(1, std::span<const MooncakeEvent>(&event, 1), &out);
  EXPECT_EQ(out.substr(0, 6), "prefix");
  std::string alone;
  EncodeMooncakePayload(1, std::span<const MooncakeEvent>(&event, 1), &alone);
  EXPECT_EQ(out.substr(6), alone);
}

TEST(MooncakeEncoder, SequenceFrameIsBigEndian) {
  const std::array<uint8_t, 8> frame = EncodeSequence(0x0102030405060708u);
  EXPECT_EQ(frame, (std::array<uint8_t, 8>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(EncodeSequence(0), (std::array<uint8_t, 8>{}));
}

TEST(MooncakeEncoder, ObjectKeyNumberReadsWholeDecimalOrHexU64Only) {
  EXPECT_EQ(ObjectKeyNumber("12345"), 12345u);
  EXPECT_EQ(ObjectKeyNumber("0"), 0u);
  EXPECT_EQ(ObjectKeyNumber("0x2a"), 42u);
  EXPECT_EQ(ObjectKeyNumber("0X2A"), 42u);
  EXPECT_EQ(ObjectKeyNumber("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(ObjectKeyNumber("0xffffffffffffffff"), UINT64_MAX);
  EXPECT_EQ(ObjectKeyNumber("18446744073709551616"), std::nullopt);  // overflow
  EXPECT_EQ(ObjectKeyNumber("0x10000000000000000"), std::nullopt);
  EXPECT_EQ(ObjectKeyNumber(""), std::nullopt);
  EXPECT_EQ(ObjectKeyNumber("0x"), std::nullopt);
  EXPECT_EQ(ObjectKeyNumber("-1"), std::nullopt);
  EXPECT_EQ(ObjectKeyNumber("+1"), std::nullopt);
  EXPECT_EQ(ObjectKeyNumber(" 1"), std::nullopt);
  EXPECT_EQ(ObjectKeyNumber("12a"), std::nullopt);
  EXPECT_EQ(ObjectKeyNumber("key-1_0_k"), std::nullopt);
}

// Reads back what the encoder wrote with msgpack-cxx's own (trusted-input)
// unpacker: an independent check of shapes, order and integer types.
msgpack::object_handle Unpack(const std::string& payload) { return msgpack::unpack(payload.data(), payload.size()); }

std::vector<std::string> KeysOf(const msgpack::object& map) {
  std::vector<std::string> keys;
  for (uint32_t i = 0; i < map.via.map.size; ++i) keys.push_back(map.via.map.ptr[i].key.as<std::string>());
  return keys;
}

const msgpack::object& Field(const msgpack::object& map, std::string_view name) {
  for (uint32_t i = 0; i < map.via.map.size; ++i) {
    if (map.via.map.ptr[i].key.as<std::string>() == name) return map.via.map.ptr[i].val;
  }
  ADD_FAILURE() << "no field " << name;
  static const msgpack::object nil;
  return nil;
}

TEST(MooncakeEncoder, StoredAndRemovedEventsHaveThePublishersFieldsInItsOrder) {
  std::vector<MooncakeEvent> events(2);
  events[0].event_id = 7;
  events[0].object_key = "a";
  events[0].group_id = "g";
  events[0].medium = "cpu";
  events[0].base_block_idx = 3;
  events[1].event_id = 8;
  events[1].stored = false;
  events[1].object_key = "a";
  std::string payload;
  EncodeMooncakePayload(1796008706344, events, &payload);

  msgpack::object_handle handle = Unpack(payload);
  const msgpack::object& root = handle.get();
  ASSERT_EQ(root.type, msgpack::type::ARRAY);
  ASSERT_EQ(root.via.array.size, 3u);
  EXPECT_EQ(root.via.array.ptr[0].as<int64_t>(), 1796008706344);
  EXPECT_EQ(root.via.array.ptr[2].as<uint32_t>(), 0u);
  const msgpack::object& list = root.via.array.ptr[1];
  ASSERT_EQ(list.via.array.size, 2u);

  const std::vector<std::string> removed_fields = {
      "event_id",  "timestamp",  "event_type", "type",    "model_name", "block_size",
      "additional_salt", "lora_name", "tenant_id", "backend_id", "group_id", "medium",
      "dp_rank",   "object_key", "seq_hashes", "block_hashes", "base_block_idx"};
  std::vector<std::string> stored_fields = removed_fields;
  stored_fields.insert(stored_fields.end(), {"parent_hash", "token_ids", "parent_block_hash"});
  const msgpack::object& stored = list.via.array.ptr[0];
  const msgpack::object& removed = list.via.array.ptr[1];
  EXPECT_EQ(KeysOf(stored), stored_fields);
  EXPECT_EQ(KeysOf(removed), removed_fields);

  EXPECT_EQ(Field(stored, "event_type").as<std::string>(), "stored");
  EXPECT_EQ(Field(stored, "type").as<std::string>(), "BlockStored");
  EXPECT_EQ(Field(stored, "base_block_idx").as<uint64_t>(), 3u);
  EXPECT_EQ(Field(stored, "group_id").as<std::string>(), "g");
  EXPECT_EQ(Field(removed, "event_type").as<std::string>(), "removed");
  EXPECT_EQ(Field(removed, "type").as<std::string>(), "BlockRemoved");
  EXPECT_TRUE(Field(removed, "base_block_idx").is_nil());
  EXPECT_TRUE(Field(removed, "group_id").is_nil());  // empty => nil
  EXPECT_TRUE(Field(removed, "medium").is_nil());
  EXPECT_EQ(Field(removed, "tenant_id").as<std::string>(), "default");
  EXPECT_EQ(Field(removed, "backend_id").as<std::string>(), "mooncake-master-0");
  EXPECT_EQ(Field(stored, "seq_hashes").via.array.size, 0u);  // "a" is not a number
}

TEST(MooncakeEncoder, NumericKeysAboveTwoToThe63AppearNegativeInBlockHashes) {
  MooncakeEvent event;
  event.object_key = "0xfffffffffffffffe";
  std::string payload;
  EncodeMooncakePayload(5, std::span<const MooncakeEvent>(&event, 1), &payload);
  msgpack::object_handle handle = Unpack(payload);
  const msgpack::object& map = handle.get().via.array.ptr[1].via.array.ptr[0];
  const msgpack::object& seq = Field(map, "seq_hashes");
  const msgpack::object& block = Field(map, "block_hashes");
  ASSERT_EQ(seq.via.array.size, 1u);
  ASSERT_EQ(block.via.array.size, 1u);
  EXPECT_EQ(seq.via.array.ptr[0].type, msgpack::type::POSITIVE_INTEGER);
  EXPECT_EQ(seq.via.array.ptr[0].as<uint64_t>(), 0xfffffffffffffffeu);
  EXPECT_EQ(block.via.array.ptr[0].type, msgpack::type::NEGATIVE_INTEGER);
  EXPECT_EQ(block.via.array.ptr[0].as<int64_t>(), -2);
}

TEST(MooncakeEncoder, LongKeysAndFullBatchesUseTheWiderEncodingsAndDecodeBack) {
  const std::string long_key(300, 'k');    // str16
  const std::string medium_key(40, 'm');   // str8
  std::vector<std::string> keys;
  for (int i = 0; i < 64; ++i) keys.push_back(i % 2 ? long_key + std::to_string(i) : medium_key + std::to_string(i));
  std::vector<MooncakeEvent> events(64);  // array16
  for (size_t i = 0; i < events.size(); ++i) {
    events[i].event_id = 100000 + i;  // uint32
    events[i].object_key = keys[i];
    events[i].stored = i % 3 != 0;
    events[i].group_id = i % 5 ? "sglang-hicache:x" : "";
  }
  std::string payload;
  EncodeMooncakePayload(-1, events, &payload);  // a negative timestamp still round-trips
  const std::array<uint8_t, 8> sequence = EncodeSequence(9);
  const std::array<std::span<const uint8_t>, 3> frames = {std::span<const uint8_t>(), sequence, Bytes(payload)};
  DecodedMessage decoded;
  std::string error;
  ASSERT_TRUE(DecodeMessage(frames, &decoded, &error)) << error;
  MooncakePayload full;
  ASSERT_TRUE(ReadMooncakePayload(frames[2], &full, &error)) << error;
  EXPECT_EQ(decoded.timestamp_ms, -1);
  ASSERT_EQ(full.events.size(), 64u);
  ASSERT_EQ(decoded.events.size(), 64u);
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(decoded.events[i].kind, events[i].stored ? EventKind::kStored : EventKind::kRemoved);
    EXPECT_EQ(decoded.events[i].object_key, keys[i]);
    EXPECT_EQ(decoded.events[i].group_id, events[i].group_id);
    EXPECT_EQ(full.events[i].event_id, events[i].event_id);
  }
  std::string again;
  EncodeMooncakePayload(full.timestamp_ms, full.events, &again);
  EXPECT_EQ(again, payload);
}

}  // namespace
}  // namespace sci
