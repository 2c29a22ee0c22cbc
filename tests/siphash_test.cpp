// SipHash against its published vectors and CPython's, and the hashes the
// index keys with it: a table of deferred stores that keys built to share
// a bucket under std::hash do not crowd into one.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <set>
#include <string>

#include "common/process_secret.h"
#include "common/siphash.h"
#include "index/deferred_stores.h"

namespace sci {
namespace {

// The SipHash paper's key 00 01 .. 0f, its appendix's 15-byte message, and
// the reference implementation's vector for the empty message.
TEST(SipHash, TwoFourMatchesThePapersVectors) {
  const SipKey key{0x0706050403020100ull, 0x0F0E0D0C0B0A0908ull};
  std::string message(15, '\0');
  for (int i = 0; i < 15; ++i) message[i] = static_cast<char>(i);
  EXPECT_EQ(SipHash24(key, message), 0xA129CA6149BE45E5ull);
  EXPECT_EQ(SipHash24(key, ""), 0x726FDB47DD0E0E31ull);
}

// CPython 3.11 hashes bytes with SipHash-1-3; under PYTHONHASHSEED=0 its
// key is zero: `PYTHONHASHSEED=0 python3 -c "print(hex(hash(b'a') % 2**64))"`.
TEST(SipHash, OneThreeMatchesCPython) {
  const SipKey zero{};
  std::string fifteen(15, '\0');
  for (int i = 0; i < 15; ++i) fifteen[i] = static_cast<char>(i);
  EXPECT_EQ(SipHash13(zero, "a"), 0x407448D2B89B1813ull);
  EXPECT_EQ(SipHash13(zero, "abcdefgh"), 0x3F7B849C0B8E35EAull);
  EXPECT_EQ(SipHash13(zero, "hello world, sip"), 0x7FC0B9D0D55312C4ull);
  EXPECT_EQ(SipHash13(zero, fifteen), 0xF30EB725BB91C9EAull);
}

TEST(SipHash, SubkeysOfTwoPurposesDiffer) {
  const SipKey a = ProcessSubkey("tenant seed"), b = ProcessSubkey("slot prefix");
  EXPECT_FALSE(a.k0 == b.k0 && a.k1 == b.k1);
  EXPECT_EQ(ProcessSubkey("tenant seed").k0, a.k0) << "a purpose's key is stable within the process";
  // The whole name counts (a first form cut names at 63 bytes).
  const std::string stem(63, 'p');
  const SipKey one = ProcessSubkey(stem + "-one"), two = ProcessSubkey(stem + "-two");
  EXPECT_FALSE(one.k0 == two.k0 && one.k1 == two.k1);
}

// libstdc++'s std::hash<std::string> is MurmurHash64A under the fixed seed
// 0xc70f6907. Its step per 8-byte word w is h = (h ^ f(w)) * m with f a
// bijection, so for 16-byte strings any first word can be paired with the
// second word that brings h back to one value: as many strings as wanted,
// one hash, one bucket.
uint64_t InverseOdd(uint64_t a) {
  uint64_t x = a;
  for (int i = 0; i < 6; ++i) x *= 2 - a * x;
  return x;
}
std::string MurmurCollision(uint64_t first_word) {
  constexpr uint64_t m = 0xC6A4A7935BD1E995ull;
  const auto f = [&](uint64_t w) {
    w *= m;
    w ^= w >> 47;
    return w * m;
  };
  const auto f_inverse = [&](uint64_t y) {
    y *= InverseOdd(m);
    y ^= y >> 47;  // its own inverse: 47 >= 32
    return y * InverseOdd(m);
  };
  const uint64_t h0 = 0xC70F6907ull ^ (16 * m);
  const uint64_t h1 = (h0 ^ f(first_word)) * m;
  const uint64_t target = 0x0123456789ABCDEFull;  // h1 ^ f(second word), the same for all
  const uint64_t second_word = f_inverse(target ^ h1);
  std::string s(16, '\0');
  std::memcpy(s.data(), &first_word, 8);
  std::memcpy(s.data() + 8, &second_word, 8);
  return s;
}

TEST(DeferredStoresHash, KeysBuiltToShareAStandardHashAreSpread) {
  std::set<size_t> standard, keyed;
  for (uint64_t i = 0; i < 64; ++i) {
    const std::string id = MurmurCollision(0x6B65792D00000000ull + i);
    standard.insert(std::hash<std::string>{}(id));
    keyed.insert(DeferredStores::IdHash{}(id));
  }
  ASSERT_EQ(standard.size(), 1u) << "the construction collides under std::hash";
  EXPECT_EQ(keyed.size(), 64u) << "the deferred stores' table hashes them alike";
}

}  // namespace
}  // namespace sci
