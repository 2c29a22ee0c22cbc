// How one model's vLLM workers (MooncakeStoreConnector) name their chunks in
// Mooncake, and which chunks a prefix needs (docs/vllm-family.md).
//
// A chunk of KV-cache group g covers tokens [start, start + block_size_g)
// and is keyed by the sub-hash that ends it, H_{end / hash_block_size - 1};
// it is present when every key prefix of g holds "<prefix>@<hash hex>".
//
// Validated once, then immutable and shareable by any number of threads.
// Each key prefix is precomputed as its fingerprint secret: a chunk key is
// "<prefix>@<64 hex digits>", a hash-ended string (index/fingerprint.h), so
// its fingerprint costs one NH round over the digits, the same fingerprint
// the writer computes from the whole key.
#pragma once

#include "common/warn_once.h"
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "index/fingerprint.h"
#include "index/index.h"
#include "index/slot_plan.h"
#include "query/query_plans.h"
#include "query/digest.h"
#include "vllm/block_hash.h"
#include "vllm/layout_spec.h"
#include "vllm/memo_domain.h"

namespace sci::vllm {

// A chunk's object key is "<key prefix><kKeySeparator><chunk hash hex>".
inline constexpr std::string_view kKeySeparator = "@";

// Options for an index serving vLLM layouts: `options` with vLLM's keys'
// digests kept by their low 64 bits, so that queries by the engine's event
// hashes resolve (IndexOptions::digest_key_separator).
inline IndexOptions VllmIndexOptions(IndexOptions options = {}) {
  options.digest_key_separator = std::string(kKeySeparator);
  return options;
}

class Layout {
 public:
  // Bounds beyond which a descriptor cannot be a real deployment.
  static constexpr size_t kMaxGroups = 64;
  static constexpr size_t kMaxPrefixesPerGroup = 4096;
  static constexpr size_t kMaxKeyBytes = 1024;          // a chunk key, prefix + "@" + 64 digits
  static constexpr uint32_t kMaxAlignment = 1u << 24;  // tokens

  struct Group {
    GroupKind kind = GroupKind::kFullAttention;
    uint32_t block_size = 0;        // tokens per chunk
    uint32_t window_chunks = 0;     // kSlidingWindow: chunks a prefix needs
    uint32_t first_prefix = 0;      // into prefixes
    uint32_t n_prefixes = 0;
  };

  // Validates `spec`; on a bad one returns null and sets *error to the field
  // (named as in the descriptor: "groups[1].block_size ...").
  static std::unique_ptr<const Layout> Create(const LayoutSpec& spec, std::string* error);

  HashAlgorithm algorithm() const { return algorithm_; }
  // Never another layout's in the process (query/query_plans.h).
  uint64_t serial() const { return serial_; }
  const BlockDigest& none_hash() const { return none_hash_; }
  uint32_t hash_block_size() const { return hash_block_size_; }
  uint32_t router_block_size() const { return router_block_size_; }
  // Lets the first query with another block size warn (query_accounting.h).
  const WarnOnce& block_size_warning() const { return block_size_warning_; }
  // Candidate prefixes are multiples of this many tokens.
  uint32_t alignment() const { return alignment_; }
  // The token counts the engine can load from the pool are multiples of
  // this: with every group full attention, the lcm of the groups'
  // block_size (whole chunks, past the last whole router block); else the
  // alignment. It divides alignment().
  uint32_t load_granularity() const { return load_granularity_; }
  uint64_t tenant_seed() const { return tenant_seed_; }
  // The digest memo's domain of a request without extras: everything a
  // block hash depends on besides its tokens (algorithm, NONE_HASH), keyed
  // (memo_domain.h).
  const MemoDomain& memo_domain() const { return memo_domain_; }
  const std::vector<Group>& groups() const { return groups_; }
  // Whether one group is full attention: then a prefix is the leading run
  // of present chunks, and block hits mean what they say.
  bool has_full_attention() const { return has_full_attention_; }
  // Whether every group is full attention: then the engine loads any run of
  // whole chunks (load_granularity), not only aligned prefixes.
  bool full_attention_only() const { return full_attention_only_; }

  size_t n_prefixes() const { return prefixes_.size(); }
  std::string_view prefix(size_t i) const { return prefixes_[i]; }
  // The fingerprint of "<prefix i>@<hex of digest>", `digest` a chunk hash.
  // Inline: a query fingerprints every required key of every chunk, and the
  // usual prefix (no 64-digit run in it) costs two multiplies over the
  // digest's bytes, no hex (fingerprint.h).
  Fingerprint KeyFingerprint(size_t prefix, const BlockDigest& digest) const {
    if (hash_ended_[prefix] != 0) [[likely]] return HashEndedFingerprintOfBytes(secrets_[prefix], digest.data());
    return WholeKeyFingerprint(prefix, digest);
  }

  // The slots (index/slot_plan.h) of group `group`'s chunk keys: each
  // prefix, with its "@", before the digest. What a query resolves to a
  // slot plan.
  const std::vector<SlotName>& Slots(size_t group) const { return group_slots_[group]; }

  // Readable forms, for tests and tools (they allocate; the query does not).
  std::vector<std::string> KeysFor(size_t group, std::string_view chunk_hash_hex) const;

 private:
  WarnOnce block_size_warning_;
  Layout() = default;
  const uint64_t serial_ = NextLayoutSerial();
  // KeyFingerprint of a prefix that holds a 64-digit run: the key hashed whole.
  Fingerprint WholeKeyFingerprint(size_t prefix, const BlockDigest& digest) const;

  HashAlgorithm algorithm_ = HashAlgorithm::kSha256;
  BlockDigest none_hash_{};
  uint32_t hash_block_size_ = 0;
  uint32_t router_block_size_ = 0;
  uint32_t alignment_ = 0;
  uint32_t load_granularity_ = 0;
  uint64_t tenant_seed_ = 0;
  MemoDomain memo_domain_;
  bool has_full_attention_ = false;
  bool full_attention_only_ = false;
  std::vector<Group> groups_;
  std::vector<std::string> prefixes_;       // each with its "@"
  std::vector<std::vector<SlotName>> group_slots_;  // Slots() of each group
  std::vector<HashEndSecret> secrets_;      // per prefix, when hash_ended_[i]
  std::vector<uint8_t> hash_ended_;         // else the key is fingerprinted whole
};

}  // namespace sci::vllm
