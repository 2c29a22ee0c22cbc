// sci::StrFormat (src/common/format.h): the library's formatting, which an
// allocation failure cannot turn into std::terminate as it does inside
// Debian's absl::StrFormat. Same output at every length, around its
// on-stack buffer's edge included.
#include "common/format.h"

#include <gtest/gtest.h>

#include <string>

namespace sci {
namespace {

TEST(Format, MatchesAbslAtEveryLengthAroundTheStackBuffer) {
  for (size_t len : {0, 1, 200, 250, 253, 254, 255, 256, 257, 300, 4096, 100000}) {
    const std::string body(len, 'k');
    EXPECT_EQ(sci::StrFormat("%s=%d", body, 7), absl::StrFormat("%s=%d", body, 7)) << len;
    std::string appended = "head:";
    sci::StrAppendFormat(&appended, "%s/%x", body, 255u);
    EXPECT_EQ(appended, "head:" + absl::StrFormat("%s/%x", body, 255u)) << len;
  }
}

TEST(Format, AnEmptyResultLeavesTheStringAsItWas) {
  std::string out = "x";
  sci::StrAppendFormat(&out, "%s", std::string());
  EXPECT_EQ(out, "x");
  EXPECT_EQ(sci::StrFormat("%s", ""), "");
}

}  // namespace
}  // namespace sci
