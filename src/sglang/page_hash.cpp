#include "sglang/page_hash.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

// OpenSSL 3 deprecates the low-level SHA256_* calls in favour of EVP, but
// they are still exported and they are the fastest interface it offers for
// short messages. Measured on this machine (AMD EPYC with SHA extensions,
// OpenSSL 3.0, 169 pages of 64 tokens = 288-byte messages):
//   SHA256_Init/Update/Final            ~202 ns/page (1.43 GB/s)
//   EVP_DigestInit_ex2 on a reused ctx  ~236 ns/page
//   EVP_Digest with a pre-fetched MD    ~257 ns/page (needs a copy: one buffer)
//   SHA256() one-shot                   ~431 ns/page (fetches the MD each call)
// (bench/hash_bench.cpp measures them side by side: sha256/* in query_bench.)
// The low-level context also lives on the stack: no allocation, no
// thread-local EVP_MD_CTX to manage.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace sci {
namespace {

inline void StoreLE32(uint8_t* out, uint32_t v) {
  out[0] = static_cast<uint8_t>(v);
  out[1] = static_cast<uint8_t>(v >> 8);
  out[2] = static_cast<uint8_t>(v >> 16);
  out[3] = static_cast<uint8_t>(v >> 24);
}

// Hands `count` hashed units starting at token `first`, each written by
// `write_unit(token_index, out)` as `kUnitBytes` bytes, to `sink(bytes, n)`
// through a small stack buffer, so the hash sees few, large pieces.
template <size_t kUnitBytes, typename WriteUnit, typename Sink>
void StageUnits(size_t first, size_t count, WriteUnit write_unit, Sink sink) {
  constexpr size_t kBufferBytes = 512;
  constexpr size_t kUnitsPerChunk = kBufferBytes / kUnitBytes;
  uint8_t buffer[kBufferBytes];
  while (count > 0) {
    const size_t n = count < kUnitsPerChunk ? count : kUnitsPerChunk;
    for (size_t u = 0; u < n; ++u) write_unit(first + u, buffer + u * kUnitBytes);
    sink(buffer, n * kUnitBytes);
    first += n;
    count -= n;
  }
}

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

PageDigestMemo::PageDigestMemo(size_t entries) {
  const size_t capacity = std::bit_ceil(entries == 0 ? size_t{1} : entries);
  entries_ = std::make_unique<Entry[]>(capacity);
  mask_ = capacity - 1;
}

PageDigestMemo& PageDigestMemo::ForThisThread() {
  thread_local std::unique_ptr<PageDigestMemo> memo;
  if (memo == nullptr) memo = std::make_unique<PageDigestMemo>();
  return *memo;
}

void PageDigestMemo::Clear() {
  if (++epoch_ != 0) return;
  // The epoch wrapped (after 4 billion clears): entries of epoch 1 would look
  // current again. They would still be right, but a clear promises a memo
  // that has seen nothing, so wipe them.
  for (size_t i = 0; i <= mask_; ++i) entries_[i] = Entry{};
  epoch_ = 1;
}

template <typename Sink>
void PageHasher::ForEachUnitChunk(size_t page, Sink sink) const {
  const size_t first = page * page_size_;
  const uint32_t* tokens = tokens_.data();
  if (eagle_) {
    StageUnits<8>(first, page_size_, [tokens](size_t j, uint8_t* out) {
      StoreLE32(out, tokens[j]);
      StoreLE32(out + 4, tokens[j + 1]);
    }, sink);
  } else if constexpr (std::endian::native == std::endian::little) {
    // The tokens already are their little-endian bytes: hash them in place.
    sink(tokens + first, size_t{page_size_} * sizeof(uint32_t));
  } else {
    StageUnits<4>(first, page_size_, [tokens](size_t j, uint8_t* out) { StoreLE32(out, tokens[j]); }, sink);
  }
}

PageDigestMemo::Key PageHasher::MemoKey(size_t page, const PageDigestMemo::Key* parent) const {
  const uint64_t seed = PageDigestMemo::SeedOf(parent);
  XXH128_hash_t units;
  if (!eagle_ && std::endian::native == std::endian::little) {
    // One contiguous piece: the one-shot hash, which gives the same value
    // as the streaming one below and costs less.
    units = XXH3_128bits_withSeed(tokens_.data() + page * page_size_, size_t{page_size_} * sizeof(uint32_t), seed);
  } else {
    XXH3_state_t state;
    // reset_withSeed compares against the state's previous seed and secret:
    // give it known ones.
    state.seed = 0;
    state.extSecret = nullptr;
    XXH3_128bits_reset_withSeed(&state, seed);
    ForEachUnitChunk(page, [&state](const void* bytes, size_t n) { XXH3_128bits_update(&state, bytes, n); });
    units = XXH3_128bits_digest(&state);
  }
  return PageDigestMemo::KeyOf(parent, PageDigestMemo::Key{units.low64, units.high64});
}

void PageHasher::HashPage(size_t page) {
  SHA256_CTX ctx;
  SHA256_Init(&ctx);
  if (page > 0) SHA256_Update(&ctx, digest_.data(), digest_.size());
  ForEachUnitChunk(page, [&ctx](const void* bytes, size_t n) { SHA256_Update(&ctx, bytes, n); });
  SHA256_Final(digest_.data(), &ctx);
  if (memo_ != nullptr) memo_->CountHashed();
}

void PageHasher::ComputeNextKey() {
  const size_t page = keys_known_++;
  keys_.at[page % kKeyRing] = MemoKey(page, page == 0 ? nullptr : &keys_.at[(page - 1) % kKeyRing]);
}

const PageDigest& PageHasher::Next() {
  const size_t page = next_page_++;
  if (memo_use_ == MemoUse::kDeferred) ResolveDeferredFirstPage();
  if (memo_use_ == MemoUse::kBypass) {
    HashPage(page);
    return digest_;
  }
  if (keys_known_ <= page) ComputeNextKey();
  const PageDigestMemo::Key& key = keys_.at[page % kKeyRing];
  const bool found = memo_->Find(key, &digest_);
  if (!found) {
    HashPage(page);
    memo_->Insert(key, digest_);
  }
  if (memo_use_ == MemoUse::kUndecided) memo_use_ = found ? MemoUse::kLookUp : MemoUse::kBypass;
  return digest_;
}

const PageDigest& PageHasher::NextHashingFirst() {
  assert(next_page_ == 0);
  next_page_ = 1;
  HashPage(0);
  if (memo_use_ == MemoUse::kUndecided) memo_use_ = MemoUse::kDeferred;
  return digest_;
}

void PageHasher::ResolveDeferredFirstPage() {
  // digest_ still is the first page's.
  ComputeNextKey();
  PageDigest memoised;
  const bool found = memo_->Find(keys_.at[0], &memoised);
  if (!found) memo_->Insert(keys_.at[0], digest_);
  memo_use_ = found ? MemoUse::kLookUp : MemoUse::kBypass;
}

void PageHasher::LookAhead(size_t pages) {
  if (memo_use_ != MemoUse::kLookUp) return;
  const size_t until = std::min(this->pages(), next_page_ + std::min(pages, kMaxLookAhead));
  while (keys_known_ < until) {
    ComputeNextKey();
    memo_->Prefetch(keys_.at[(keys_known_ - 1) % kKeyRing]);
  }
}

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

std::vector<std::string> PageHashesHex(std::span<const uint32_t> tokens, uint32_t page_size, bool eagle) {
  PageHasher hasher(tokens, page_size, eagle);
  std::vector<std::string> hashes(hasher.pages(), std::string(kPageHashHexLength, '\0'));
  for (std::string& hash : hashes) ToHex(hasher.Next(), hash.data());
  return hashes;
}

}  // namespace sci
