#include "query/digest.h"

#include <cstring>

#include "common/hex_lanes.h"

namespace sci {
namespace {

constexpr std::array<char[2], 256> MakeHexPairs() {
  std::array<char[2], 256> pairs{};
  constexpr char kDigits[] = "0123456789abcdef";
  for (size_t i = 0; i < 256; ++i) {
    pairs[i][0] = kDigits[i >> 4];
    pairs[i][1] = kDigits[i & 15];
  }
  return pairs;
}
[[maybe_unused]] constexpr std::array<char[2], 256> kHexPairs = MakeHexPairs();

}  // namespace

void ToHex(const PageDigest& digest, char* out) {
#if defined(__SSE2__)
  // Every page of a query is turned to hex (its keys and group id are built
  // from it): 16 bytes at a time, a quarter of the table loop's cost.
  const __m128i low_nibbles = _mm_set1_epi8(0x0F);
  for (size_t i = 0; i < digest.size(); i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(digest.data() + i));
    const __m128i high = _mm_and_si128(_mm_srli_epi16(v, 4), low_nibbles);
    const __m128i low = _mm_and_si128(v, low_nibbles);
    const auto ascii = [](__m128i nibbles) {
      // '0' + n, plus the gap from ':' to 'a' where n > 9.
      const __m128i letters = _mm_and_si128(_mm_cmpgt_epi8(nibbles, _mm_set1_epi8(9)), _mm_set1_epi8('a' - '0' - 10));
      return _mm_add_epi8(_mm_add_epi8(nibbles, _mm_set1_epi8('0')), letters);
    };
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), ascii(_mm_unpacklo_epi8(high, low)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i + 16), ascii(_mm_unpackhi_epi8(high, low)));
  }
#else
  for (size_t i = 0; i < digest.size(); ++i) std::memcpy(out + 2 * i, kHexPairs[digest[i]], 2);
#endif
}

bool IsPageHashHex(std::string_view s) {
  if (s.size() != kPageHashHexLength) return false;
#if defined(__SSE2__)
  int all = 0xFFFF;
  for (size_t i = 0; i < kPageHashHexLength; i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + i));
    all &= _mm_movemask_epi8(_mm_or_si128(DigitLanes(v), LowercaseHexLetterLanes(v)));
  }
  return all == 0xFFFF;
#else
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
#endif
}

}  // namespace sci
