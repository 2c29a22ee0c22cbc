// SGLang HiCache page hashes: SHA-256 chained over whole pages of tokens
// (../shared/docs/sglang-hicache.md, "Page hashes").
//
//   digest_i = SHA-256(digest_{i-1} || little-endian bytes of page i's tokens)
//
// With `eagle` the hashed units are the token bigrams (t0,t1), (t1,t2), ...
// (8 bytes each, first then second), so a request of n tokens has n-1 units.
//
// The hot path hashes page by page through PageHasher and never stores more
// than the previous digest: nothing is allocated, whatever the request length.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sci {

using PageDigest = std::array<uint8_t, 32>;

inline constexpr size_t kPageHashHexLength = 64;

// Whole pages in a request of `n_tokens` tokens.
inline size_t WholePages(size_t n_tokens, uint32_t page_size, bool eagle) {
  if (page_size == 0) return 0;
  const size_t units = eagle ? (n_tokens == 0 ? 0 : n_tokens - 1) : n_tokens;
  return units / page_size;
}

// Walks the chained digests of one request, page after page. Cheap to
// construct (it holds only views and the previous digest); not thread-safe,
// so each query owns one.
class PageHasher {
 public:
  PageHasher(std::span<const uint32_t> tokens, uint32_t page_size, bool eagle)
      : tokens_(tokens), page_size_(page_size), eagle_(eagle) {}

  size_t pages() const { return WholePages(tokens_.size(), page_size_, eagle_); }

  // Digest of the next page. Call at most pages() times.
  const PageDigest& Next();

 private:
  std::span<const uint32_t> tokens_;
  uint32_t page_size_;
  bool eagle_;
  size_t next_page_ = 0;
  PageDigest digest_{};
};

// Writes the 64 lowercase hex characters of `digest` to `out` (no NUL).
void ToHex(const PageDigest& digest, char* out);

// Whether `s` could be a page hash: exactly 64 lowercase hex characters.
bool IsPageHashHex(std::string_view s);

// Every page hash of a request, as hex. For tests and tools, not the hot path.
std::vector<std::string> PageHashesHex(std::span<const uint32_t> tokens, uint32_t page_size, bool eagle);

}  // namespace sci
