// Writes the seed inputs of both fuzzers (scripts/fuzz.sh runs it before
// fuzzing; the minimised corpus that grows from them is committed):
//   fuzz_seed_corpus <apply_message dir> <check_pages dir> <golden capture dir>
// apply_message seeds: every golden capture message of the real publisher,
// and one message of each wire format and event shape the decoder knows
// (production maps, v1 arrays, engine arrays and maps), encoded exactly as
// docs/wire-formats.md describes, plus a few of the classic malformed shapes.
// check_pages seeds: small layouts of each family with their pages stored.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <msgpack.hpp>
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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s <apply_message seed dir> <check_pages seed dir> <golden capture dir>\n", argv[0]);
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
  std::printf("wrote %d seed inputs\n", written);
  return 0;
}
