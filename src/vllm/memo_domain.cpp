#include "vllm/memo_domain.h"

#include "common/process_secret.h"

#include <array>
#include <cstring>
#include <string_view>

// The low-level SHA256_* calls, as block_hash.cpp (deprecated by OpenSSL 3,
// still exported, the fastest for short messages, and no allocation).
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

namespace sci::vllm {
namespace {

using Key = std::array<uint8_t, 32>;

// The process's memo key (common/process_secret.h): an adversary who
// cannot see it cannot aim a request at another's domain.
const Key& ProcessKey() { return ProcessSecret(); }

// SHA-256 over the key and a domain-separation tag, then the caller's fields.
class DomainHash {
 public:
  explicit DomainHash(uint8_t tag) {
    SHA256_Init(&ctx_);
    SHA256_Update(&ctx_, ProcessKey().data(), ProcessKey().size());
    SHA256_Update(&ctx_, &tag, 1);
  }
  void Bytes(const void* data, size_t n) { SHA256_Update(&ctx_, data, n); }
  void Word(uint64_t v) {
    uint8_t le[8];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(v >> (8 * i));
    Bytes(le, sizeof le);
  }
  // Length first: no two different strings (or string splits) encode alike.
  void String(std::string_view s) {
    Word(s.size());
    Bytes(s.data(), s.size());
  }
  MemoDomain Finish() {
    uint8_t digest[SHA256_DIGEST_LENGTH];
    SHA256_Final(digest, &ctx_);
    MemoDomain domain;
    std::memcpy(&domain.low, digest, 8);
    std::memcpy(&domain.high, digest + 8, 8);
    return domain;
  }

 private:
  SHA256_CTX ctx_;
};

constexpr uint8_t kLayoutTag = 1;
constexpr uint8_t kExtrasTag = 2;

}  // namespace

MemoDomain LayoutMemoDomain(HashAlgorithm algorithm, const BlockDigest& none_hash) {
  DomainHash hash(kLayoutTag);
  hash.Word(static_cast<uint64_t>(algorithm));
  hash.Bytes(none_hash.data(), none_hash.size());
  return hash.Finish();
}

MemoDomain ExtrasMemoDomain(const MemoDomain& layout_domain, const RequestExtras& extras) {
  DomainHash hash(kExtrasTag);
  hash.Word(layout_domain.low);
  hash.Word(layout_domain.high);
  const uint8_t flags = static_cast<uint8_t>((extras.has_lora ? 1 : 0) | (extras.has_salt ? 2 : 0) |
                                             (extras.salt_is_lora_object ? 4 : 0));
  hash.Bytes(&flags, 1);
  hash.String(extras.has_lora ? extras.lora_name : std::string_view());
  hash.String(extras.has_salt ? extras.cache_salt : std::string_view());
  return hash.Finish();
}

}  // namespace sci::vllm
