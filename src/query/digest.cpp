#include "query/digest.h"

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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
  // A byte loop was 40% of a fast-path page looked up by hash: check 16
  // characters at a time with SSE2 (every x86-64 has it).
#if defined(__SSE2__)
  int all = 0xFFFF;
  for (size_t i = 0; i < kPageHashHexLength; i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + i));
    // Signed compares: a byte >= 0x80 is negative, below '0' and 'a' alike.
    const __m128i digit = _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8('0' - 1)),
                                        _mm_cmplt_epi8(v, _mm_set1_epi8('9' + 1)));
    const __m128i letter = _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8('a' - 1)),
                                         _mm_cmplt_epi8(v, _mm_set1_epi8('f' + 1)));
    all &= _mm_movemask_epi8(_mm_or_si128(digit, letter));
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
