// The digest memo's domain of a vLLM request: what, besides its tokens, a
// block's digest depends on (the layout's algorithm and NONE_HASH, the
// request's extras), as the 128 bits that seed the memo key of its first
// block (chunk_query.cpp, Chain::MemoKey).
//
// Why 128 keyed bits, not a 64-bit hash of the extras. A memo entry stands
// for the digest of a run of tokens under one domain; a request whose domain
// equals another's is served that other request's digests. vLLM clients send
// a cache_salt precisely to keep tenants apart, and a LoRA name or a salt is
// the client's to choose: with a public 64-bit hash (1.2 used XXH3-64, which
// a 16-byte input inverts in closed form) a crafted salt took the domain of
// the requests without extras, and their digests with it -- false hits
// (issue #34, R2). Here a domain is the first 16 bytes of SHA-256 over a
// per-process random key and the full, length-prefixed extras: two
// different extras (or extras and none) share a domain with odds 2^-128
// even for an adversary who knows every function used, since the key is
// never disclosed. The layout's own domain (no extras) is keyed the same
// way, so no request can aim its tokens at another's memo key either.
//
// Cost: the layout's domain is made once, at Layout::Create; a request with
// extras pays one SHA-256 of a few dozen bytes, and only once its query
// first consults the memo (a prefix query of a prompt nobody stored never
// does).
#pragma once

#include <cstdint>

#include "vllm/block_hash.h"

namespace sci::vllm {

struct MemoDomain {
  uint64_t low = 0;   // seeds the XXH3-128 of the first block's tokens
  uint64_t high = 0;  // XORed into that key's low half
  friend bool operator==(const MemoDomain&, const MemoDomain&) = default;
};

// The domain of a request without extras under a layout of `algorithm`
// whose NONE_HASH is `none_hash`.
MemoDomain LayoutMemoDomain(HashAlgorithm algorithm, const BlockDigest& none_hash);

// The domain of a request with `extras` under a layout whose domain is
// `layout_domain`. Every field of the extras enters it, length-prefixed,
// with has_lora, has_salt and salt_is_lora_object: different extras give
// different domains even where the digests happen to agree (an empty salt),
// which costs a memo entry, never a false hit.
MemoDomain ExtrasMemoDomain(const MemoDomain& layout_domain, const RequestExtras& extras);

}  // namespace sci::vllm
