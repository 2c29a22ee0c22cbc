// vLLM's block-hash chain (docs/vllm-family.md, "The block-hash chain";
// vLLM v1's hash_block_tokens):
//
//   H_i = hash((H_{i-1} if i > 0 else NONE_HASH, tuple(tokens of block i), extra_keys_i))
//   NONE_HASH = hash(PYTHONHASHSEED as a str)
//
// `hash` is SHA-256 of the tuple's pickle (protocol 5) or of its canonical
// CBOR. Only the shapes vLLM hashes are encoded -- a 32-byte bytes, a tuple
// of non-negative ints, None or a tuple of strings, a str -- byte for byte as
// CPython's pickle and cbor2 (canonical) write them; no general pickle or
// CBOR encoder is needed, and none is linked. SHA-256 is libcrypto's, as for
// SGLang's page hashes.
//
// CPython's corners, kept (testdata/vllm/pickle-corners.json has its own
// pickles of each): ids >= 2^31 are LONG1 (5 bytes: a sign byte); a str of
// 256+ bytes is BINUNICODE ('X', u32 length); the C pickler cuts a new FRAME
// past 64 KiB and writes a >= 64 KiB str outside any frame; the empty tuple
// is not memoized; pickle memoizes by identity (RequestExtras).
//
// A partial last block is never hashed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sci::vllm {

using BlockDigest = std::array<uint8_t, 32>;

enum class HashAlgorithm : uint8_t {
  kSha256 = 0,      // SHA-256 of pickle.dumps(x, protocol=5): vLLM's default
  kSha256Cbor = 1,  // SHA-256 of cbor2.dumps(x, canonical=True)
};

// The extra keys of a request (vLLM's generate_block_hash_extra_keys for a
// text-only request): a LoRA name on every block, a cache salt on block 0
// only. Block i's extra_keys is None when it gets neither, else the tuple of
// what it gets, LoRA name first. An empty salt counts as none: vLLM tests
// `request.cache_salt` for truth, so "" never reaches the hash.
struct RequestExtras {
  bool has_lora = false;
  std::string_view lora_name;  // UTF-8
  bool has_salt = false;
  std::string_view cache_salt;  // UTF-8
  // pickle memoizes by object identity, not by value: when the salt is the
  // very str object that is the LoRA name, block 0's pickle refers back to
  // it (BINGET) instead of writing it again. Equal strings from different
  // sources (a request's JSON, the LoRA registry) are different objects, so
  // equality alone never implies this; the caller states it. CBOR ignores it.
  bool salt_is_lora_object = false;
};

// NONE_HASH: hash(seed), seed being PYTHONHASHSEED as a Python str ("0").
BlockDigest NoneHash(HashAlgorithm algorithm, std::string_view python_hash_seed);

// The bytes `hash` reads for block `block_index` (its extra keys depend on
// whether it is block 0). For tests and tools; the hot path streams them
// (HashBlock) without building a string.
std::string EncodeBlock(HashAlgorithm algorithm, const BlockDigest& parent, std::span<const uint32_t> tokens,
                        const RequestExtras& extras, size_t block_index);

// H_i from its parent (NONE_HASH for block 0). Allocates nothing.
BlockDigest HashBlock(HashAlgorithm algorithm, const BlockDigest& parent, std::span<const uint32_t> tokens,
                      const RequestExtras& extras, size_t block_index);

// vLLM's GPU KV event hash of a block: the digest's low 64 bits,
// int.from_bytes(digest, "big") & (2**64 - 1), i.e. bytes 24..31 big-endian.
uint64_t EventHashOf(const BlockDigest& digest);

// Every whole block's digest of a request, in order. For tests and tools.
std::vector<BlockDigest> HashChain(HashAlgorithm algorithm, std::string_view python_hash_seed,
                                   std::span<const uint32_t> tokens, uint32_t hash_block_size,
                                   const RequestExtras& extras = {});

}  // namespace sci::vllm
