// Bytes from the network are hostile until proven otherwise: truncation,
// wrong types, nesting 100k deep and length prefixes claiming gigabytes
// never crash and never allocate more than a small multiple of the message
// size; thousands of seeded random mutations of the golden messages never
// crash, and whatever decodes points only into the message's own bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "golden_capture.h"
#include "index/index.h"
#include "wire/message_apply.h"
#include "encode/mooncake_encoder.h"
#include "wire/wire_decoder.h"

// ---- allocation accounting: this test binary replaces global new/delete ----

namespace {
thread_local bool tracking = false;
thread_local size_t allocated_bytes = 0;

void* CountedAlloc(size_t size) {
  if (tracking) allocated_bytes += size;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(size_t size) { return CountedAlloc(size); }
void* operator new[](size_t size) { return CountedAlloc(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace sci {
namespace {

using sci_test::GoldenMessage;
using sci_test::LoadCapture;

// Every byte the decoder asked the heap for during one call.
class AllocationMeter {
 public:
  AllocationMeter() {
    allocated_bytes = 0;
    tracking = true;
  }
  ~AllocationMeter() { tracking = false; }
  size_t bytes() const { return allocated_bytes; }
};

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

struct Outcome {
  bool ok = false;
  std::string error;
  size_t allocated = 0;
};

// Decodes [empty topic, sequence 1, payload] into a fresh DecodedMessage,
// measuring every allocation the decoder makes (the error string included).
Outcome DecodePayload(const std::string& payload) {
  static const std::array<uint8_t, 8> sequence = EncodeSequence(1);
  const std::array<std::span<const uint8_t>, 3> frames = {std::span<const uint8_t>(), sequence, Bytes(payload)};
  Outcome outcome;
  DecodedMessage decoded;
  {
    AllocationMeter meter;
    outcome.ok = DecodeMessage(frames, &decoded, &outcome.error);
    outcome.allocated = meter.bytes();
  }
  return outcome;
}

// The bound the decoder promises: one reservation of at most one Event per
// two payload bytes (the smallest event), plus the error message.
size_t AllowedBytes(size_t payload_size) { return sizeof(Event) * (payload_size / 2) + 1024; }

// A byte string from a literal, embedded NULs included.
template <size_t N>
std::string Raw(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

std::string Repeat(std::string_view unit, size_t n) {
  std::string s;
  s.reserve(unit.size() * n);
  for (size_t i = 0; i < n; ++i) s.append(unit);
  return s;
}

// ---------------------------------------------------------------- lengths --

TEST(HostileInput, LengthPrefixesClaimingGigabytesAllocateNothingAndFail) {
  const std::vector<std::string> payloads = {
      Raw("\xdd\xff\xff\xff\xff"),                                  // payload: array of 4G
      Raw("\xdf\xff\xff\xff\xff"),                                  // payload: map of 4G
      Raw("\x93\x01\xdd\xff\xff\xff\xff"),                          // events: 4G of them
      Raw("\x93\x01\xdc\xff\xff\x00"),                              // events: 64K of them, 1 byte there
      Raw("\x93\x01\x91\xdf\xff\xff\xff\xff"),                      // event: map of 4G fields
      Raw("\x93\x01\x91\xdd\xff\xff\xff\xff"),                      // event: array of 4G
      Raw("\x93\x01\x91\x81\xdb\xff\xff\xff\xff"),                  // map key: str of 4 GiB
      Raw("\x93\x01\x91\x81\xaa" "object_key" "\xdb\xff\xff\xff\xff"),  // value: str of 4 GiB
      Raw("\x93\x01\x91\x81\xa1x\xc6\xff\xff\xff\xff"),            // skipped value: bin of 4 GiB
      Raw("\x93\x01\x91\x81\xa1x\xc9\xff\xff\xff\xff\x01"),        // skipped value: ext of 4 GiB
      Raw("\x93\x01\x91\x81\xa1x\xdd\xff\xff\xff\xff"),            // skipped value: array of 4G
      Raw("\x93\x01\x91\x81\xa1x\x91\xdf\xff\xff\xff\xff"),        // nested map of 4G inside a skip
      Raw("\x93\x01\x91\x92\xaeRemoveAllEvent\xdb\xff\xff\xff\xff"),  // skipped element: str 4 GiB
  };
  for (const std::string& payload : payloads) {
    const Outcome outcome = DecodePayload(payload);
    EXPECT_FALSE(outcome.ok) << "payload of " << payload.size() << " bytes";
    EXPECT_LE(outcome.allocated, AllowedBytes(payload.size())) << outcome.error;
  }
}

TEST(HostileInput, ACountThatFitsTheBytesOnlyReservesWhatTheBytesCouldHold) {
  // 100k events claimed and 100k bytes present (but nothing valid): the
  // reservation is bounded by the bytes, then the first event fails.
  std::string payload = Raw("\x93\x01\xdd\x00\x01\x86\xa0");
  payload.append(100000, '\xc0');
  payload.append("\x00", 1);
  const Outcome outcome = DecodePayload(payload);
  EXPECT_FALSE(outcome.ok);
  EXPECT_LE(outcome.allocated, AllowedBytes(payload.size()));
}

TEST(HostileInput, TinyEventsAtMaximumDensityStayWithinTheBound) {
  // 100k events of two bytes each (["" ]): valid, all ignored.
  std::string payload = Raw("\x93\x01\xdd\x00\x01\x86\xa0");
  payload += Repeat(Raw("\x91\xa0"), 100000);
  payload.append("\x00", 1);
  const Outcome outcome = DecodePayload(payload);
  EXPECT_TRUE(outcome.ok) << outcome.error;
  EXPECT_LE(outcome.allocated, AllowedBytes(payload.size()));
}

// ---------------------------------------------------------------- nesting --

TEST(HostileInput, NestingAHundredThousandDeepNeitherRecursesNorAllocates) {
  constexpr size_t kDepth = 100000;
  // A closed nest inside an unknown field: valid, skipped without recursion.
  std::string closed = Raw("\x93\x01\x91\x82\xaa" "object_key" "\xa1k\xa4nest");
  closed.append(kDepth, '\x91');
  closed.append("\xc0\x00", 2);
  Outcome outcome = DecodePayload(closed);
  EXPECT_TRUE(outcome.ok) << outcome.error;
  EXPECT_LE(outcome.allocated, AllowedBytes(closed.size()));

  // The same nest, never closed: truncated.
  std::string open = Raw("\x93\x01\x91\x82\xaa" "object_key" "\xa1k\xa4nest");
  open.append(kDepth, '\x91');
  outcome = DecodePayload(open);
  EXPECT_FALSE(outcome.ok);
  EXPECT_NE(outcome.error.find("nest"), std::string::npos) << outcome.error;

  // Maps nested as keys and values of maps.
  std::string maps = Raw("\x93\x01\x91\x82\xaa" "object_key" "\xa1k\xa4nest");
  maps += Repeat(Raw("\x81\xa0"), kDepth);
  maps.append("\xc0\x00", 2);
  outcome = DecodePayload(maps);
  EXPECT_TRUE(outcome.ok) << outcome.error;

  // Deep nesting where the decoder expects structure: rejected at the top.
  for (const std::string& prefix : {std::string(), Raw("\x93\x01"), Raw("\x93\x01\x91")}) {
    std::string deep = prefix;
    deep.append(kDepth, '\x91');
    outcome = DecodePayload(deep);
    EXPECT_FALSE(outcome.ok);
    EXPECT_LE(outcome.allocated, AllowedBytes(deep.size()));
  }
}

// -------------------------------------------------------------- truncation --

TEST(HostileInput, EveryTruncationOfEveryGoldenPayloadIsMalformed) {
  for (const char* capture : sci_test::kCaptures) {
    for (const GoldenMessage& message : LoadCapture(capture)) {
      const std::string& payload = message.frames[2];
      // Every cut of the small payloads; about 3000 evenly spread cuts of
      // the large ones (each decode is linear in the payload).
      const size_t step = std::max<size_t>(1, payload.size() / 3000);
      for (size_t cut = 0; cut < payload.size(); cut += step) {
        const Outcome outcome = DecodePayload(payload.substr(0, cut));
        ASSERT_FALSE(outcome.ok) << capture << "/" << message.name << " cut at " << cut;
        ASSERT_LE(outcome.allocated, AllowedBytes(cut));
      }
    }
  }
}

TEST(HostileInput, WrongTypeAtEveryPositionOfAGoldenPayloadNeverCrashes) {
  const std::vector<GoldenMessage> basic = LoadCapture("basic");
  ASSERT_FALSE(basic.empty());
  const std::string& payload = basic[0].frames[2];
  // Every marker byte, in every position.
  for (size_t pos = 0; pos < payload.size(); ++pos) {
    for (int marker : {0x00, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xc4, 0xc7, 0xca, 0xcb,
                       0xcf, 0xd3, 0xd4, 0xd8, 0xd9, 0xdb, 0xdc, 0xdd, 0xde, 0xdf, 0xe0, 0xff}) {
      std::string mutated = payload;
      mutated[pos] = static_cast<char>(marker);
      const Outcome outcome = DecodePayload(mutated);
      ASSERT_LE(outcome.allocated, AllowedBytes(mutated.size())) << pos << " " << marker;
    }
  }
}

// -------------------------------------------------------- random mutations --

// One random edit of a message: a frame is picked, then a byte flipped or
// replaced, bytes inserted, erased, duplicated, or the frame cut.
void Mutate(std::mt19937_64& rng, GoldenMessage* message, std::vector<size_t>* frame_count) {
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  if (pick(50) == 0) {  // rarely: wrong frame count
    *frame_count = {pick(5)};
    return;
  }
  std::string& frame = message->frames[pick(20) == 0 ? 1 : 2];
  static constexpr uint8_t kInteresting[] = {0x00, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1,
                                             0xc4, 0xc6, 0xc9, 0xcf, 0xd3, 0xd9, 0xdb, 0xdc, 0xdd, 0xde,
                                             0xdf, 0xff};
  switch (pick(7)) {
    case 0:
      if (!frame.empty()) frame[pick(frame.size())] ^= static_cast<char>(1u << pick(8));
      break;
    case 1:
      if (!frame.empty()) frame[pick(frame.size())] = static_cast<char>(kInteresting[pick(sizeof kInteresting)]);
      break;
    case 2:
      if (!frame.empty()) frame[pick(frame.size())] = static_cast<char>(rng());
      break;
    case 3: {
      std::string insert(1 + pick(8), '\0');
      for (char& c : insert) c = static_cast<char>(rng());
      frame.insert(pick(frame.size() + 1), insert);
      break;
    }
    case 4:
      if (!frame.empty()) {
        const size_t at = pick(frame.size());
        frame.erase(at, 1 + pick(std::min<size_t>(16, frame.size() - at)));
      }
      break;
    case 5:
      if (!frame.empty()) {
        const size_t at = pick(frame.size());
        const std::string chunk = frame.substr(at, 1 + pick(32));
        frame.insert(pick(frame.size() + 1), chunk);
      }
      break;
    default:
      frame.resize(pick(frame.size() + 1));
      break;
  }
}

bool Within(std::string_view view, const std::string& frame) {
  if (view.empty()) return true;
  return view.data() >= frame.data() && view.data() + view.size() <= frame.data() + frame.size();
}

TEST(HostileInput, SeededRandomMutationsOfGoldenMessagesNeverCrash) {
  std::vector<GoldenMessage> corpus;
  for (const char* capture : sci_test::kCaptures) {
    for (GoldenMessage& m : LoadCapture(capture)) corpus.push_back(std::move(m));
  }
  ASSERT_FALSE(corpus.empty());

  // Fixed by default, so every run tries the same inputs; SCI_MUTATIONS and
  // SCI_MUTATION_SEED let a developer search further by hand.
  const char* count_env = std::getenv("SCI_MUTATIONS");
  const char* seed_env = std::getenv("SCI_MUTATION_SEED");
  const int kMutations = count_env != nullptr ? std::atoi(count_env) : 5000;
  std::mt19937_64 rng(seed_env != nullptr ? std::strtoull(seed_env, nullptr, 10) : 20240531);
  Index index;
  DecodedMessage scratch;  // reused, as the subscriber does
  int decoded = 0, malformed = 0;
  for (int i = 0; i < kMutations; ++i) {
    GoldenMessage message = corpus[rng() % corpus.size()];
    std::vector<size_t> frame_count;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) Mutate(rng, &message, &frame_count);

    std::vector<std::span<const uint8_t>> frames;
    for (const std::string& frame : message.frames) frames.push_back(Bytes(frame));
    if (!frame_count.empty()) frames.resize(frame_count[0], Bytes(message.frames[2]));

    size_t total = 0;
    for (const auto& f : frames) total += f.size();
    std::string error;
    bool ok;
    size_t allocated;
    {
      AllocationMeter meter;
      ok = DecodeMessage(frames, &scratch, &error);
      allocated = meter.bytes();
    }
    ASSERT_LE(allocated, AllowedBytes(total)) << "mutation " << i;
    if (ok) {
      ++decoded;
      for (const Event& event : scratch.events) {
        for (std::string_view view : {event.object_key, event.group_id, event.tenant_id, event.medium}) {
          // Views point into the payload, or at the decoder's own literal
          // "default" (v1 tenant).
          ASSERT_TRUE(Within(view, message.frames[2]) || view == "default") << "mutation " << i;
        }
      }
    } else {
      ++malformed;
      ASSERT_FALSE(error.empty());
      ASSERT_EQ(error.find('\n'), std::string::npos);
    }
    // And through the index, which must take whatever decoded.
    ApplyMessage(index, frames, scratch, nullptr);
  }
  EXPECT_EQ(decoded + malformed, kMutations);
  EXPECT_EQ(index.GetStats().malformed_messages, static_cast<uint64_t>(malformed));
  RecordProperty("decoded", decoded);
  RecordProperty("malformed", malformed);
}

}  // namespace
}  // namespace sci
