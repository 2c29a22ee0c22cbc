// IsPageHashHex reads sixteen characters at a time: it must agree with the
// plain definition (exactly 64 characters, each 0-9 or a-f) for every byte
// value at every position, including bytes with the top bit set.
#include <gtest/gtest.h>

#include <string>

#include "sglang/page_hash.h"

namespace sci {
namespace {

bool PlainIsHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

TEST(PageHashShape, EveryByteValueAtEveryPositionIsJudgedLikeTheDefinition) {
  const std::string valid = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
  ASSERT_TRUE(IsPageHashHex(valid));
  for (size_t position = 0; position < valid.size(); ++position) {
    for (int value = 0; value < 256; ++value) {
      std::string s = valid;
      s[position] = static_cast<char>(value);
      ASSERT_EQ(IsPageHashHex(s), PlainIsHex(s[position])) << "byte " << value << " at " << position;
    }
  }
}

TEST(PageHashShape, NeighbouringBytesDoNotMaskEachOther) {
  // A bad byte next to bytes at the edges of the ranges ('0', '9', 'a', 'f').
  for (const char edge : {'0', '9', 'a', 'f'}) {
    for (const char bad : {'/', ':', '`', 'g', 'A', 'F', '\x7f', '\x80', '\xff', '\0'}) {
      std::string s(64, edge);
      EXPECT_TRUE(IsPageHashHex(s));
      for (size_t position = 0; position < 64; position += 7) {
        s[position] = bad;
        EXPECT_FALSE(IsPageHashHex(s)) << "'" << bad << "' among '" << edge << "'";
        s[position] = edge;
      }
    }
  }
}

TEST(PageHashShape, OnlySixtyFourCharactersCount) {
  const std::string valid(64, 'a');
  EXPECT_FALSE(IsPageHashHex(valid.substr(0, 63)));
  EXPECT_FALSE(IsPageHashHex(valid + "a"));
  EXPECT_FALSE(IsPageHashHex(std::string(56, 'a')));
  EXPECT_FALSE(IsPageHashHex(""));
}

}  // namespace
}  // namespace sci
