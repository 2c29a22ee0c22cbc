// Issue #34, R2: the vLLM digest memo reuses an entry only for the same
// tokens and the same extras bytes. 1.2 keyed a request's extras by a 64-bit
// domain, XXH3-64 of the LoRA name, then of the salt, over the layout's
// domain. XXH3-64 of a 16-byte input inverts in closed form, so this suite
// builds, for a victim request, a 16-byte salt or LoRA name whose 1.2 domain
// is the victim's (checked here against the 1.2 formula), queries the
// victim until the memo holds its blocks, then the crafted request with
// the same tokens: it must answer what its own digests say (nothing is
// stored for them: a miss), never the victim's blocks. With 1.2's domain it
// answered 4 block hits and a prefix of 3.
//
// Everything goes through the C API (sci_layout_new_json, sci_index_*), as
// a router calls it, on one thread (the memo is per thread).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "capi_test_support.h"
#include "query/digest.h"
#include "shared_cache_index.h"
#include "vllm/block_hash.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace {

using sci::vllm::BlockDigest;
using sci::vllm::HashAlgorithm;
using sci::vllm::RequestExtras;
using sci_test::IndexHandle;

constexpr const char* kDescriptor = R"({"schema_version": 1,
 "hash": {"algorithm": "sha256", "seed_policy": "pythonhashseed-0"},
 "main_event_block_size": 16,
 "groups": [{"kind": "full_attention", "block_size": 16, "hash_block_size": 16,
             "key_prefixes": ["m@tp_rank:0@group:0", "m@tp_rank:1@group:0"]}]})";

// 1.2's constants (Chain::ExtrasDomain).
constexpr uint64_t kLoraConstant = 0x8F1BBCDCCA62C1D6ull;
constexpr uint64_t kSaltConstant = 0x6ED9EBA1CA62C1D6ull;

// 1.2's layout domain: XXH3-64 of the algorithm byte and NONE_HASH.
uint64_t OldLayoutDomain() {
  const BlockDigest none = sci::vllm::NoneHash(HashAlgorithm::kSha256, "0");
  uint8_t bytes[1 + sizeof(BlockDigest)];
  bytes[0] = static_cast<uint8_t>(HashAlgorithm::kSha256);
  std::memcpy(bytes + 1, none.data(), none.size());
  return XXH3_64bits(bytes, sizeof bytes);
}

// 1.2's domain of a request (no salt_is_lora_object here).
uint64_t OldDomain(const RequestExtras& extras) {
  uint64_t domain = OldLayoutDomain();
  if (extras.has_lora) {
    domain = XXH3_64bits_withSeed(extras.lora_name.data(), extras.lora_name.size(), domain ^ kLoraConstant);
  }
  if (extras.has_salt) {
    domain = XXH3_64bits_withSeed(extras.cache_salt.data(), extras.cache_salt.size(), domain ^ kSaltConstant);
  }
  return domain;
}

uint64_t ReadLE64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}
void WriteLE64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// XXH3's final mix, undone: xorshift 32 is its own inverse, as is xorshift
// 37 (37 >= 32), and the multiplier is odd.
uint64_t InverseAvalanche(uint64_t h) {
  constexpr uint64_t kMultiplier = 0x165667919E3779F9ull;
  uint64_t inverse = kMultiplier;  // Newton: each step doubles the correct low bits
  for (int i = 0; i < 6; ++i) inverse *= 2 - kMultiplier * inverse;
  h ^= h >> 32;
  h *= inverse;
  h ^= h >> 37;
  return h;
}

// A 16-byte input whose XXH3-64 under `seed` is `target` (XXH3_len_9to16_64b:
// with the first word chosen so that it is 0 once the secret is XORed in,
// the 128-bit product vanishes and the hash is the avalanche of
// 16 + the second word XORed with its own secret words).
std::string Preimage16(uint64_t seed, uint64_t target) {
  const uint8_t* secret = XXH3_kSecret;
  const uint64_t bitflip1 = (ReadLE64(secret + 24) ^ ReadLE64(secret + 32)) + seed;
  const uint64_t bitflip2 = (ReadLE64(secret + 40) ^ ReadLE64(secret + 48)) - seed;
  uint8_t bytes[16];
  WriteLE64(bytes, bitflip1);
  WriteLE64(bytes + 8, (InverseAvalanche(target) - 16) ^ bitflip2);
  return std::string(reinterpret_cast<const char*>(bytes), sizeof bytes);
}

struct Case {
  const char* name;
  RequestExtras victim;
  RequestExtras crafted;
};

class VllmMemoCollision : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(sci_layout_new_json(sci_str{kDescriptor, std::strlen(kDescriptor)}, &layout_), SCI_OK)
        << sci_last_error();
  }
  void TearDown() override { sci_layout_free(layout_); }

  // Stores every chunk of `tokens` hashed with `extras`.
  void StoreChain(const IndexHandle& index, const std::vector<uint32_t>& tokens, const RequestExtras& extras) {
    const std::vector<BlockDigest> chain = sci::vllm::HashChain(HashAlgorithm::kSha256, "0", tokens, 16, extras);
    std::vector<std::string> keys;
    for (const BlockDigest& digest : chain) {
      std::string hex(sci::kPageHashHexLength, '\0');
      sci::ToHex(digest, hex.data());
      for (int rank = 0; rank < 2; ++rank) keys.push_back("m@tp_rank:" + std::to_string(rank) + "@group:0@" + hex);
    }
    std::vector<sci_event> events;
    for (const std::string& key : keys) {
      sci_event event{};
      event.kind = SCI_EVENT_STORED;
      event.object_key = sci_str{key.data(), key.size()};
      events.push_back(event);
    }
    ASSERT_EQ(sci_index_apply_events(index.index, 1, events.data(), events.size()), SCI_OK);
  }

  static sci_request_extras ToC(const RequestExtras& extras) {
    sci_request_extras c = SCI_REQUEST_EXTRAS_INIT;
    if (extras.has_lora) c.lora_name = sci_str{extras.lora_name.data(), extras.lora_name.size()};
    if (extras.has_salt) c.cache_salt = sci_str{extras.cache_salt.data(), extras.cache_salt.size()};
    return c;
  }
  size_t Prefix(const IndexHandle& index, const std::vector<uint32_t>& tokens, const RequestExtras& extras) {
    const sci_request_extras c = ToC(extras);
    size_t prefix = 99;
    EXPECT_EQ(sci_index_check_prefix_with_extras(index.index, layout_, tokens.data(), tokens.size(), 16, &c, &prefix),
              SCI_OK)
        << sci_last_error();
    return prefix;
  }
  size_t BlockHits(const IndexHandle& index, const std::vector<uint32_t>& tokens, const RequestExtras& extras) {
    const sci_request_extras c = ToC(extras);
    std::vector<uint8_t> hits(tokens.size() / 16);
    sci_page_result result = SCI_PAGE_RESULT_INIT;
    EXPECT_EQ(sci_index_check_pages_with_extras(index.index, layout_, tokens.data(), tokens.size(), 16, &c,
                                                hits.data(), hits.size(), &result),
              SCI_OK)
        << sci_last_error();
    return result.total_hits;
  }

  // The victim's chunks stored and memoised, then the crafted request.
  void Run(const Case& c, uint32_t first_token) {
    SCOPED_TRACE(c.name);
    ASSERT_EQ(OldDomain(c.victim), OldDomain(c.crafted)) << "the crafted extras must collide under 1.2's domain";
    IndexHandle index;
    std::vector<uint32_t> tokens(64);  // 4 hash blocks
    std::iota(tokens.begin(), tokens.end(), first_token);
    StoreChain(index, tokens, c.victim);
    // Seen three times: memoised on its second sight, served from the memo after.
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(Prefix(index, tokens, c.victim), 3u);
      EXPECT_EQ(BlockHits(index, tokens, c.victim), 4u);
    }
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(BlockHits(index, tokens, c.crafted), 0u) << "a false block hit from the victim's memo entries";
      EXPECT_EQ(Prefix(index, tokens, c.crafted), 0u) << "a false prefix from the victim's memo entries";
    }
    // And the crafted request's own entries never serve the victim wrong.
    EXPECT_EQ(Prefix(index, tokens, c.victim), 3u);
    EXPECT_EQ(BlockHits(index, tokens, c.victim), 4u);
  }

  sci_layout* layout_ = nullptr;
};

TEST_F(VllmMemoCollision, ACraftedSaltNeverGetsTheDigestsOfARequestWithoutExtras) {
  static const std::string salt = Preimage16(OldLayoutDomain() ^ kSaltConstant, OldLayoutDomain());
  Case c{"salt vs none", {}, {}};
  c.crafted.has_salt = true;
  c.crafted.cache_salt = salt;
  Run(c, 1000);
}

TEST_F(VllmMemoCollision, ACraftedLoraNameNeverGetsTheDigestsOfAnotherLoraName) {
  Case c{"lora vs lora", {}, {}};
  c.victim.has_lora = true;
  c.victim.lora_name = "tenant-a-adapter";
  static const std::string crafted = Preimage16(OldLayoutDomain() ^ kLoraConstant, OldDomain(c.victim));
  c.crafted.has_lora = true;
  c.crafted.lora_name = crafted;
  Run(c, 2000);
}

TEST_F(VllmMemoCollision, ACraftedSaltNeverGetsTheDigestsOfAnotherSalt) {
  Case c{"salt vs salt", {}, {}};
  c.victim.has_salt = true;
  c.victim.cache_salt = "tenant-a-secret-salt";
  static const std::string crafted = Preimage16(OldLayoutDomain() ^ kSaltConstant, OldDomain(c.victim));
  c.crafted.has_salt = true;
  c.crafted.cache_salt = crafted;
  Run(c, 3000);
}

}  // namespace
