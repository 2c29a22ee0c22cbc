// vLLM block hashes: the golden vectors (CPython pickle and cbor2, both
// algorithms, byte for byte), CPython's own pickles of the corners those do
// not reach (testdata/vllm/make_pickle_corners.py), canonical CBOR heads laid
// out by hand, the hot path against SHA-256 of the encoded bytes (computed
// here through EVP), and a hot path that allocates nothing.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "replaced_operator_new.h"
#include "vllm/block_hash.h"

namespace {
thread_local bool counting = false;
thread_local size_t allocations = 0;
}  // namespace

void* sci_test::AllocateForTest(std::size_t size, std::size_t alignment) {
  if (counting) ++allocations;
  return sci_test::HeapAllocate(size, alignment);
}

namespace sci::vllm {
namespace {

using nlohmann::json;

json Load(const std::string& file) {
  std::ifstream in(std::string(SCI_VLLM_TESTDATA_DIR) + "/" + file);
  EXPECT_TRUE(in.good()) << file;
  return json::parse(in);
}

std::string Hex(const uint8_t* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[p[i] >> 4]);
    out.push_back(kDigits[p[i] & 15]);
  }
  return out;
}
std::string Hex(const BlockDigest& d) { return Hex(d.data(), d.size()); }
std::string Hex(const std::string& s) { return Hex(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

BlockDigest FromHex(const std::string& hex) {
  BlockDigest d{};
  for (size_t i = 0; i < 32; ++i) d[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return d;
}

// EVP one-shot, not the library's low-level interface.
BlockDigest ReferenceSha256(const std::string& bytes) {
  BlockDigest d{};
  unsigned int length = 0;
  EVP_Digest(bytes.data(), bytes.size(), d.data(), &length, EVP_sha256(), nullptr);
  return d;
}

HashAlgorithm AlgorithmOf(const std::string& name) {
  EXPECT_TRUE(name == "sha256" || name == "sha256_cbor") << name;
  return name == "sha256_cbor" ? HashAlgorithm::kSha256Cbor : HashAlgorithm::kSha256;
}

// {"repeat": x, "count": n} (make_pickle_corners.py's long runs), expanded.
std::string StringOf(const json& j) {
  if (j.is_object()) return std::string(j["count"].get<size_t>(), j["repeat"].get<std::string>().at(0));
  return j.get<std::string>();
}
std::vector<uint32_t> TokensOf(const json& j) {
  if (j.is_object()) return std::vector<uint32_t>(j["count"].get<size_t>(), j["repeat"].get<uint32_t>());
  return j.get<std::vector<uint32_t>>();
}

TEST(VllmBlockHash, EveryGoldenVectorMatchesByteForByte) {
  const json vectors = Load("hash-vectors.json");
  size_t passed = 0;
  for (const json& c : vectors["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>() + " " + c["algorithm"].get<std::string>());
    const HashAlgorithm algorithm = AlgorithmOf(c["algorithm"]);
    const std::string seed = c["python_hash_seed"];
    const std::vector<uint32_t> tokens = c["token_ids"];
    std::string lora, salt;
    RequestExtras extras;
    if (!c["lora_name"].is_null()) {
      lora = c["lora_name"];
      extras.has_lora = true;
      extras.lora_name = lora;
    }
    if (!c["cache_salt"].is_null()) {
      salt = c["cache_salt"];
      extras.has_salt = true;
      extras.cache_salt = salt;
    }
    const bool none_ok = Hex(NoneHash(algorithm, seed)) == c["none_hash"].get<std::string>();
    EXPECT_TRUE(none_ok);
    const std::vector<BlockDigest> chain = HashChain(algorithm, seed, tokens, c["block_size"], extras);
    const std::vector<std::string> digests = c["digests"];
    const std::vector<uint64_t> low64 = c["low64_be"];
    ASSERT_EQ(chain.size(), digests.size());
    ASSERT_EQ(low64.size(), digests.size());
    bool all_ok = none_ok;
    for (size_t i = 0; i < chain.size(); ++i) {
      EXPECT_EQ(Hex(chain[i]), digests[i]) << "block " << i;
      EXPECT_EQ(EventHashOf(chain[i]), low64[i]) << "block " << i;
      all_ok = all_ok && Hex(chain[i]) == digests[i] && EventHashOf(chain[i]) == low64[i];
    }
    passed += all_ok ? 1 : 0;
  }
  EXPECT_EQ(vectors["cases"].size(), 28u);
  EXPECT_EQ(passed, vectors["cases"].size());
  std::printf("golden vectors: %zu of %zu cases match\n", passed, vectors["cases"].size());
}

TEST(VllmBlockHash, KnownAnchors) {
  EXPECT_EQ(Hex(NoneHash(HashAlgorithm::kSha256, "0")),
            "1973e23848344dc43a988a9b478663803cfffe1243480253f9a3cf004b14aa7c");
  EXPECT_EQ(Hex(NoneHash(HashAlgorithm::kSha256Cbor, "0")).substr(0, 8), "4e1195df");
  std::vector<uint32_t> tokens(64);
  std::iota(tokens.begin(), tokens.end(), 0u);
  const std::vector<BlockDigest> chain = HashChain(HashAlgorithm::kSha256, "0", tokens, 16);
  ASSERT_EQ(chain.size(), 4u);
  EXPECT_EQ(Hex(chain[0]), "6358e31578a64b75ebe28cdb99d3beae65de82a2087321dc6ec84ae048faaaa6");
  EXPECT_EQ(Hex(chain[3]), "71c151a876275d6b365dfa670e47acb855b683a8880eaf3e31a806c3164561b4");
  EXPECT_EQ(EventHashOf(chain[0]), 7982712666671721126u);
}

TEST(VllmBlockHash, PickleCornersMatchCPython) {
  const json corners = Load("pickle-corners.json");
  for (const json& c : corners["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    if (c["kind"] == "seed") {
      EXPECT_EQ(Hex(NoneHash(HashAlgorithm::kSha256, StringOf(c["seed"]))), c["sha256"].get<std::string>());
      continue;
    }
    const std::vector<uint32_t> tokens = TokensOf(c["tokens"]);
    std::string lora, salt;
    RequestExtras extras;
    if (!c["lora_name"].is_null()) {
      lora = StringOf(c["lora_name"]);
      extras.has_lora = true;
      extras.lora_name = lora;
    }
    if (!c["cache_salt"].is_null()) {
      salt = StringOf(c["cache_salt"]);
      extras.has_salt = true;
      extras.cache_salt = salt;
    }
    extras.salt_is_lora_object = c["salt_is_lora_object"];
    const BlockDigest parent = FromHex(c["parent"]);
    const size_t block_index = c["block_index"];
    const std::string bytes = EncodeBlock(HashAlgorithm::kSha256, parent, tokens, extras, block_index);
    if (c.contains("pickle")) EXPECT_EQ(Hex(bytes), c["pickle"].get<std::string>());
    EXPECT_EQ(bytes.size(), c["length"].get<size_t>());
    EXPECT_EQ(Hex(ReferenceSha256(bytes)), c["sha256"].get<std::string>());
    EXPECT_EQ(Hex(HashBlock(HashAlgorithm::kSha256, parent, tokens, extras, block_index)),
              c["sha256"].get<std::string>());
  }
}

TEST(VllmBlockHash, CborUsesShortestHeads) {
  const BlockDigest parent{};
  const std::vector<uint32_t> tokens = {0, 23, 24, 255, 256, 65535, 65536, 0xFFFFFFFFu};
  const std::string lora(24, 'l');
  const std::string salt(256, 's');
  RequestExtras extras{true, lora, true, salt};
  std::string expected = "\x83\x58\x20" + std::string(32, '\0') + "\x88";
  expected += std::string("\x00\x17\x18\x18\x18\xff\x19\x01\x00\x19\xff\xff"
                          "\x1a\x00\x01\x00\x00\x1a\xff\xff\xff\xff",
                          22);
  expected += "\x82\x78\x18" + lora + std::string("\x79\x01\x00", 3) + salt;
  EXPECT_EQ(Hex(EncodeBlock(HashAlgorithm::kSha256Cbor, parent, tokens, extras, 0)), Hex(expected));
  // Later blocks: the LoRA name alone; a 65536-byte name takes a 4-byte head.
  const std::string long_lora(65536, 'L');
  extras.lora_name = long_lora;
  const std::vector<uint32_t> many(24, 1);
  expected = "\x83\x58\x20" + std::string(32, '\0') + "\x98\x18" + std::string(24, '\x01') + "\x81\x7a" +
             std::string("\x00\x01\x00\x00", 4) + long_lora;
  EXPECT_EQ(Hex(EncodeBlock(HashAlgorithm::kSha256Cbor, parent, many, extras, 1)), Hex(expected));
  // Neither: null.
  EXPECT_EQ(Hex(EncodeBlock(HashAlgorithm::kSha256Cbor, parent, {}, {}, 0)),
            Hex("\x83\x58\x20" + std::string(32, '\0') + "\x80\xf6"));
}

TEST(VllmBlockHash, EmptySaltIsNoSalt) {
  const BlockDigest parent{};
  const std::vector<uint32_t> tokens = {1, 2, 3, 4};
  RequestExtras with_empty_salt;
  with_empty_salt.has_salt = true;
  for (HashAlgorithm a : {HashAlgorithm::kSha256, HashAlgorithm::kSha256Cbor}) {
    EXPECT_EQ(EncodeBlock(a, parent, tokens, with_empty_salt, 0), EncodeBlock(a, parent, tokens, {}, 0));
  }
}

TEST(VllmBlockHash, SaltObjectFlagNeedsEqualStrings) {
  const BlockDigest parent{};
  const std::vector<uint32_t> tokens = {1, 2, 3, 4};
  RequestExtras flagged{true, "a", true, "b", true};
  RequestExtras plain{true, "a", true, "b", false};
  EXPECT_EQ(EncodeBlock(HashAlgorithm::kSha256, parent, tokens, flagged, 0),
            EncodeBlock(HashAlgorithm::kSha256, parent, tokens, plain, 0));
}

TEST(VllmBlockHash, HashBlockIsSha256OfEncodeBlock) {
  std::mt19937_64 rng(20261201);
  auto token = [&] {
    switch (rng() % 4) {
      case 0: return static_cast<uint32_t>(rng() % 256);
      case 1: return static_cast<uint32_t>(rng() % 65536);
      case 2: return static_cast<uint32_t>(rng() % 0x80000000u);
      default: return static_cast<uint32_t>(rng());
    }
  };
  const size_t kStringLengths[] = {0, 1, 23, 24, 255, 256, 65535, 65536, 70000};
  auto text = [&] {
    const size_t n = kStringLengths[rng() % std::size(kStringLengths)];
    std::string s(n, 'x');
    for (char& ch : s) ch = static_cast<char>('a' + rng() % 26);
    return s;
  };
  const size_t kBlockSizes[] = {0, 1, 2, 3, 4, 16, 64, 255, 1000, 13100};
  for (int round = 0; round < 300; ++round) {
    BlockDigest parent;
    for (uint8_t& b : parent) b = static_cast<uint8_t>(rng());
    std::vector<uint32_t> tokens(kBlockSizes[rng() % std::size(kBlockSizes)]);
    for (uint32_t& t : tokens) t = token();
    const std::string lora = text();
    const std::string salt = rng() % 4 == 0 ? lora : text();
    RequestExtras extras{rng() % 2 == 0, lora, rng() % 2 == 0, salt, rng() % 2 == 0};
    const size_t block_index = rng() % 3;
    for (HashAlgorithm a : {HashAlgorithm::kSha256, HashAlgorithm::kSha256Cbor}) {
      SCOPED_TRACE("round " + std::to_string(round) + " algorithm " + std::to_string(static_cast<int>(a)));
      EXPECT_EQ(Hex(HashBlock(a, parent, tokens, extras, block_index)),
                Hex(ReferenceSha256(EncodeBlock(a, parent, tokens, extras, block_index))));
    }
  }
}

TEST(VllmBlockHash, HashBlockAllocatesNothing) {
  std::vector<uint32_t> tokens(64);
  std::iota(tokens.begin(), tokens.end(), 0x7FFFFFF0u);
  const RequestExtras extras{true, "adapter-A", true, "tenant-salt"};
  BlockDigest parent{};
  allocations = 0;
  counting = true;
  for (HashAlgorithm a : {HashAlgorithm::kSha256, HashAlgorithm::kSha256Cbor}) {
    for (size_t i = 0; i < 4; ++i) parent = HashBlock(a, parent, std::span(tokens).first(16 * (i + 1)), extras, i);
  }
  counting = false;
  EXPECT_EQ(allocations, 0u);
  // Past the stack buffer (streamed after a measuring pass) and past one
  // 64 KiB frame (measured frame by frame) too.
  const std::vector<uint32_t> long_block(1000, 70000);
  const std::vector<uint32_t> huge_block(20000, 0xFFFFFFFFu);
  counting = true;
  parent = HashBlock(HashAlgorithm::kSha256, parent, long_block, extras, 0);
  parent = HashBlock(HashAlgorithm::kSha256, parent, huge_block, extras, 1);
  parent = HashBlock(HashAlgorithm::kSha256Cbor, parent, huge_block, extras, 1);
  counting = false;
  EXPECT_EQ(allocations, 0u);
}

}  // namespace
}  // namespace sci::vllm
