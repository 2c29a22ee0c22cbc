// Hex digits recognised 16 bytes at a time (SSE2, which every x86-64 has),
// for every check that reads a 64-digit page or chunk hash: a byte loop was
// 40% of a fast-path page looked up by its hash.
#pragma once

#if defined(__SSE2__)
#include <emmintrin.h>

namespace sci {

// 0xFF in each lane whose byte is '0'..'9'. Signed compares: a byte >= 0x80
// is negative, below both bounds.
inline __m128i DigitLanes(__m128i v) {
  return _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8('0' - 1)), _mm_cmplt_epi8(v, _mm_set1_epi8('9' + 1)));
}

// 0xFF in each lane whose byte is 'a'..'f' (OR the bytes with 0x20 first to
// accept 'A'..'F' too).
inline __m128i LowercaseHexLetterLanes(__m128i v) {
  return _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8('a' - 1)), _mm_cmplt_epi8(v, _mm_set1_epi8('f' + 1)));
}

}  // namespace sci
#endif
