// SGLang page hashes: the doc's check value, the chaining, eagle bigrams,
// whole pages only, and the hex form. The reference digests are computed
// here through a different libcrypto interface (EVP one-shot) from bytes
// laid out by hand.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "sglang/page_hash.h"

namespace sci {
namespace {

std::vector<uint32_t> Iota(uint32_t first, size_t n) {
  std::vector<uint32_t> tokens(n);
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

void AppendLE32(std::vector<uint8_t>* bytes, uint32_t v) {
  for (int shift = 0; shift < 32; shift += 8) bytes->push_back(static_cast<uint8_t>(v >> shift));
}

std::string ReferenceHex(const std::vector<uint8_t>& bytes, std::vector<uint8_t>* digest) {
  digest->assign(32, 0);
  unsigned int length = 0;
  EXPECT_EQ(EVP_Digest(bytes.data(), bytes.size(), digest->data(), &length, EVP_sha256(), nullptr), 1);
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t b : *digest) {
    hex.push_back(kDigits[b >> 4]);
    hex.push_back(kDigits[b & 15]);
  }
  return hex;
}

// The chained hashes of `units` (each a list of u32 written little-endian),
// `page_size` units per page.
std::vector<std::string> ReferenceChain(const std::vector<std::vector<uint32_t>>& units, size_t page_size) {
  std::vector<std::string> hashes;
  std::vector<uint8_t> previous;
  for (size_t first = 0; first + page_size <= units.size(); first += page_size) {
    std::vector<uint8_t> bytes = previous;
    for (size_t u = first; u < first + page_size; ++u) {
      for (uint32_t v : units[u]) AppendLE32(&bytes, v);
    }
    hashes.push_back(ReferenceHex(bytes, &previous));
  }
  return hashes;
}

TEST(PageHash, MatchesTheCheckValueOfTheDoc) {
  const std::vector<std::string> hashes = PageHashesHex(Iota(1, 10), 4, false);
  ASSERT_EQ(hashes.size(), 2u);
  EXPECT_EQ(hashes[0], "cf97adeedb59e05bfd73a2b4c2a8885708c4f4f70c84c64b27120e72ab733b72");
  EXPECT_EQ(hashes[1], "4ebfa8a1f3c341517621838c6e1b9aa350307e3f00b3cbd1a07ef740f54396d6");
}

TEST(PageHash, ChainsThePreviousDigestBeforeLittleEndianTokens) {
  // Tokens spanning all four bytes, so a byte-order mistake shows.
  std::vector<uint32_t> tokens;
  for (uint32_t i = 0; i < 3 * 64; ++i) tokens.push_back(0x01020304u * (i + 1) + 0xA0000000u);
  std::vector<std::vector<uint32_t>> units;
  for (uint32_t t : tokens) units.push_back({t});
  EXPECT_EQ(PageHashesHex(tokens, 64, false), ReferenceChain(units, 64));
}

TEST(PageHash, EagleHashesConsecutiveBigramsFirstThenSecond) {
  const std::vector<uint32_t> tokens = {7, 0xFFFFFFFFu, 3, 0x12345678u, 9, 11, 13, 17, 19};
  std::vector<std::vector<uint32_t>> bigrams;
  for (size_t i = 0; i + 1 < tokens.size(); ++i) bigrams.push_back({tokens[i], tokens[i + 1]});
  const std::vector<std::string> hashes = PageHashesHex(tokens, 4, true);
  ASSERT_EQ(hashes.size(), 2u);  // 8 bigrams
  EXPECT_EQ(hashes, ReferenceChain(bigrams, 4));
  EXPECT_NE(hashes, PageHashesHex(tokens, 4, false));
}

TEST(PageHash, EagleLongerThanItsStagingBufferMatchesTheReference) {
  // 200 bigrams per page: more than the 64 the hasher stages at once.
  const std::vector<uint32_t> tokens = Iota(1000, 401);
  std::vector<std::vector<uint32_t>> bigrams;
  for (size_t i = 0; i + 1 < tokens.size(); ++i) bigrams.push_back({tokens[i], tokens[i + 1]});
  EXPECT_EQ(PageHashesHex(tokens, 200, true), ReferenceChain(bigrams, 200));
}

TEST(PageHash, OnlyWholePagesAreHashed) {
  EXPECT_EQ(PageHashesHex(Iota(1, 11), 4, false).size(), 2u);
  EXPECT_EQ(PageHashesHex(Iota(1, 3), 4, false).size(), 0u);
  EXPECT_EQ(PageHashesHex({}, 4, false).size(), 0u);
  // Eagle has one unit fewer than tokens: 8 tokens are 7 bigrams, one page of 4.
  EXPECT_EQ(PageHashesHex(Iota(1, 8), 4, true).size(), 1u);
  EXPECT_EQ(PageHashesHex(Iota(1, 9), 4, true).size(), 2u);
  EXPECT_EQ(PageHashesHex(Iota(1, 1), 1, true).size(), 0u);
  EXPECT_EQ(PageHashesHex({}, 1, true).size(), 0u);
}

TEST(PageHash, WholePagesCountsUnitsNotTokensForEagle) {
  EXPECT_EQ(WholePages(10, 4, false), 2u);
  EXPECT_EQ(WholePages(9, 4, true), 2u);
  EXPECT_EQ(WholePages(8, 4, true), 1u);
  EXPECT_EQ(WholePages(0, 4, true), 0u);
  EXPECT_EQ(WholePages(10, 0, false), 0u);
}

TEST(PageHash, AnEarlierPageChangesEveryLaterHashButNotTheOtherWayRound) {
  std::vector<uint32_t> tokens = Iota(1, 12);
  const std::vector<std::string> before = PageHashesHex(tokens, 4, false);
  tokens[1] = 99;  // page 0
  const std::vector<std::string> after_first = PageHashesHex(tokens, 4, false);
  EXPECT_NE(after_first[0], before[0]);
  EXPECT_NE(after_first[1], before[1]);
  EXPECT_NE(after_first[2], before[2]);
  tokens = Iota(1, 12);
  tokens[9] = 99;  // page 2
  const std::vector<std::string> after_last = PageHashesHex(tokens, 4, false);
  EXPECT_EQ(after_last[0], before[0]);
  EXPECT_EQ(after_last[1], before[1]);
  EXPECT_NE(after_last[2], before[2]);
}

TEST(PageHash, HasherWalksTheSameChainAsTheHelper) {
  const std::vector<uint32_t> tokens = Iota(5, 64 * 5 + 3);
  PageHasher hasher(tokens, 64, false);
  ASSERT_EQ(hasher.pages(), 5u);
  const std::vector<std::string> expected = PageHashesHex(tokens, 64, false);
  for (size_t i = 0; i < hasher.pages(); ++i) {
    char hex[kPageHashHexLength];
    ToHex(hasher.Next(), hex);
    EXPECT_EQ(std::string(hex, sizeof hex), expected[i]) << i;
  }
}

TEST(PageHash, HexIsSixtyFourLowercaseCharacters) {
  PageDigest digest;
  for (size_t i = 0; i < digest.size(); ++i) digest[i] = static_cast<uint8_t>(i * 8 + 0x0F);
  char hex[kPageHashHexLength];
  ToHex(digest, hex);
  const std::string s(hex, sizeof hex);
  EXPECT_EQ(s.substr(0, 8), "0f171f27");
  EXPECT_EQ(s.substr(56), "eff7ff07");  // wraps past 0xff
  EXPECT_TRUE(IsPageHashHex(s));
}

TEST(PageHash, PageHashShapeIsExactlySixtyFourLowercaseHexCharacters) {
  const std::string good(64, 'a');
  EXPECT_TRUE(IsPageHashHex(good));
  EXPECT_TRUE(IsPageHashHex(PageHashesHex(Iota(1, 4), 4, false)[0]));
  EXPECT_FALSE(IsPageHashHex(std::string(63, 'a')));
  EXPECT_FALSE(IsPageHashHex(std::string(65, 'a')));
  EXPECT_FALSE(IsPageHashHex(""));
  std::string upper = good;
  upper[10] = 'A';
  EXPECT_FALSE(IsPageHashHex(upper));
  std::string other = good;
  other[63] = 'g';
  EXPECT_FALSE(IsPageHashHex(other));
}

}  // namespace
}  // namespace sci
