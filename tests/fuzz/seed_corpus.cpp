// Writes the seed inputs of three fuzzers (scripts/fuzz.sh runs it before
// fuzzing; the minimised corpus that grows from them is committed):
//   fuzz_seed_corpus <apply_message dir> <check_pages dir> <golden capture dir>
//                    [<index_differential dir>]
// apply_message seeds: every golden capture message of the real publisher,
// and one message of each wire format and event shape the decoder knows
// (production maps, v1 arrays, engine arrays and maps), encoded exactly as
// docs/wire-formats.md describes, plus a few of the classic malformed shapes.
// check_pages seeds: small layouts of each family with their pages stored.
// index_differential seeds: streams drawn from that harness's grammar
// (IndexDifferentialSeeds below), not random bytes: random bytes seldom
// store a whole page under its layout's tenant, then remove it by medium.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <msgpack.hpp>
#include <random>
#include <string>
#include <vector>

#include "encode/mooncake_encoder.h"
#include "multipart_input.h"

namespace {

namespace fs = std::filesystem;
using Packer = msgpack::packer<msgpack::sbuffer>;

void Str(Packer& p, std::string_view s) {
  p.pack_str(static_cast<uint32_t>(s.size()));
  p.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

std::string Sequence(uint64_t s) {
  const auto bytes = sci::EncodeSequence(s);
  return std::string(bytes.begin(), bytes.end());
}

std::string Bytes(const msgpack::sbuffer& b) { return std::string(b.data(), b.size()); }

int written = 0;

void Write(const fs::path& dir, const std::string& name, const std::string& bytes) {
  std::ofstream(dir / name, std::ios::binary) << bytes;
  ++written;
}

void WriteMessage(const fs::path& dir, const std::string& name, const std::vector<std::string>& frames) {
  std::string packed;
  if (!sci::fuzz::PackFrames(frames, &packed)) {
    std::fprintf(stderr, "seed %s does not fit the input format; skipped\n", name.c_str());
    return;
  }
  Write(dir, name, packed);
  // The same message under the per-medium rule (apply_message_fuzzer reads
  // it from bit 3 of byte 0).
  packed[0] = static_cast<char>(packed[0] | 0x08);
  Write(dir, name + "-per-medium", packed);
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void GoldenSeeds(const fs::path& out, const fs::path& captures) {
  for (const char* capture : {"basic", "burst", "overflow", "displaced-gap", "media-and-cleared"}) {
    for (int m = 0;; ++m) {
      char stem[16];
      std::snprintf(stem, sizeof stem, "msg%04d", m);
      std::vector<std::string> frames;
      for (int f = 0; f < 3; ++f) {
        const fs::path path = captures / capture / (std::string(stem) + ".frame" + std::to_string(f) + ".bin");
        if (!fs::exists(path)) break;
        frames.push_back(ReadFile(path));
      }
      if (frames.size() != 3) break;
      WriteMessage(out, std::string("golden-") + capture + "-" + stem, frames);
    }
  }
}

// Production maps through the real encoder, on the fixture's keys (sequence
// 5 follows the fixture's 4).
void ProductionSeeds(const fs::path& out) {
  const std::string page0 = "cf97adeedb59e05bfd73a2b4c2a8885708c4f4f70c84c64b27120e72ab733b72";
  const std::string key = page0 + "_0_v";
  const std::string group = "sglang-hicache:" + page0;
  sci::MooncakeEvent stored;
  stored.object_key = key;
  stored.group_id = group;
  stored.medium = "cpu";
  sci::MooncakeEvent removed = stored;
  removed.stored = false;
  sci::MooncakeEvent unlabelled = removed;
  unlabelled.group_id = "";
  unlabelled.object_key = "0x2a";
  // The fixture's second page: a label of the wrong page, and a key moved to it.
  const std::string page1_group = "sglang-hicache:4ebfa8a1f3c341517621838c6e1b9aa350307e3f00b3cbd1a07ef740f54396d6";
  sci::MooncakeEvent mislabelled = removed;
  mislabelled.group_id = page1_group;
  sci::MooncakeEvent moved = stored;
  moved.group_id = page1_group;
  const std::vector<std::pair<std::string, std::vector<sci::MooncakeEvent>>> batches = {
      {"stored", {stored}},
      {"removed-labelled", {removed}},
      {"removed-unlabelled", {unlabelled}},
      {"removed-mislabelled", {mislabelled}},
      {"stored-under-another-group", {moved}},
      {"mixed", {stored, removed, unlabelled}}};
  for (const auto& [name, events] : batches) {
    std::string payload;
    sci::EncodeMooncakePayload(1700000000000, events, &payload);
    WriteMessage(out, "mooncake-" + name, {"", Sequence(5), payload});
  }
  // The same stores after a gap (7: a run begins, stores withheld) and from
  // a restarted publisher (1: applied whole).
  std::string payload;
  sci::EncodeMooncakePayload(1700000000000, std::vector<sci::MooncakeEvent>{stored, moved, unlabelled}, &payload);
  WriteMessage(out, "mooncake-gap-begins-a-run", {"", Sequence(7), payload});
  WriteMessage(out, "mooncake-restart-at-one", {"", Sequence(1), payload});

  // The second generation: a key offloaded then evicted from memory (kept
  // under the per-medium rule), and `cleared` of each tenant.
  sci::MooncakeEvent on_disk = stored;
  on_disk.medium = "disk";
  on_disk.second_generation = true;  // that publisher's field order
  sci::MooncakeEvent off_memory = removed;
  off_memory.second_generation = true;
  sci::MooncakeEvent cleared_a;
  cleared_a.cleared = true;
  cleared_a.tenant_id = "tenant-a";
  sci::MooncakeEvent cleared_default = cleared_a;
  cleared_default.tenant_id = "default";
  payload.clear();
  sci::EncodeMooncakePayload(1700000000000,
                             std::vector<sci::MooncakeEvent>{on_disk, off_memory, cleared_a}, &payload);
  WriteMessage(out, "mooncake-media-and-tenant-cleared", {"", Sequence(5), payload});
  payload.clear();
  sci::EncodeMooncakePayload(1700000000000, std::vector<sci::MooncakeEvent>{cleared_default}, &payload);
  WriteMessage(out, "mooncake-default-tenant-cleared", {"", Sequence(5), payload});

  // An event type the decoder does not know, and the legacy `type` alone.
  msgpack::sbuffer b;
  Packer p(b);
  p.pack_array(3);
  p.pack_int64(1700000000000);
  p.pack_array(2);
  p.pack_map(4);
  Str(p, "event_type"), Str(p, "evicted");
  Str(p, "object_key"), Str(p, key);
  Str(p, "group_id"), Str(p, group);
  Str(p, "tenant_id"), p.pack_nil();
  p.pack_map(3);
  Str(p, "type"), Str(p, "BlockStored");
  Str(p, "object_key"), Str(p, "12345");
  Str(p, "tenant_id"), Str(p, "tenant-a");
  p.pack_uint32(0);
  WriteMessage(out, "mooncake-unknown-type-and-legacy-type", {"", Sequence(5), Bytes(b)});

  // An unknown type naming no key: its tenant is cleared.
  msgpack::sbuffer k;
  Packer q(k);
  q.pack_array(3);
  q.pack_int64(1700000000000);
  q.pack_array(1);
  q.pack_map(2);
  Str(q, "event_type"), Str(q, "compacted");
  Str(q, "tenant_id"), Str(q, "tenant-a");
  q.pack_uint32(0);
  WriteMessage(out, "mooncake-unknown-type-without-key", {"", Sequence(5), Bytes(k)});
}

// First-generation Mooncake arrays: [ts float, [events]] on topic "mooncake".
void V1Seeds(const fs::path& out) {
  msgpack::sbuffer b;
  Packer p(b);
  p.pack_array(2);
  p.pack_double(1700000000.5);
  p.pack_array(3);
  p.pack_array(8);
  Str(p, "BlockStoreEvent"), Str(p, "12345");
  p.pack_array(1), p.pack_array(2), Str(p, "memory"), Str(p, "node-0:1234");
  Str(p, "llama"), p.pack_uint32(16), Str(p, "abc"), Str(p, "");
  p.pack_array(2), p.pack_uint32(1), p.pack_uint32(2);
  p.pack_array(3);
  Str(p, "BlockUpdateEvent"), Str(p, "0x2a");
  p.pack_array(0);
  p.pack_array(1);
  Str(p, "RemoveAllEvent");
  WriteMessage(out, "v1-store-update-removeall", {"mooncake", Sequence(5), Bytes(b)});
}

// Engine events: older arrays and newer maps, integer and byte hashes.
void EngineSeeds(const fs::path& out) {
  {
    msgpack::sbuffer b;
    Packer p(b);
    p.pack_array(3);
    p.pack_double(1700000000.25);
    p.pack_array(3);
    p.pack_array(7);
    Str(p, "BlockStored");
    p.pack_array(2), p.pack_uint64(18446744073709551615ull), p.pack_int64(-2);
    p.pack_nil();
    p.pack_array(2), p.pack_uint32(1), p.pack_uint32(2);
    p.pack_uint32(16), p.pack_nil(), Str(p, "GPU");
    p.pack_array(3);
    Str(p, "BlockRemoved");
    p.pack_array(1), p.pack_bin(32), p.pack_bin_body(std::string(32, '\x5a').data(), 32);
    Str(p, "GPU");
    p.pack_array(1);
    Str(p, "AllBlocksCleared");
    p.pack_uint32(0);
    WriteMessage(out, "engine-arrays", {"kv-events", Sequence(5), Bytes(b)});
  }
  {
    msgpack::sbuffer b;
    Packer p(b);
    p.pack_array(2);
    p.pack_double(1700000000.75);
    p.pack_array(2);
    p.pack_map(4);
    Str(p, "type"), Str(p, "BlockStored");
    Str(p, "block_hashes"), p.pack_array(1), p.pack_uint32(7);
    Str(p, "token_ids"), p.pack_array(2), p.pack_uint32(1), p.pack_uint32(2);
    Str(p, "block_size"), p.pack_uint32(16);
    p.pack_map(1);
    Str(p, "type"), Str(p, "AllBlocksCleared");
    WriteMessage(out, "engine-maps", {"kv-events", Sequence(6), Bytes(b)});
  }
}

void MalformedSeeds(const fs::path& out) {
  std::string payload;
  sci::EncodeMooncakePayload(1, {}, &payload);
  WriteMessage(out, "malformed-two-frames", {"", Sequence(5)});
  WriteMessage(out, "malformed-short-sequence", {"", Sequence(5).substr(1), payload});
  WriteMessage(out, "malformed-truncated-payload", {"", Sequence(5), payload.substr(0, payload.size() - 1)});
}

// check_pages inputs follow the harness's reading order (check_pages_fuzzer.cpp):
// capacity, shape, page, tp, pp, tp_lcm, tag, prefix, tenant, pools, tokens,
// per-page modes, block size, rounds, changes.
// A string literal with its NUL bytes, without counting them by hand.
template <size_t N>
std::string Lit(const char (&bytes)[N]) {
  return std::string(bytes, N - 1);
}

void CheckPagesSeeds(const fs::path& out) {
  const std::string tokens = Lit("\x10") + "abcdefghijklmnop";
  // tp 2, page size 4, no strings, no pools, 16 tokens, every page stored.
  Write(out, "tp2", Lit("\x40\x00\x03\x02\x00\x00\x00\x00\x00\x00") + tokens +
                        std::string(8, '\0') + Lit("\x00\x03\x02"));
  // MLA with pp 2 and a tag.
  Write(out, "mla-pp2-tag", Lit("\x40\x01\x03\x01\x02\x00\x03tag\x00\x00\x00") + tokens +
                                std::string(8, '\0') + Lit("\x00\x02"));
  // Two pools, one trailing 2 pages, with a key prefix and a tenant.
  Write(out, "pools-trailing",
        Lit("\x40\x00\x03\x01\x00\x00\x00\x02px\x01t\x02\x01\x03__a\x00\x00\x01\x04__sw\x01\x02") +
            tokens + std::string(8, '\0') + Lit("\x00\x03\x02\x01\x00\x00"));
}

// index_differential_fuzzer inputs, in its reading order (see there): a
// setup byte (bit 0 the residency rule, bits 1-2 both set: a capacity
// byte), then steps. A step is an op byte (0-6 a production message, 7-10
// sci_index_apply_events, 11 a clear, 12 a reconnect, 13 a resync, 14 the
// end of a deferral, 15 queries only). A batch: a sequence byte (0-9 the
// next one, 10-11 a duplicate, 12-13 a gap, 14-15 a restart), an event
// count, per event a kind byte (0-13 stored, 14-26 removed, 27-28
// tenant-cleared, 29-30 a type nobody knows), a tenant byte and, for an
// event naming a key, a key byte (a number in the harness's universe, or
// from 240 the input's bytes), a label byte (0-3 the key's page's group,
// 4-5 none, 6-7 another: one more byte) and a medium byte; a production
// message ends with its shape (bit 0: second generation; event ids
// continuing, restarted or absent). The universe lists each layout's page
// keys together, so runs of consecutive key numbers store whole pages.
class DifferentialStream {
 public:
  explicit DifferentialStream(uint32_t seed) : random_(seed) {}

  std::string Make() {
    const uint8_t setup = static_cast<uint8_t>(Pick(8));
    out_.push_back(static_cast<char>(setup));
    if ((setup & 6) == 6) Byte(Pick(48));
    for (int steps = 16 + Pick(48); steps > 0; --steps) Step();
    return out_;
  }

 private:
  int Pick(int n) { return static_cast<int>(random_() % static_cast<uint32_t>(n)); }
  void Byte(int b) { out_.push_back(static_cast<char>(b)); }

  // The next key of the current run (a page's keys, then the next page's).
  void Key() {
    if (Pick(8) == 0) run_ = Pick(36);
    Byte(run_++ % 36);
  }

  void Sequence() {
    const int r = Pick(100);
    Byte(r < 80 ? 0 : r < 88 ? 10 : r < 95 ? 12 : 14 + Pick(2));
  }

  void Events() {
    const int n = 1 + Pick(6);
    Byte(n);
    // Mostly one tenant per batch: the layouts' pages are each under one.
    const int tenant = Pick(5);
    for (int i = 0; i < n; ++i) {
      const int r = Pick(100);
      const int kind = r < 60 ? Pick(14) : r < 94 ? 14 + Pick(13) : r < 97 ? 27 : 29 + Pick(2);
      Byte(kind);
      Byte(Pick(5) == 0 ? Pick(5) : tenant);
      if (kind == 27 || kind == 30) continue;
      Key();
      const int label = Pick(10) < 7 ? 0 : Pick(8);
      Byte(label);
      if (label >= 6) Byte(Pick(16));
      const int m = Pick(100);
      Byte(m < 40 ? 0 : m < 70 ? 1 : Pick(11));
    }
  }

  void Step() {
    const int r = Pick(100);
    const int op = r < 55 ? Pick(7) : r < 75 ? 7 + Pick(4) : r < 78 ? 11 : r < 81 ? 12 : r < 89 ? 13 : r < 95 ? 14 : 15;
    Byte(op);
    if (op <= 10) {
      Sequence();
      Events();
      if (op <= 6) Byte(Pick(10) < 8 ? Pick(2) : Pick(256));
    } else if (op == 13) {
      const int keys = Pick(12);
      Byte(keys);
      for (int i = 0; i < keys; ++i) Key();
      const int buffered = Pick(3);
      Byte(buffered);
      for (int i = 0; i < buffered; ++i) {
        Sequence();
        Events();
        Byte(Pick(2));
      }
      Byte(Pick(4));
    } else if (op == 14) {
      Byte(Pick(2));
    }
  }

  std::mt19937 random_;
  std::string out_;
  int run_ = 0;
};

void IndexDifferentialSeeds(const fs::path& out) {
  for (uint32_t seed = 1; seed <= 48; ++seed) {
    Write(out, "grammar-" + std::to_string(seed), DifferentialStream(seed).Make());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr,
                 "usage: %s <apply_message seed dir> <check_pages seed dir> <golden capture dir> "
                 "[<index_differential seed dir>]\n",
                 argv[0]);
    return 2;
  }
  const fs::path apply(argv[1]), pages(argv[2]), captures(argv[3]);
  fs::create_directories(apply);
  fs::create_directories(pages);
  GoldenSeeds(apply, captures);
  ProductionSeeds(apply);
  V1Seeds(apply);
  EngineSeeds(apply);
  MalformedSeeds(apply);
  CheckPagesSeeds(pages);
  if (argc == 5) {
    fs::create_directories(argv[4]);
    IndexDifferentialSeeds(argv[4]);
  }
  std::printf("wrote %d seed inputs\n", written);
  return 0;
}
