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

}  // namespace

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
  if (sighting_.first_deferred()) ResolveDeferredFirstPage();
  if (!sighting_.consults()) {
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
  sighting_.Resolve(found);  // decides the request at its first page
  return digest_;
}

const PageDigest& PageHasher::NextHashingFirst() {
  assert(next_page_ == 0);
  next_page_ = 1;
  HashPage(0);
  sighting_.DeferFirst();
  return digest_;
}

void PageHasher::ResolveDeferredFirstPage() {
  // digest_ still is the first page's.
  ComputeNextKey();
  PageDigest memoised;
  const bool found = memo_->Find(keys_.at[0], &memoised);
  if (!found) memo_->Insert(keys_.at[0], digest_);
  sighting_.Resolve(found);
}

void PageHasher::LookAhead(size_t pages) {
  if (!sighting_.seen_before()) return;
  const size_t until = std::min(this->pages(), next_page_ + std::min(pages, kMaxLookAhead));
  while (keys_known_ < until) {
    ComputeNextKey();
    memo_->Prefetch(keys_.at[(keys_known_ - 1) % kKeyRing]);
  }
}

std::vector<std::string> PageHashesHex(std::span<const uint32_t> tokens, uint32_t page_size, bool eagle) {
  PageHasher hasher(tokens, page_size, eagle);
  std::vector<std::string> hashes(hasher.pages(), std::string(kPageHashHexLength, '\0'));
  for (std::string& hash : hashes) ToHex(hasher.Next(), hash.data());
  return hashes;
}

}  // namespace sci
