// The router's question for a vLLM layout: which router blocks of a request
// are in the pool, and how long a prefix the engine would load from it
// (docs/vllm-family.md, "Chunks, groups and the answer"; Dynamo's semantics).
//
// A chunk is present when every key its group needs is present, looked up
// under one hold of the index's reader lock: a chunk is one instant, never
// two halves of two (index-semantics.md, "A page is one instant"). The
// event's group_id is never consulted: the second-generation master
// overwrites it with the KV-group index, so no vLLM answer trusts a group.
//
// Per block (CheckBlocks): block i, tokens [i*b, (i+1)*b), is a hit when,
// for every full-attention group, every chunk it overlaps lies wholly
// inside the request and is present. Other kinds of groups only bound the
// prefix; a layout with no full-attention group has no block hit.
//
// Prefix (CheckPrefix): the longest candidate L -- a multiple of the
// layout's alignment, never crediting the request's last token -- at which
// every group holds: full attention, every chunk ending at or before L;
// sliding window, the last window_chunks chunks ending at or before L;
// Mamba, the chunk ending exactly at L; and, without a full-attention
// group, some chunk found present (a layout of one-token windows needs none,
// and nothing vouches for such a prefix). In router blocks, L / b. Hashing
// stops at the first missing full-attention chunk: a prompt nobody stored
// costs one block hash and one lookup.
//
// Digests come from the querying thread's digest memo (query/digest_memo.h)
// when it has hashed the same blocks before, else from the chain
// (block_hash.h); per-thread scratch grows to the longest request seen and
// is reused, so once warm a query allocates nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "index/index.h"
#include "query/query_result.h"
#include "vllm/block_hash.h"
#include "vllm/layout.h"

namespace sci::vllm {

// Test seam: called before the lock hold in which chunk `chunk` of group
// `group` has its keys looked up.
struct ChunkQueryHooks {
  void (*before_chunk_keys)(void* user, size_t group, size_t chunk) = nullptr;
  void* user = nullptr;
};

// Where a query's block digests come from.
struct ChainSource {
  // The request's tokens (hashed here), or
  std::span<const uint32_t> tokens;
  RequestExtras extras;
  // digests the caller already holds, 32 bytes per whole hash block in
  // order (then `tokens` is empty and n_tokens says how long the request
  // is), or
  const uint8_t* digests = nullptr;
  size_t n_digests = 0;
  // the engine's 64-bit event hashes of them, resolved through the index.
  std::span<const uint64_t> event_hashes;
  size_t n_tokens = 0;  // with digests or event hashes
  bool by_digests = false;
  bool by_event_hashes = false;

  static ChainSource Tokens(std::span<const uint32_t> tokens, const RequestExtras& extras = {}) {
    ChainSource source;
    source.tokens = tokens;
    source.extras = extras;
    source.n_tokens = tokens.size();
    return source;
  }
  static ChainSource Digests(const uint8_t* digests, size_t n_digests, size_t n_tokens) {
    ChainSource source;
    source.digests = digests;
    source.n_digests = n_digests;
    source.n_tokens = n_tokens;
    source.by_digests = true;
    return source;
  }
  static ChainSource EventHashes(std::span<const uint64_t> hashes, size_t n_tokens) {
    ChainSource source;
    source.event_hashes = hashes;
    source.n_tokens = n_tokens;
    source.by_event_hashes = true;
    return source;
  }
};

// Router blocks a per-block query answers: n_tokens / block_size, or 0 when
// `block_size` is not the layout's main_event_block_size.
size_t BlocksToCheck(const Layout& layout, size_t n_tokens, uint32_t block_size);

// Per-block hits (see above). `hits` must hold BlocksToCheck(...) bytes.
// n_pages: router blocks; total_hits, prefix_hits: of the per-block hits.
PageQueryResult CheckBlocks(Index& index, const Layout& layout, const ChainSource& source, uint32_t block_size,
                            std::span<uint8_t> hits, const ChunkQueryHooks* hooks = nullptr);

// Dynamo's answer (see above): prefix_hits = total_hits = L / b;
// pages_examined: chunks looked up.
PageQueryResult CheckPrefix(Index& index, const Layout& layout, const ChainSource& source, uint32_t block_size,
                            const ChunkQueryHooks* hooks = nullptr);

// The tier query (docs/index-semantics.md, "Tiers"): tiers[i] = the tier of
// router block i as CheckBlocks sees it (the slowest of the full-attention
// chunks covering it; MediumTiers::kAbsent: no hit), and `answer`:
// prefix_pages[t] is Dynamo's answer with "present" read as "present at
// tier <= t". A chunk's tier is read in the hold that found its keys.
// `tiers` must hold BlocksToCheck(...) bytes. Counted as one query.
PageQueryResult CheckTiers(Index& index, const Layout& layout, const ChainSource& source, uint32_t block_size,
                           std::span<uint8_t> tiers, TierAnswer* answer, const ChunkQueryHooks* hooks = nullptr);

}  // namespace sci::vllm
