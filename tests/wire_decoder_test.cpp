// Each wire format of docs/wire-formats.md, encoded in the test with msgpack-cxx's
// packer exactly as the documents describe, and each category of malformed
// message. Then ApplyMessage: malformed messages are counted, logged and
// change nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <msgpack.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "index/index.h"
#include "common/log.h"
#include "wire/message_apply.h"
#include "encode/mooncake_encoder.h"
#include "wire/wire_decoder.h"
#include "log_capture.h"

namespace sci {
namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

// One message under construction: the test packs the payload, the builder
// keeps the frames alive. Buffer and packer live on the heap so a Message
// can be returned by value (msgpack's packer holds a reference and cannot
// move).
struct Message {
  explicit Message(uint64_t seq = 1, std::string topic_frame = "")
      : topic(std::move(topic_frame)),
        sequence_frame(EncodeSequence(seq)),
        buffer(std::make_unique<msgpack::sbuffer>()),
        packer(std::make_unique<Packer>(*buffer)),
        pack(*packer) {}
  std::array<std::span<const uint8_t>, 3> Frames() const {
    return {std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(topic.data()), topic.size()),
            std::span<const uint8_t>(sequence_frame),
            std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(buffer->data()), buffer->size())};
  }
  void Write(const std::string& bytes) { buffer->write(bytes.data(), bytes.size()); }

  std::string topic;
  std::array<uint8_t, 8> sequence_frame;
  std::unique_ptr<msgpack::sbuffer> buffer;
  std::unique_ptr<Packer> packer;
  Packer& pack;
};

void Str(Packer& p, std::string_view s) {
  p.pack_str(static_cast<uint32_t>(s.size()));
  p.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

void Bin(Packer& p, std::string_view s) {
  p.pack_bin(static_cast<uint32_t>(s.size()));
  p.pack_bin_body(s.data(), static_cast<uint32_t>(s.size()));
}

struct Decoded {
  bool ok = false;
  std::string error;
  DecodedMessage message;
};

Decoded Decode(const Message& m) {
  Decoded d;
  const auto frames = m.Frames();
  d.ok = DecodeMessage(frames, &d.message, &d.error);
  return d;
}

Decoded DecodePayloadBytes(const std::string& payload, uint64_t sequence = 1) {
  Message m(sequence);
  m.Write(payload);
  return Decode(m);
}

// ---------------------------------------------------- production Mooncake --

TEST(ProductionFormat, DecodesWhatThePublisherEncodes) {
  MooncakeEvent stored;
  stored.object_key = "page_0_k";
  stored.group_id = "sglang-hicache:page";
  stored.medium = "cpu";
  MooncakeEvent removed = stored;
  removed.stored = false;
  removed.tenant_id = "tenant-a";
  removed.medium = "";
  removed.group_id = "";
  const std::vector<MooncakeEvent> events = {stored, removed};
  Message m(42);
  std::string payload;
  EncodeMooncakePayload(1700000000123, events, &payload);
  m.Write(payload);

  const Decoded d = Decode(m);
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.message.format, WireFormat::kMooncake);
  EXPECT_EQ(d.message.sequence, 42u);
  EXPECT_EQ(d.message.topic, "");
  EXPECT_EQ(d.message.timestamp_ms, 1700000000123);
  ASSERT_EQ(d.message.events.size(), 2u);
  EXPECT_EQ(d.message.events[0].kind, EventKind::kStored);
  EXPECT_EQ(d.message.events[0].object_key, "page_0_k");
  EXPECT_EQ(d.message.events[0].group_id, "sglang-hicache:page");
  EXPECT_EQ(d.message.events[0].tenant_id, "default");
  EXPECT_EQ(d.message.events[0].medium, "cpu");
  EXPECT_EQ(d.message.events[1].kind, EventKind::kRemoved);
  EXPECT_EQ(d.message.events[1].tenant_id, "tenant-a");
  EXPECT_EQ(d.message.events[1].group_id, "");
  EXPECT_EQ(d.message.events[1].medium, "");
}

TEST(ProductionFormat, EventStringsAreViewsIntoThePayloadFrame) {
  MooncakeEvent event;
  event.object_key = "k";
  Message m;
  std::string payload;
  EncodeMooncakePayload(1, std::span<const MooncakeEvent>(&event, 1), &payload);
  m.Write(payload);
  const auto frames = m.Frames();
  DecodedMessage decoded;
  ASSERT_TRUE(DecodeMessage(frames, &decoded, nullptr));
  const char* begin = reinterpret_cast<const char*>(frames[2].data());
  EXPECT_GE(decoded.events[0].object_key.data(), begin);
  EXPECT_LT(decoded.events[0].object_key.data(), begin + frames[2].size());
}

TEST(ProductionFormat, FieldsAreReadByNameInAnyOrderAmongUnknownFields) {
  Message m;
  m.pack.pack_array(3);
  m.pack.pack_int64(1000);
  m.pack.pack_array(1);
  m.pack.pack_map(8);
  Str(m.pack, "future_field");  // unknown, nested: skipped
  m.pack.pack_map(1);
  Str(m.pack, "x");
  m.pack.pack_array(2);
  m.pack.pack_nil();
  m.pack.pack_double(1.5);
  Str(m.pack, "object_key");
  Str(m.pack, "obj");
  Str(m.pack, "medium");
  Str(m.pack, "disk");
  Str(m.pack, "seq_hashes");
  m.pack.pack_array(0);
  Str(m.pack, "group_id");
  Str(m.pack, "grp");
  Str(m.pack, "tenant_id");
  Str(m.pack, "t1");
  Str(m.pack, "event_type");
  Str(m.pack, "stored");
  Str(m.pack, "blob");
  Bin(m.pack, "\x01\x02");
  m.pack.pack_uint32(0);

  const Decoded d = Decode(m);
  ASSERT_TRUE(d.ok) << d.error;
  ASSERT_EQ(d.message.events.size(), 1u);
  const Event& e = d.message.events[0];
  EXPECT_EQ(e.kind, EventKind::kStored);
  EXPECT_EQ(e.object_key, "obj");
  EXPECT_EQ(e.group_id, "grp");
  EXPECT_EQ(e.tenant_id, "t1");
  EXPECT_EQ(e.medium, "disk");
}

TEST(ProductionFormat, AbsentAndNilOptionalFieldsAreTolerated) {
  Message m;
  m.pack.pack_array(3);
  m.pack.pack_fix_uint64(5);
  m.pack.pack_array(2);
  // Only the two fields that matter.
  m.pack.pack_map(2);
  Str(m.pack, "event_type");
  Str(m.pack, "stored");
  Str(m.pack, "object_key");
  Str(m.pack, "a");
  // Every optional field nil.
  m.pack.pack_map(9);
  Str(m.pack, "event_type");
  Str(m.pack, "removed");
  Str(m.pack, "object_key");
  Str(m.pack, "b");
  for (const char* field : {"group_id", "tenant_id", "medium", "backend_id", "event_id", "timestamp",
                            "base_block_idx"}) {
    Str(m.pack, field);
    m.pack.pack_nil();
  }
  m.pack.pack_nil();  // dp_rank nil

  const Decoded d = Decode(m);
  ASSERT_TRUE(d.ok) << d.error;
  ASSERT_EQ(d.message.events.size(), 2u);
  EXPECT_EQ(d.message.events[0].kind, EventKind::kStored);
  EXPECT_EQ(d.message.events[0].tenant_id, "");  // empty means "default" to the index
  EXPECT_EQ(d.message.events[1].kind, EventKind::kRemoved);
  EXPECT_EQ(d.message.events[1].group_id, "");
  EXPECT_FALSE(d.message.has_dp_rank);
}

TEST(ProductionFormat, AnEventWithoutObjectKeyDecodesAndTheIndexIgnoresIt) {
  Message m;
  m.pack.pack_array(3);
  m.pack.pack_int64(1);
  m.pack.pack_array(1);
  m.pack.pack_map(2);
  Str(m.pack, "event_type");
  Str(m.pack, "stored");
  Str(m.pack, "group_id");
  Str(m.pack, "g");
  m.pack.pack_uint8(0);
  const auto frames = m.Frames();

  Index index;
  DecodedMessage scratch;
  std::string error;
  ASSERT_TRUE(ApplyMessage(index, frames, scratch, &error)) << error;
  EXPECT_EQ(index.GetStats().ignored_events, 1u);
  EXPECT_EQ(index.GetStats().keys, 0u);
  EXPECT_EQ(index.GetStats().malformed_messages, 0u);
}

// Builds [ts, [{event_type?, type?, object_key, group_id?}], 0].
Message OneMapEvent(std::string_view event_type, std::string_view legacy_type, std::string_view key,
                    std::string_view group = {}, uint64_t sequence = 1) {
  Message m(sequence);
  m.pack.pack_array(3);
  m.pack.pack_int64(1);
  m.pack.pack_array(1);
  m.pack.pack_map(1 + !event_type.empty() + !legacy_type.empty() + !group.empty());
  if (!event_type.empty()) {
    Str(m.pack, "event_type");
    Str(m.pack, event_type);
  }
  if (!legacy_type.empty()) {
    Str(m.pack, "type");
    Str(m.pack, legacy_type);
  }
  Str(m.pack, "object_key");
  Str(m.pack, key);
  if (!group.empty()) {
    Str(m.pack, "group_id");
    Str(m.pack, group);
  }
  m.pack.pack_uint8(0);
  return m;
}

TEST(ProductionFormat, LegacyTypeDecidesOnlyWhenEventTypeIsAbsent) {
  Decoded d = Decode(OneMapEvent("", "BlockStored", "k"));
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.message.events[0].kind, EventKind::kStored);
  d = Decode(OneMapEvent("", "BlockRemoved", "k"));
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.message.events[0].kind, EventKind::kRemoved);
  d = Decode(OneMapEvent("removed", "BlockStored", "k"));  // event_type wins
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.message.events[0].kind, EventKind::kRemoved);
  EXPECT_EQ(d.message.format, WireFormat::kMooncake);
}

TEST(ProductionFormat, UnknownEventTypeIsNotMalformedAndDropsItsKey) {
  Index index;
  DecodedMessage scratch;
  std::string error;
  Message store = OneMapEvent("stored", "", "k", "g", 1);
  ASSERT_TRUE(ApplyMessage(index, store.Frames(), scratch, &error)) << error;
  ASSERT_TRUE(index.Contains("", "k"));

  Message unknown = OneMapEvent("evicted", "", "k", "g", 2);
  const Decoded d = Decode(unknown);
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.message.unknown_event_types, 1u);
  EXPECT_EQ(d.message.events[0].kind, EventKind::kRemoved);

  ASSERT_TRUE(ApplyMessage(index, unknown.Frames(), scratch, &error)) << error;
  const Stats stats = index.GetStats();
  EXPECT_FALSE(index.Contains("", "k"));  // unknown fate: a miss, never a stale hit
  EXPECT_EQ(stats.groups, 0u);
  EXPECT_EQ(stats.ignored_events, 1u);
  EXPECT_EQ(stats.malformed_messages, 0u);
  EXPECT_EQ(stats.last_sequence, 2u);
}

// It may have emptied anything of its tenant (index-semantics.md): a clear of
// the tenant, the only safe reading.
TEST(ProductionFormat, UnknownEventTypeWithoutAKeyClearsItsTenant) {
  Message m;
  m.pack.pack_array(3);
  m.pack.pack_int64(1);
  m.pack.pack_array(1);
  m.pack.pack_map(1);
  Str(m.pack, "event_type");
  Str(m.pack, "heartbeat");
  m.pack.pack_uint8(0);
  const Decoded d = Decode(m);
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.message.events[0].kind, EventKind::kTenantCleared);
  EXPECT_EQ(d.message.events[0].tenant_id, "");
  EXPECT_EQ(d.message.unknown_event_types, 1u);
  EXPECT_EQ(d.message.unknown_keyless_type, "heartbeat");
}

TEST(ProductionFormat, NegativeBlockHashesAndHugeSeqHashesAreAccepted) {
  Message m;
  m.pack.pack_array(3);
  m.pack.pack_int64(1);
  m.pack.pack_array(1);
  m.pack.pack_map(4);
  Str(m.pack, "event_type");
  Str(m.pack, "stored");
  Str(m.pack, "object_key");
  Str(m.pack, "18446744073709551614");
  Str(m.pack, "seq_hashes");
  m.pack.pack_array(1);
  m.pack.pack_uint64(18446744073709551614u);
  Str(m.pack, "block_hashes");
  m.pack.pack_array(1);
  m.pack.pack_int64(-2);
  m.pack.pack_uint8(0);
  const Decoded d = Decode(m);
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.message.events[0].object_key, "18446744073709551614");
}

TEST(ProductionFormat, AnyTopicAndAppendedPayloadElementsAreAccepted) {
  Message m(1, "some-topic");
  m.pack.pack_array(4);
  m.pack.pack_int64(1);
  m.pack.pack_array(0);
  m.pack.pack_uint8(3);
  m.pack.pack_map(1);  // an epoch, one day
  Str(m.pack, "epoch");
  m.pack.pack_uint64(9);
  const Decoded d = Decode(m);
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.message.topic, "some-topic");
  EXPECT_EQ(d.message.dp_rank, 3u);
  EXPECT_TRUE(d.message.events.empty());
  EXPECT_EQ(d.message.format, WireFormat::kMooncake);
}

TEST(ProductionFormat, ScratchIsReusedWithoutKeepingOldEvents) {
  DecodedMessage scratch;
  Message two = OneMapEvent("stored", "", "a");
  ASSERT_TRUE(DecodeMessage(two.Frames(), &scratch, nullptr));
  Message empty;
  empty.pack.pack_array(3);
  empty.pack.pack_int64(1);
  empty.pack.pack_array(0);
  empty.pack.pack_uint8(0);
  const size_t capacity = scratch.events.capacity();
  ASSERT_TRUE(DecodeMessage(empty.Frames(), &scratch, nullptr));
  EXPECT_TRUE(scratch.events.empty());
  EXPECT_EQ(scratch.events.capacity(), capacity);
}

// ------------------------------------------------------- Mooncake v1 arrays --

void PackReplicas(Packer& p, std::vector<std::pair<std::string, std::string>> replicas) {
  p.pack_array(static_cast<uint32_t>(replicas.size()));
  for (const auto& [type, location] : replicas) {
    p.pack_array(2);
    Str(p, type);
    Str(p, location);
  }
}

void PackV1Store(Packer& p, std::string_view key, std::vector<std::pair<std::string, std::string>> replicas) {
  p.pack_array(8);
  Str(p, "BlockStoreEvent");
  Str(p, key);
  PackReplicas(p, std::move(replicas));
  Str(p, "");  // model_name: unset
  p.pack_uint32(0);
  Str(p, "");
  Str(p, "");
  p.pack_array(2);
  p.pack_uint32(11);
  p.pack_uint32(12);
}

void PackV1Update(Packer& p, std::string_view key, std::vector<std::pair<std::string, std::string>> replicas) {
  p.pack_array(3);
  Str(p, "BlockUpdateEvent");
  Str(p, key);
  PackReplicas(p, std::move(replicas));
}

TEST(MooncakeV1Format, StoreUpdateAndRemoveAllDecode) {
  Message m(7, "mooncake");
  m.pack.pack_array(2);
  m.pack.pack_double(1700000000.25);
  m.pack.pack_array(5);
  PackV1Store(m.pack, "k1", {{"memory", "node-a:1"}, {"disk", "/data/k1"}});
  PackV1Update(m.pack, "k1", {{"disk", "/data/k1"}});
  PackV1Update(m.pack, "k2", {});
  PackV1Store(m.pack, "k3", {});
  m.pack.pack_array(1);
  Str(m.pack, "RemoveAllEvent");

  const Decoded d = Decode(m);
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.message.format, WireFormat::kMooncakeV1);
  EXPECT_EQ(d.message.topic, "mooncake");
  EXPECT_EQ(d.message.timestamp_ms, 1700000000250);
  EXPECT_FALSE(d.message.has_dp_rank);
  const std::vector<Event>& e = d.message.events;
  ASSERT_EQ(e.size(), 5u);
  EXPECT_EQ(e[0].kind, EventKind::kStored);
  EXPECT_EQ(e[0].object_key, "k1");
  EXPECT_EQ(e[0].medium, "memory");  // first replica
  EXPECT_EQ(e[0].tenant_id, "default");
  EXPECT_EQ(e[0].group_id, "");
  EXPECT_EQ(e[1].kind, EventKind::kStored);  // still has a replica
  EXPECT_EQ(e[1].medium, "disk");
  EXPECT_EQ(e[2].kind, EventKind::kRemoved);  // no replica left
  EXPECT_EQ(e[2].object_key, "k2");
  EXPECT_EQ(e[3].kind, EventKind::kRemoved);  // stored nowhere
  EXPECT_EQ(e[4].kind, EventKind::kAllCleared);
}

TEST(MooncakeV1Format, ApplyingStoreUpdateAndRemoveAll) {
  Index index;
  DecodedMessage scratch;
  std::string error;
  Message first(1, "mooncake");
  first.pack.pack_array(2);
  first.pack.pack_double(1.0);
  first.pack.pack_array(3);
  PackV1Store(first.pack, "a", {{"memory", "n"}});
  PackV1Store(first.pack, "b", {{"local_disk", "n"}});
  PackV1Update(first.pack, "a", {});
  ASSERT_TRUE(ApplyMessage(index, first.Frames(), scratch, &error)) << error;
  EXPECT_FALSE(index.Contains("default", "a"));
  EXPECT_TRUE(index.Contains("default", "b"));

  Message second(2, "mooncake");
  second.pack.pack_array(2);
  second.pack.pack_double(2.0);
  second.pack.pack_array(1);
  second.pack.pack_array(1);
  Str(second.pack, "RemoveAllEvent");
  ASSERT_TRUE(ApplyMessage(index, second.Frames(), scratch, &error)) << error;
  EXPECT_FALSE(index.Contains("default", "b"));
  EXPECT_EQ(index.GetStats().keys, 0u);
}

TEST(MooncakeV1Format, AnEmptyBatchOnTheMooncakeTopicIsV1) {
  for (double ts : {1.0, 1.5}) {  // 1.0 goes on the wire as an integer
    Message m(1, "mooncake");
    m.pack.pack_array(2);
    m.pack.pack_double(ts);
    m.pack.pack_array(0);
    const Decoded d = Decode(m);
    ASSERT_TRUE(d.ok) << d.error;
    EXPECT_EQ(d.message.format, WireFormat::kMooncakeV1);
  }
}

TEST(EngineFormat, AnEmptyBatchWithAFloatTimestampIsEngine) {
  Message m(1, "kv-events");
  m.pack.pack_array(2);
  m.pack.pack_double(1.5);
  m.pack.pack_array(0);
  const Decoded d = Decode(m);
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.message.format, WireFormat::kEngine);
  EXPECT_EQ(d.message.timestamp_ms, 1500);
}

TEST(EngineFormat, NonFiniteTimestampsAreAcceptedAsZero) {
  for (double ts : {std::nan(""), std::numeric_limits<double>::infinity(), 1e300}) {
    Message m(1, "kv-events");
    m.pack.pack_array(2);
    m.pack.pack_double(ts);
    m.pack.pack_array(0);
    const Decoded d = Decode(m);
    ASSERT_TRUE(d.ok) << d.error;
    EXPECT_EQ(d.message.timestamp_ms, 0);
  }
}

// ------------------------------------------------------------ engine events --

TEST(EngineFormat, ArrayEventsAreRecognisedAndOnlyAllBlocksClearedActs) {
  Message m(3, "kv-events");
  m.pack.pack_array(3);
  m.pack.pack_double(1700000000.5);
  m.pack.pack_array(5);
  // Full BlockStored with int hashes (one of them >= 2^63 as u64, one negative).
  m.pack.pack_array(8);
  Str(m.pack, "BlockStored");
  m.pack.pack_array(3);
  m.pack.pack_uint64(1);
  m.pack.pack_uint64(18446744073709551615u);
  m.pack.pack_int64(-5);
  m.pack.pack_nil();  // parent_block_hash
  m.pack.pack_array(2);
  m.pack.pack_uint32(1);
  m.pack.pack_uint32(2);
  m.pack.pack_uint32(16);  // block_size
  m.pack.pack_nil();       // lora_id
  Str(m.pack, "GPU");      // medium
  m.pack.pack_nil();       // lora_name
  // BlockRemoved with SHA-256 byte-string hashes, trailing fields missing.
  m.pack.pack_array(2);
  Str(m.pack, "BlockRemoved");
  m.pack.pack_array(1);
  Bin(m.pack, std::string(32, '\xab'));
  // Tag only.
  m.pack.pack_array(1);
  Str(m.pack, "BlockRemoved");
  m.pack.pack_array(1);
  Str(m.pack, "AllBlocksCleared");
  // A tag from a newer engine.
  m.pack.pack_array(2);
  Str(m.pack, "BlockPinned");
  m.pack.pack_array(0);
  m.pack.pack_uint32(2);  // data_parallel_rank

  const Decoded d = Decode(m);
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.message.format, WireFormat::kEngine);
  EXPECT_TRUE(d.message.has_dp_rank);
  EXPECT_EQ(d.message.dp_rank, 2u);
  const std::vector<Event>& e = d.message.events;
  ASSERT_EQ(e.size(), 5u);
  EXPECT_EQ(e[0].kind, EventKind::kIgnored);
  EXPECT_EQ(e[1].kind, EventKind::kIgnored);
  EXPECT_EQ(e[2].kind, EventKind::kIgnored);
  EXPECT_EQ(e[3].kind, EventKind::kAllCleared);
  EXPECT_EQ(e[4].kind, EventKind::kIgnored);
}

TEST(EngineFormat, MapEventsWithTypeAreRecognised) {
  Message m(1, "kv-events");
  m.pack.pack_array(2);  // rank omitted when unset
  m.pack.pack_double(1.0);
  m.pack.pack_array(3);
  m.pack.pack_map(4);
  Str(m.pack, "type");
  Str(m.pack, "BlockStored");
  Str(m.pack, "block_hashes");
  m.pack.pack_array(1);
  m.pack.pack_int64(-1);
  Str(m.pack, "token_ids");
  m.pack.pack_array(1);
  m.pack.pack_uint32(7);
  Str(m.pack, "block_size");
  m.pack.pack_uint32(16);
  m.pack.pack_map(2);
  Str(m.pack, "type");
  Str(m.pack, "BlockRemoved");
  Str(m.pack, "block_hashes");
  m.pack.pack_array(1);
  Bin(m.pack, std::string(32, '\x01'));
  m.pack.pack_map(1);
  Str(m.pack, "type");
  Str(m.pack, "AllBlocksCleared");

  const Decoded d = Decode(m);
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.message.format, WireFormat::kEngine);
  ASSERT_EQ(d.message.events.size(), 3u);
  EXPECT_EQ(d.message.events[0].kind, EventKind::kIgnored);
  EXPECT_EQ(d.message.events[1].kind, EventKind::kIgnored);
  EXPECT_EQ(d.message.events[2].kind, EventKind::kAllCleared);
}

TEST(EngineFormat, BlockEventsCountAsIgnoredAndAllBlocksClearedClears) {
  Index index;
  index.ApplyBatch(1, std::vector<Event>{Event{EventKind::kStored, "k", {}, {}, {}}});
  Message m(2, "kv-events");
  m.pack.pack_array(2);
  m.pack.pack_double(1.0);
  m.pack.pack_array(2);
  m.pack.pack_array(2);
  Str(m.pack, "BlockStored");
  m.pack.pack_array(1);
  m.pack.pack_uint64(99);
  m.pack.pack_array(1);
  Str(m.pack, "AllBlocksCleared");
  DecodedMessage scratch;
  std::string error;
  ASSERT_TRUE(ApplyMessage(index, m.Frames(), scratch, &error)) << error;
  const Stats stats = index.GetStats();
  EXPECT_EQ(stats.ignored_events, 1u);
  EXPECT_EQ(stats.malformed_messages, 0u);
  EXPECT_EQ(stats.keys, 0u);
  EXPECT_FALSE(index.Contains("", "k"));
}

TEST(EngineFormat, ProductionMapsAreToldApartByEventTypeOrObjectKeyNotByType) {
  // Both carry "type": "BlockStored"; only the one with object_key is an
  // object event.
  Decoded production = Decode(OneMapEvent("", "BlockStored", "obj"));
  ASSERT_TRUE(production.ok) << production.error;
  EXPECT_EQ(production.message.format, WireFormat::kMooncake);
  EXPECT_EQ(production.message.events[0].kind, EventKind::kStored);

  Message engine;
  engine.pack.pack_array(2);
  engine.pack.pack_double(1.0);
  engine.pack.pack_array(1);
  engine.pack.pack_map(1);
  Str(engine.pack, "type");
  Str(engine.pack, "BlockStored");
  Decoded d = Decode(engine);
  ASSERT_TRUE(d.ok) << d.error;
  EXPECT_EQ(d.message.format, WireFormat::kEngine);
  EXPECT_EQ(d.message.events[0].kind, EventKind::kIgnored);
}

// --------------------------------------------------------------- malformed --

void ExpectMalformed(const Decoded& d, std::string_view reason_part) {
  EXPECT_FALSE(d.ok);
  EXPECT_NE(d.error.find(reason_part), std::string::npos) << "reason: " << d.error;
  EXPECT_EQ(d.error.find('\n'), std::string::npos) << "one line: " << d.error;
}

std::string GoodPayload() {
  MooncakeEvent event;
  event.object_key = "k";
  std::string payload;
  EncodeMooncakePayload(1, std::span<const MooncakeEvent>(&event, 1), &payload);
  return payload;
}

TEST(Malformed, WrongFrameCount) {
  const std::string payload = GoodPayload();
  const std::array<uint8_t, 8> sequence = EncodeSequence(1);
  const std::span<const uint8_t> p(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
  for (size_t count : {0, 1, 2, 4}) {
    std::vector<std::span<const uint8_t>> frames = {{}, sequence, p, p};
    frames.resize(count);
    Decoded d;
    d.ok = DecodeMessage(frames, &d.message, &d.error);
    ExpectMalformed(d, absl::StrFormat("%d frames, expected 3", count));
  }
}

TEST(Malformed, SequenceFrameNotEightBytes) {
  const std::string payload = GoodPayload();
  const std::span<const uint8_t> p(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
  for (size_t size : {0, 5, 7, 9}) {
    const std::vector<uint8_t> sequence(size, 0);
    const std::array<std::span<const uint8_t>, 3> frames = {std::span<const uint8_t>(), sequence, p};
    Decoded d;
    d.ok = DecodeMessage(frames, &d.message, &d.error);
    ExpectMalformed(d, absl::StrFormat("frame 1 (sequence) has %d bytes, expected 8", size));
  }
}

TEST(Malformed, EmptyOrInvalidMsgpack) {
  ExpectMalformed(DecodePayloadBytes(""), "truncated");
  ExpectMalformed(DecodePayloadBytes("\xc1"), "payload is reserved byte 0xc1");
  ExpectMalformed(DecodePayloadBytes(std::string("\x92\xc1\x90", 3)), "timestamp is reserved byte 0xc1");
}

TEST(Malformed, TruncatedAnywhere) {
  const std::string payload = GoodPayload();
  for (size_t cut = 0; cut < payload.size(); ++cut) {
    const Decoded d = DecodePayloadBytes(payload.substr(0, cut));
    EXPECT_FALSE(d.ok) << "cut at " << cut;
  }
  ExpectMalformed(DecodePayloadBytes(payload.substr(0, payload.size() / 2)), "truncated");
}

TEST(Malformed, TrailingGarbageAfterThePayload) {
  ExpectMalformed(DecodePayloadBytes(GoodPayload() + std::string("\x00", 1)), "1 trailing bytes");
  ExpectMalformed(DecodePayloadBytes(GoodPayload() + GoodPayload()), "trailing bytes");
}

TEST(Malformed, WrongPayloadShapes) {
  Message map;
  map.pack.pack_map(0);
  ExpectMalformed(Decode(map), "payload is map, expected an array");

  Message one;
  one.pack.pack_array(1);
  one.pack.pack_int64(1);
  ExpectMalformed(Decode(one), "1 elements");

  Message ts;
  ts.pack.pack_array(3);
  Str(ts.pack, "now");
  ts.pack.pack_array(0);
  ts.pack.pack_uint8(0);
  ExpectMalformed(Decode(ts), "timestamp is str");

  Message events;
  events.pack.pack_array(3);
  events.pack.pack_int64(1);
  events.pack.pack_map(0);
  events.pack.pack_uint8(0);
  ExpectMalformed(Decode(events), "events is map, expected an array");

  Message rank;
  rank.pack.pack_array(3);
  rank.pack.pack_int64(1);
  rank.pack.pack_array(0);
  Str(rank.pack, "zero");
  ExpectMalformed(Decode(rank), "dp_rank is str");

  Message huge_ts;  // a uint64 beyond int64 is no timestamp
  huge_ts.pack.pack_array(3);
  huge_ts.pack.pack_uint64(UINT64_MAX);
  huge_ts.pack.pack_array(0);
  huge_ts.pack.pack_uint8(0);
  ExpectMalformed(Decode(huge_ts), "timestamp");
}

Message WithOneEvent(const std::function<void(Packer&)>& pack_event, bool float_ts = false) {
  Message m;
  m.pack.pack_array(3);
  if (float_ts) {
    m.pack.pack_double(1.5);  // msgpack-cxx packs a whole-number double as an integer
  } else {
    m.pack.pack_int64(1);
  }
  m.pack.pack_array(1);
  pack_event(m.pack);
  m.pack.pack_uint8(0);
  return m;
}

TEST(Malformed, WrongEventShapesAndFieldTypes) {
  ExpectMalformed(Decode(WithOneEvent([](Packer& p) { p.pack_int64(5); })),
                  "event 0 is uint, expected a map or an array");
  ExpectMalformed(Decode(WithOneEvent([](Packer& p) {
                    p.pack_map(1);
                    Str(p, "medium");
                    Str(p, "cpu");
                  })),
                  "none of event_type, object_key, type");
  ExpectMalformed(Decode(WithOneEvent([](Packer& p) {
                    p.pack_map(1);
                    p.pack_uint8(1);
                    Str(p, "x");
                  })),
                  "map key is uint, expected str");
  ExpectMalformed(Decode(WithOneEvent([](Packer& p) {
                    p.pack_map(2);
                    Str(p, "event_type");
                    Str(p, "stored");
                    Str(p, "object_key");
                    p.pack_uint64(12345);
                  })),
                  "field object_key is uint, expected str or nil");
  ExpectMalformed(Decode(WithOneEvent([](Packer& p) {
                    p.pack_map(2);
                    Str(p, "event_type");
                    p.pack_true();
                    Str(p, "object_key");
                    Str(p, "k");
                  })),
                  "field event_type is bool");
  ExpectMalformed(Decode(WithOneEvent([](Packer& p) {
                    p.pack_map(2);
                    Str(p, "object_key");
                    Str(p, "k");
                    Str(p, "event_id");
                    p.pack_int64(-1);
                  })),
                  "field event_id");
  ExpectMalformed(Decode(WithOneEvent([](Packer& p) {
                    p.pack_map(2);
                    Str(p, "object_key");
                    Str(p, "k");
                    Str(p, "tenant_id");
                    p.pack_array(0);
                  })),
                  "field tenant_id is array");
  ExpectMalformed(Decode(WithOneEvent([](Packer& p) { p.pack_array(0); })), "empty array");
  ExpectMalformed(Decode(WithOneEvent([](Packer& p) {
                    p.pack_array(1);
                    p.pack_uint8(1);
                  })),
                  "type tag is uint, expected str");
  ExpectMalformed(Decode(WithOneEvent([](Packer& p) {
                    p.pack_map(1);
                    Str(p, "type");
                    p.pack_uint8(1);
                  })),
                  "field type is uint");
  // A production event must carry an integer timestamp.
  ExpectMalformed(Decode(WithOneEvent(
                      [](Packer& p) {
                        p.pack_map(1);
                        Str(p, "object_key");
                        Str(p, "k");
                      },
                      /*float_ts=*/true)),
                  "timestamp is a float");
}

TEST(Malformed, ReasonsQuoteWireBytesEscapedOnOneLine) {
  // An unknown field whose value runs past the end: the reason names the
  // field, whose name came from the wire.
  Message m;
  m.pack.pack_array(3);
  m.pack.pack_int64(1);
  m.pack.pack_array(1);
  m.pack.pack_map(1);
  Str(m.pack, "bad\nkey\\");
  m.pack.pack_str(10);  // 10 bytes promised, none there
  ExpectMalformed(Decode(m), "field bad\\x0akey\\x5c is truncated");
}

TEST(Malformed, WrongV1Shapes) {
  ExpectMalformed(Decode(WithOneEvent([](Packer& p) {
                    p.pack_array(2);
                    Str(p, "BlockStoreEvent");
                    Str(p, "k");
                  })),
                  "expected a key and replicas");
  ExpectMalformed(Decode(WithOneEvent([](Packer& p) {
                    p.pack_array(3);
                    Str(p, "BlockUpdateEvent");
                    Str(p, "k");
                    Str(p, "memory");
                  })),
                  "replicas is str, expected an array");
  ExpectMalformed(Decode(WithOneEvent([](Packer& p) {
                    p.pack_array(3);
                    Str(p, "BlockUpdateEvent");
                    p.pack_uint8(1);
                    p.pack_array(0);
                  })),
                  "mooncake_key is uint");
  ExpectMalformed(Decode(WithOneEvent([](Packer& p) {
                    p.pack_array(3);
                    Str(p, "BlockUpdateEvent");
                    Str(p, "k");
                    p.pack_array(1);
                    p.pack_array(0);
                  })),
                  "replica 0 is an empty array");
  ExpectMalformed(Decode(WithOneEvent([](Packer& p) {
                    p.pack_array(3);
                    Str(p, "BlockUpdateEvent");
                    Str(p, "k");
                    p.pack_array(1);
                    p.pack_array(2);
                    p.pack_nil();
                    Str(p, "loc");
                  })),
                  "replica 0 type is nil, expected str");
}

TEST(Malformed, WrongEngineShapes) {
  ExpectMalformed(Decode(WithOneEvent([](Packer& p) {
                    p.pack_array(2);
                    Str(p, "BlockStored");
                    p.pack_uint8(1);
                  })),
                  "block_hashes is uint, expected an array");
  ExpectMalformed(Decode(WithOneEvent([](Packer& p) {
                    p.pack_array(2);
                    Str(p, "BlockRemoved");
                    p.pack_array(1);
                    p.pack_double(1.5);
                  })),
                  "block_hashes[0] is float");
}

TEST(Malformed, MixedFormatsInOneMessage) {
  Message m;
  m.pack.pack_array(2);
  m.pack.pack_double(1.0);
  m.pack.pack_array(2);
  m.pack.pack_array(1);
  Str(m.pack, "AllBlocksCleared");
  m.pack.pack_array(1);
  Str(m.pack, "RemoveAllEvent");
  ExpectMalformed(Decode(m), "event 1 (mooncake-v1 format) in a message of engine events");

  Message n;
  n.pack.pack_array(3);
  n.pack.pack_int64(1);
  n.pack.pack_array(2);
  n.pack.pack_map(1);
  Str(n.pack, "object_key");
  Str(n.pack, "k");
  n.pack.pack_map(1);
  Str(n.pack, "type");
  Str(n.pack, "BlockStored");
  n.pack.pack_uint8(0);
  ExpectMalformed(Decode(n), "event 1 (engine format) in a message of mooncake events");
}

TEST(Malformed, AbsurdLengths) {
  // str32 claiming 4 GiB, array32 claiming 4 billion events, map32 claiming
  // 4 billion fields: each a handful of bytes.
  ExpectMalformed(DecodePayloadBytes(std::string("\x93\x01\x91\x81\xdb\xff\xff\xff\xff", 9)),
                  "event 0 map key at byte 4: length exceeds the remaining bytes");
  ExpectMalformed(DecodePayloadBytes(std::string("\x93\x01\xdd\xff\xff\xff\xff\x00", 8)),
                  "events at byte 2: length exceeds the remaining bytes");
  ExpectMalformed(DecodePayloadBytes(std::string("\x93\x01\x91\xdf\xff\xff\xff\xff", 8)),
                  "length exceeds the remaining bytes");
  ExpectMalformed(DecodePayloadBytes(std::string("\xdd\xff\xff\xff\xff", 5)), "payload at byte 0");
}

// ------------------------------------------------------------ ApplyMessage --

TEST(ApplyMessage, MalformedIsCountedLoggedAndChangesNothing) {
  Index index;
  DecodedMessage scratch;
  std::string error;
  Message good = OneMapEvent("stored", "", "a", "g", 1);
  ASSERT_TRUE(ApplyMessage(index, good.Frames(), scratch, &error)) << error;
  const Stats before = index.GetStats();

  testing::LogCapture log;
  // Well-formed events first, then a broken one: nothing of it may land.
  Message bad(2);
  bad.pack.pack_array(3);
  bad.pack.pack_int64(1);
  bad.pack.pack_array(2);
  bad.pack.pack_map(2);
  Str(bad.pack, "event_type");
  Str(bad.pack, "removed");
  Str(bad.pack, "object_key");
  Str(bad.pack, "a");
  bad.pack.pack_uint8(7);
  bad.pack.pack_uint8(0);
  EXPECT_FALSE(ApplyMessage(index, bad.Frames(), scratch, &error));
  EXPECT_NE(error.find("event 1"), std::string::npos) << error;

  const Stats after = index.GetStats();
  EXPECT_EQ(after.malformed_messages, before.malformed_messages + 1);
  EXPECT_EQ(after.keys, before.keys);
  EXPECT_EQ(after.groups, before.groups);
  EXPECT_EQ(after.last_sequence, before.last_sequence);
  EXPECT_EQ(after.batches_applied, before.batches_applied);
  EXPECT_EQ(after.clears, before.clears);
  EXPECT_TRUE(index.Contains("", "a"));
  ASSERT_EQ(log.lines.size(), 1u);
  EXPECT_EQ(log.lines[0].first, static_cast<int32_t>(LogLevel::kWarn));
  EXPECT_NE(log.lines[0].second.find(error), std::string::npos) << log.lines[0].second;
}

TEST(ApplyMessage, MalformedNeverConsumesASequenceNumber) {
  Index index;
  DecodedMessage scratch;
  Message first = OneMapEvent("stored", "", "a", "", 1);
  ASSERT_TRUE(ApplyMessage(index, first.Frames(), scratch, nullptr));
  // Sequence 2 arrives broken, then sequence 2 arrives whole (a resend): no
  // gap, no duplicate.
  Message broken(2);
  broken.pack.pack_array(0);
  EXPECT_FALSE(ApplyMessage(index, broken.Frames(), scratch, nullptr));
  Message second = OneMapEvent("stored", "", "b", "", 2);
  ASSERT_TRUE(ApplyMessage(index, second.Frames(), scratch, nullptr));
  const Stats stats = index.GetStats();
  EXPECT_EQ(stats.sequence_gaps, 0u);
  EXPECT_EQ(stats.duplicate_batches, 0u);
  EXPECT_EQ(stats.keys, 2u);
  EXPECT_EQ(stats.last_sequence, 2u);
}

TEST(ApplyMessage, MalformedNeverClearsEvenAfterALongRunOfThem) {
  Index index;
  DecodedMessage scratch;
  Message first = OneMapEvent("stored", "", "a", "", 1);
  ASSERT_TRUE(ApplyMessage(index, first.Frames(), scratch, nullptr));
  for (uint64_t s = 10; s < 20; ++s) {
    Message broken(s);
    broken.pack.pack_nil();
    EXPECT_FALSE(ApplyMessage(index, broken.Frames(), scratch, nullptr));
  }
  EXPECT_TRUE(index.Contains("", "a"));
  EXPECT_EQ(index.GetStats().malformed_messages, 10u);
  EXPECT_EQ(index.GetStats().clears, 0u);
}

}  // namespace
}  // namespace sci
