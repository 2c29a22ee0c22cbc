#include "vllm/chunk_query.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "common/thread_owned.h"
#include "index/object_store.h"
#include "query/digest.h"
#include "query/digest_memo.h"
#include "query/query_accounting.h"
#include "query/query_plans.h"
#include "query/round_pipeline.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace sci::vllm {
namespace {

// Chunks whose keys are fingerprinted, then prefetched together under one
// reader hold and checked in the next one, a round ahead: their cache
// misses overlap each other instead of queueing.
constexpr size_t kChunksPerRound = 16;

// Chunks in a round of the prefix walk (FullAttentionRun): hashed from the
// tokens, or given as hashes (then fingerprinting is all a miss wastes).
constexpr size_t kTokenRound = 4;
constexpr size_t kGivenRound = 8;
constexpr size_t kMaxRound = std::max(kTokenRound, kGivenRound);

// A chunk's state in a query's memory of what it looked up: unknown,
// absent, or present at a tier (kPresentAt + the slowest of its keys'
// tiers, read in the hold that found them: medium_tiers.h).
using Presence = uint8_t;
constexpr Presence kUnknown = 0;
constexpr Presence kAbsent = 1;
constexpr Presence kPresentAt = 2;

// A chunk's presence from its tier (Index::Reader::PageTier).
Presence PresenceFrom(uint8_t tier) {
  return tier == MediumTiers::kAbsent ? kAbsent : static_cast<Presence>(kPresentAt + tier);
}

// Which plan a chunk's entry fingerprints were computed from (ChunkQuery::
// FingerprintChunk): the group plan's version then, and how many.
struct EntryKeys {
  uint32_t version = 0;  // 0: none computed (the plan was not resolved yet)
  uint32_t n = 0;
};

// A block of the chain: its digest and whether it is known.
struct ChainBlock {
  BlockDigest digest;
  uint8_t known = 0;  // by event hash: 0 when unresolved or ambiguous
};

// One querying thread's buffers, grown to the longest request it has seen
// and reused: a warm query allocates nothing.
struct Scratch {
  // The chain, as far as computed. One vector, so that growing it is all or
  // nothing: with the digests and their known flags apart, a resize that
  // threw between the two left the flags shorter than the digests, and the
  // next query of that length wrote past them (issue #34, R5).
  std::vector<ChainBlock> chain;
  std::vector<Fingerprint> keys;         // a round of chunks' entry fingerprints (ObjectStore::PageKeys)
  std::vector<Presence> presence;        // per (group, chunk), groups one after the other
  std::vector<size_t> presence_at;       // group -> its first entry in presence
  std::vector<size_t> next_chunk;        // per group: the prefix walk's next chunk
  std::vector<size_t> chunks_inside;     // per group: ChunksInside, computed once a query
  std::vector<size_t> blocks_per_chunk;  // per group: hash blocks a chunk spans
  std::vector<Fingerprint> walk_keys;    // the prefix walk's chunks ahead
};

// A query's scratch: its thread's, or one of its own when the thread's is
// in use by a query this one is nested in (a hook or log callback that
// queries), or was freed by the thread's exit (common/thread_owned.h). A
// nested query that wrote its chain and round fingerprints into the outer
// query's scratch had the outer one answer a chunk by another request's
// fingerprints: a false hit, found by a review (I59).
class ScratchLease {
 public:
  ScratchLease() {
    ThreadScratch* mine = ThreadOwned<ThreadScratch>::Get();
    if (mine != nullptr && !mine->in_use) {
      mine_ = mine;
      mine_->in_use = true;
      scratch_ = &mine_->scratch;
    } else {
      owned_ = std::make_unique<Scratch>();
      scratch_ = owned_.get();
    }
  }
  ~ScratchLease() {
    if (mine_ != nullptr) mine_->in_use = false;
  }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  Scratch& operator*() const { return *scratch_; }

 private:
  struct ThreadScratch {
    Scratch scratch;
    bool in_use = false;
  };
  ThreadScratch* mine_ = nullptr;
  std::unique_ptr<Scratch> owned_;
  Scratch* scratch_ = nullptr;
};

// The block digests of one request, computed as far as asked.
class Chain {
 public:
  // `defer_first`: a prefix query's (HashFromTokens).
  Chain(Index& index, const Layout& layout, const ChainSource& source, Scratch& scratch, bool defer_first)
      : index_(index), layout_(layout), source_(source), scratch_(scratch), defer_first_(defer_first) {
    const size_t whole_blocks = source.n_tokens / layout.hash_block_size();
    if (source.by_digests) {
      available_ = std::min(whole_blocks, source.n_digests);
    } else if (source.by_event_hashes) {
      available_ = std::min(whole_blocks, source.event_hashes.size());
    } else {
      available_ = whole_blocks;
    }
    if (scratch_.chain.size() < available_) scratch_.chain.resize(available_);
    memo_ = PageDigestMemo::ForThisThread();
    if (memo_ == nullptr) {
      // The thread is exiting and its memo is gone: a one-entry memo of
      // this query's own (exact at any size).
      own_memo_ = std::make_unique<PageDigestMemo>(1);
      memo_ = own_memo_.get();
    }
  }

  // Whole hash blocks the request has (digests beyond it are not asked for).
  size_t available() const { return available_; }

  // Makes block `block`'s digest (and every one before it) known; false if
  // it cannot be (an event hash the index cannot resolve to one digest).
  bool Ensure(size_t block) {
    while (computed_ <= block) Compute(computed_++);
    return scratch_.chain[block].known != 0;
  }
  const BlockDigest& Digest(size_t block) const { return scratch_.chain[block].digest; }
  size_t blocks_computed() const { return computed_; }
  // Whether the digests are hashed here from tokens (not given).
  bool hashes_tokens() const { return !source_.by_digests && !source_.by_event_hashes; }

 private:
  // The memo's domain for this request (memo_domain.h): the layout's, or
  // with extras a keyed digest of them, made the first time the memo is
  // consulted (a prefix query of a prompt nobody stored never is).
  const MemoDomain& Domain() {
    if (!domain_known_) {
      const RequestExtras& extras = source_.extras;
      domain_ = extras.has_lora || extras.has_salt ? ExtrasMemoDomain(layout_.memo_domain(), extras)
                                                    : layout_.memo_domain();
      domain_known_ = true;
    }
    return domain_;
  }

  void Compute(size_t block) {
    BlockDigest& digest = scratch_.chain[block].digest;
    uint8_t& known = scratch_.chain[block].known;
    known = 1;
    if (source_.by_digests) {
      std::memcpy(digest.data(), source_.digests + block * digest.size(), digest.size());
    } else if (source_.by_event_hashes) {
      known = index_.DigestOfEventHash(layout_.tenant_seed(), source_.event_hashes[block], &digest) ? 1 : 0;
    } else {
      HashFromTokens(block, digest);
    }
  }

  // The memo is looked up as MemoSighting says (query/digest_memo.h); a
  // prefix query defers the first block's lookup to its second block.
  void HashFromTokens(size_t block, BlockDigest& digest) {
    const uint32_t size = layout_.hash_block_size();
    const std::span<const uint32_t> units = source_.tokens.subspan(block * size, size);
    const BlockDigest& parent = block == 0 ? layout_.none_hash() : scratch_.chain[block - 1].digest;
    if (block == 0 && defer_first_) {
      digest = HashBlock(layout_.algorithm(), parent, units, source_.extras, block);
      memo_->CountHashed();
      sighting_.DeferFirst();
      return;
    }
    if (sighting_.first_deferred()) ResolveDeferredFirst();
    if (sighting_.consults()) {
      key_ = MemoKey(block, units);
      const bool found = memo_->Find(key_, &digest);
      sighting_.Resolve(found);
      if (found) return;
      digest = HashBlock(layout_.algorithm(), parent, units, source_.extras, block);
      memo_->CountHashed();
      memo_->Insert(key_, digest);
      return;
    }
    digest = HashBlock(layout_.algorithm(), parent, units, source_.extras, block);
    memo_->CountHashed();
  }

  // The memo key of block `block` (key_: its parent's, for block > 0).
  // Block 0's is seeded by the domain as if it were a parent key: the
  // XXH3-128 of its units seeded with the domain's low half, the high half
  // XORed in (PageDigestMemo::KeyOf), so all 128 bits of it count.
  PageDigestMemo::Key MemoKey(size_t block, std::span<const uint32_t> units) {
    if (block == 0) {
      const MemoDomain& domain = Domain();
      const PageDigestMemo::Key parent{domain.low, domain.high};
      const XXH128_hash_t units_hash = XXH3_128bits_withSeed(units.data(), units.size_bytes(), domain.low);
      return PageDigestMemo::KeyOf(&parent, PageDigestMemo::Key{units_hash.low64, units_hash.high64});
    }
    const XXH128_hash_t units_hash = XXH3_128bits_withSeed(units.data(), units.size_bytes(), PageDigestMemo::SeedOf(&key_));
    return PageDigestMemo::KeyOf(&key_, PageDigestMemo::Key{units_hash.low64, units_hash.high64});
  }

  // The first block, hashed without the memo, is looked up now that the
  // query goes on: found, the request was seen before; else it is memoised
  // as the request's sighting.
  void ResolveDeferredFirst() {
    key_ = MemoKey(0, source_.tokens.subspan(0, layout_.hash_block_size()));
    BlockDigest memoised;
    const bool found = memo_->Find(key_, &memoised);
    if (!found) memo_->Insert(key_, scratch_.chain[0].digest);
    sighting_.Resolve(found);
  }

  Index& index_;
  const Layout& layout_;
  const ChainSource& source_;
  Scratch& scratch_;
  PageDigestMemo* memo_ = nullptr;
  std::unique_ptr<PageDigestMemo> own_memo_;  // only while the thread exits
  MemoDomain domain_;
  bool domain_known_ = false;
  MemoSighting sighting_{true};
  const bool defer_first_;
  PageDigestMemo::Key key_{};
  size_t available_ = 0;
  size_t computed_ = 0;
};

// One query: the chain, what it looked up, and how. kTiers: a tier query's,
// whose chunks are looked up with their tier (a plain query's read as tier 0,
// with none of that code in its instantiation).
template <bool kTiers = false>
class ChunkQuery {
 public:
  ChunkQuery(Index& index, const Layout& layout, const ChainSource& source, const ChunkQueryHooks* hooks, bool prefix)
      : index_(index),
        layout_(layout),
        scratch_(*scratch_lease_),
        chain_(index, layout, source, scratch_, /*defer_first=*/prefix),
        plans_(index, layout.serial(), layout.groups().size()),
        hooks_(hooks),
        n_tokens_(source.n_tokens) {
    // Every group's chunks that end inside the request, and the divisions
    // the walks would otherwise repeat per chunk, made once.
    size_t entries = 0;
    const size_t groups = layout.groups().size();
    scratch_.presence_at.resize(groups);
    scratch_.chunks_inside.resize(groups);
    scratch_.blocks_per_chunk.resize(groups);
    for (size_t g = 0; g < groups; ++g) {
      const uint32_t size = layout.groups()[g].block_size;
      scratch_.blocks_per_chunk[g] = size / layout.hash_block_size();
      // Chunks of group g that end inside the request and whose digest the
      // source has: all a query can look up, so all it remembers (a
      // caller's n_tokens, with the hashes given, bounds nothing).
      scratch_.chunks_inside[g] = std::min(n_tokens_ / size, chain_.available() / scratch_.blocks_per_chunk[g]);
      scratch_.presence_at[g] = entries;
      entries += scratch_.chunks_inside[g];
    }
    if (scratch_.presence.size() < entries) scratch_.presence.resize(entries);

    std::fill(scratch_.presence.begin(), scratch_.presence.begin() + static_cast<std::ptrdiff_t>(entries), kUnknown);
    const size_t max_keys = std::max<size_t>(kChunksPerRound * 16, MaxPrefixesPerGroup());
    if (scratch_.keys.size() < 2 * max_keys) scratch_.keys.resize(2 * max_keys);
    const size_t walk_keys = 2 * kMaxRound * std::max<size_t>(1, MaxPrefixesPerGroup());
    if (scratch_.walk_keys.size() < walk_keys) scratch_.walk_keys.resize(walk_keys);
  }

  // From now on a chunk counts as present only at tier <= `tier` (a tier
  // query's prefix at each tier; by default every tier counts).
  void LimitTier(uint8_t tier) { max_tier_ = tier; }

  // Per-block hits (CheckBlocks); in a tier query hits[i] is block i's tier
  // (MediumTiers::kAbsent: not present) instead of 1 or 0.
  PageQueryResult Blocks(std::span<uint8_t> hits) {
    PageQueryResult result;
    const uint32_t b = layout_.router_block_size();
    result.n_pages = n_tokens_ / b;
    if (!layout_.has_full_attention()) {
      std::fill(hits.begin(), hits.begin() + static_cast<std::ptrdiff_t>(result.n_pages),
                kTiers ? MediumTiers::kAbsent : uint8_t{0});
      return result;
    }
    // Every full-attention chunk a block overlaps, looked up in rounds.
    const size_t covered = result.n_pages * b;
    for (size_t g = 0; g < layout_.groups().size(); ++g) {
      const Layout::Group& group = layout_.groups()[g];
      if (group.kind != GroupKind::kFullAttention) continue;
      const size_t chunks = std::min((covered + group.block_size - 1) / group.block_size, ChunksInside(g));
      LookUpChunks(g, chunks);
    }
    HitTally tally;
    for (size_t i = 0; i < result.n_pages; ++i) {
      const uint8_t tier = BlockTier(i);
      const bool hit = tier != MediumTiers::kAbsent;
      hits[i] = kTiers ? tier : hit ? 1 : 0;
      tally.Add(hit, result);
    }
    full_attention_known_ = true;
    return result;
  }

  // Dynamo's answer (CheckPrefix), and in tokens what the engine loads.
  PageQueryResult Prefix() {
    PageQueryResult result;
    const uint32_t b = layout_.router_block_size();
    result.n_pages = n_tokens_ / b;
    // The engine computes at least the last token: at most n - 1 tokens
    // load, and at most (n - 1) / b blocks are credited.
    const size_t loadable = n_tokens_ == 0 ? 0 : n_tokens_ - 1;
    const size_t credited = loadable / b * b;
    // No candidate past the digests the source has can hold (its chunks
    // are not inside): with the hashes given, n_tokens may say far more.
    const size_t available = chain_.available() * layout_.hash_block_size();
    // The tokens the engine would load at its own granularity (with full
    // attention alone, whole chunks past the last whole router block).
    const uint32_t granularity = layout_.load_granularity();
    size_t limit = std::min(credited, available);
    size_t run_in_chunks = 0;  // the full-attention run, at the granularity
    if (layout_.has_full_attention()) {
      // One walk serves both answers: it goes as far as either may reach
      // (no further than the blocks for the usual layout, whose chunk is
      // the router's block).
      const size_t reach = std::min(std::max(credited, loadable / granularity * granularity), available);
      const size_t run = full_attention_known_ ? FullAttentionRunFromPresence(reach) : FullAttentionRun(reach);
      limit = std::min(limit, run);
      run_in_chunks = std::min(run, reach) / granularity * granularity;
    }
    size_t answer = 0;
    for (size_t candidate = limit / layout_.alignment() * layout_.alignment(); candidate > 0;
         candidate -= layout_.alignment()) {
      if (OtherGroupsHold(candidate)) {
        answer = candidate;
        break;
      }
    }
    result.prefix_hits = result.total_hits = answer / b;
    // Only a layout of full attention alone loads past its alignment
    // (load_granularity): every chunk of its run is present, so the run's
    // whole granules load. Else the engine loads the aligned answer.
    result.prefix_tokens = layout_.full_attention_only() ? std::max(answer, run_in_chunks) : answer;
    result.pages_examined = chunks_looked_up_;
    return result;
  }

  size_t chunks_looked_up() const { return chunks_looked_up_; }

 private:
  size_t MaxPrefixesPerGroup() const {
    size_t most = 0;
    for (const Layout::Group& group : layout_.groups()) most = std::max<size_t>(most, group.n_prefixes);
    return most;
  }
  // Chunks of group g that end inside the request (and whose digest the
  // source has).
  size_t ChunksInside(size_t g) const { return scratch_.chunks_inside[g]; }
  // The hash block whose digest keys chunk `chunk` of group g.
  size_t KeyBlock(size_t g, size_t chunk) const { return (chunk + 1) * scratch_.blocks_per_chunk[g] - 1; }
  Presence& PresenceOf(size_t g, size_t chunk) { return scratch_.presence[scratch_.presence_at[g] + chunk]; }
  // Chunk `chunk` of group g (its digest known: FingerprintChunk), looked
  // up in `reader`'s hold: every key of it read at one instant, one entry
  // per bank of its group's plan. `keys`: its entry fingerprints, used if
  // computed from the plan as it stands.
  Presence CheckChunk(const Index::Reader& reader, size_t g, size_t chunk, const Fingerprint* keys,
                      const EntryKeys& computed) {
    const SlotPlan& plan = plans_->Current(reader, g, layout_.Slots(g));
    std::span<const Fingerprint> page_keys;
    if (computed.version == plans_->version(g) && computed.n == plan.banks().size()) {
      page_keys = std::span<const Fingerprint>(keys, computed.n);
    }
    const uint8_t tier = reader.PageTier(layout_.tenant_seed(), chain_.Digest(KeyBlock(g, chunk)), plan, page_keys);
    // A plain query reads every present chunk as tier 0 (Counts).
    if constexpr (!kTiers) return tier == MediumTiers::kAbsent ? kAbsent : kPresentAt;
    return PresenceFrom(tier);
  }
  void Prefetch(const Index::Reader& reader, const Fingerprint* keys, const EntryKeys& computed) const {
    if (computed.n > 0) reader.PrefetchPage(std::span<const Fingerprint>(keys, computed.n));
  }
  // Whether a chunk's presence counts: present, at a tier LimitTier allows.
  bool Counts(Presence presence) const {
    return presence >= kPresentAt && static_cast<uint32_t>(presence - kPresentAt) <= max_tier_;
  }

  // Makes chunk `chunk` of group g's digest known, and writes the
  // fingerprints of the entries its group's plan reads to `out` (room for
  // the group's n_prefixes: a plan reads at most one entry per key),
  // saying in `computed` from which plan; none before the plan is first
  // resolved. No lock held. False when its digest cannot be known (then
  // it is absent).
  bool FingerprintChunk(size_t g, size_t chunk, Fingerprint* out, EntryKeys* computed) {
    const size_t block = KeyBlock(g, chunk);
    *computed = EntryKeys{};
    if (!chain_.Ensure(block)) return false;
    const SlotPlan& plan = plans_->Last(g);
    if (plans_->version(g) != 0 && plan.banks().size() <= layout_.groups()[g].n_prefixes) {
      ObjectStore::PageKeys(layout_.tenant_seed(), chain_.Digest(block), plan, out);
      *computed = EntryKeys{plans_->version(g), static_cast<uint32_t>(plan.banks().size())};
    }
    return true;
  }

  // Looks up chunks [0, chunks) of group g through the shared pipeline
  // (ChunkRounds): each round's keys are fingerprinted (hashing the chain as
  // far as they need), prefetched, and checked in the next hold, one
  // chunk's keys in one hold.
  void LookUpChunks(size_t g, size_t chunks) {
    ChunkRounds rounds(*this, g, chunks);
    RunRounds(index_, rounds);
  }

  // A round of LookUpChunks: consecutive chunks of one group.
  struct ChunkRound {
    size_t first = 0;  // its first chunk
    size_t n = 0;
    bool ok[kChunksPerRound] = {};  // the chunk's digest is known
    EntryKeys computed[kChunksPerRound];
    Fingerprint* keys = nullptr;     // the group's n_prefixes per chunk
  };

  // LookUpChunks' steps in the shared pipeline (query/round_pipeline.h).
  class ChunkRounds {
   public:
    static constexpr bool kProbes = false;
    using Round = ChunkRound;

    ChunkRounds(ChunkQuery& query, size_t g, size_t chunks)
        : query_(query),
          g_(g),
          n_prefixes_(query.layout_.groups()[g].n_prefixes),
          chunks_(chunks),
          per_round_(std::max<size_t>(1, std::min(kChunksPerRound, query.scratch_.keys.size() / 2 / n_prefixes_))) {}

    void Init(Round& round, size_t slot) {
      round.keys = query_.scratch_.keys.data() + slot * (query_.scratch_.keys.size() / 2);
    }
    bool empty(const Round& round) const { return round.n == 0; }
    size_t Prepare(Round& round) {
      round.first = next_;
      round.n = next_ < chunks_ ? std::min(per_round_, chunks_ - next_) : 0;
      for (size_t i = 0; i < round.n; ++i) {
        round.ok[i] = query_.FingerprintChunk(g_, round.first + i, round.keys + i * n_prefixes_, &round.computed[i]);
      }
      next_ += round.n;
      return round.n;
    }
    void BeforeCheck(const Round& round) {
      const ChunkQueryHooks* hooks = query_.hooks_;
      if (hooks == nullptr || hooks->before_chunk_keys == nullptr) return;
      for (size_t i = 0; i < round.n; ++i) {
        if (round.ok[i]) hooks->before_chunk_keys(hooks->user, g_, round.first + i);
      }
    }
    void Prefetch(const Index::Reader& reader, const Round& round) {
      for (size_t i = 0; i < round.n; ++i) {
        if (round.ok[i]) query_.Prefetch(reader, round.keys + i * n_prefixes_, round.computed[i]);
      }
    }
    void Check(const Index::Reader& reader, const Round& round) {
      for (size_t i = 0; i < round.n; ++i) {
        query_.PresenceOf(g_, round.first + i) =
            round.ok[i] ? query_.CheckChunk(reader, g_, round.first + i, round.keys + i * n_prefixes_, round.computed[i])
                        : kAbsent;
      }
    }
    bool Answer(const Round& round) {
      query_.chunks_looked_up_ += round.n;
      return true;
    }

   private:
    ChunkQuery& query_;
    const size_t g_;
    const uint32_t n_prefixes_;
    const size_t chunks_;
    const size_t per_round_;
    size_t next_ = 0;
  };

  // One chunk, looked up on its own (the prefix's walk): its keys under one hold.
  bool ChunkPresent(size_t g, size_t chunk) {
    Presence& presence = PresenceOf(g, chunk);
    if (presence != kUnknown) return Counts(presence);
    Fingerprint* keys = scratch_.keys.data();
    presence = kAbsent;
    EntryKeys computed;
    if (FingerprintChunk(g, chunk, keys, &computed)) {
      if (hooks_ != nullptr && hooks_->before_chunk_keys != nullptr) hooks_->before_chunk_keys(hooks_->user, g, chunk);
      const Index::Reader reader(index_);
      presence = CheckChunk(reader, g, chunk, keys, computed);
    }
    ++chunks_looked_up_;
    return Counts(presence);
  }

  // The tier of router block `block`: the slowest among the chunks of every
  // full-attention group covering it (looked up already by Blocks);
  // MediumTiers::kAbsent when one is not present (or there is none).
  uint8_t BlockTier(size_t block) {
    uint8_t tier = 0;
    const size_t b = layout_.router_block_size();
    for (size_t g = 0; g < layout_.groups().size(); ++g) {
      const Layout::Group& group = layout_.groups()[g];
      if (group.kind != GroupKind::kFullAttention) continue;
      // Chunks as long as a router block (the usual layout) need no
      // division: block i is chunk i.
      const bool one_to_one = group.block_size == b;
      const size_t first = one_to_one ? block : block * b / group.block_size;
      const size_t last = one_to_one ? block : ((block + 1) * b - 1) / group.block_size;
      if (last >= ChunksInside(g)) return MediumTiers::kAbsent;  // a chunk past the request's end
      for (size_t chunk = first; chunk <= last; ++chunk) {
        const Presence presence = PresenceOf(g, chunk);
        if (!Counts(presence)) return MediumTiers::kAbsent;
        tier = std::max(tier, static_cast<uint8_t>(presence - kPresentAt));
      }
    }
    return tier;
  }


  // The longest prefix (tokens, at most `credited`) whose full-attention
  // chunks are all present: chunk ends are walked in order across groups.
  // The first chunk is looked up alone (a prompt nobody stored costs one
  // block hash and one lookup). After it the walk goes through the shared
  // pipeline (WalkRounds), in rounds of kTokenRound chunks hashed from the
  // tokens or kGivenRound with the hashes given: a miss wastes the rest of
  // its round and the round after it, a few block hashes with tokens,
  // fingerprints only with the hashes given.
  size_t FullAttentionRun(size_t credited) {
    std::vector<size_t>& next = scratch_.next_chunk;
    next.assign(layout_.groups().size(), 0);
    size_t g = 0;
    if (const size_t end = NextChunkEnd(&g); end <= credited) {
      // Missing: every prefix shorter than its end holds, none longer.
      if (next[g] >= ChunksInside(g) || !ChunkPresent(g, next[g])) return end - 1;
      ++next[g];
    }
    WalkRounds rounds(*this, credited);
    RunRounds(index_, rounds);
    return rounds.run();
  }

  // FullAttentionRun after Blocks, which looked up every full-attention
  // chunk overlapping a whole router block: the run is read from their
  // presence, with no hash (check_pages' prefix_hits costs a scan, not a
  // walk). A chunk Blocks did not look up (one ending inside the request's
  // last, partial router block: the token answer reaches it) is looked up
  // here, on its own.
  size_t FullAttentionRunFromPresence(size_t credited) {
    std::vector<size_t>& next = scratch_.next_chunk;
    next.assign(layout_.groups().size(), 0);
    while (true) {
      size_t g = 0;
      const size_t end = NextChunkEnd(&g);
      if (end > credited) return credited;
      if (next[g] >= ChunksInside(g) || !ChunkPresent(g, next[g])) return end - 1;
      ++next[g];
    }
  }

  // The next chunk to end, across the full-attention groups, and its group.
  size_t NextChunkEnd(size_t* group) const {
    const std::vector<size_t>& next = scratch_.next_chunk;
    size_t best_end = SIZE_MAX;
    for (size_t g = 0; g < layout_.groups().size(); ++g) {
      const Layout::Group& candidate = layout_.groups()[g];
      if (candidate.kind != GroupKind::kFullAttention) continue;
      const size_t end = (next[g] + 1) * candidate.block_size;
      if (end < best_end) best_end = end, *group = g;
    }
    return best_end;
  }

  // A chunk of the prefix walk between its fingerprints and its check.
  struct WalkChunk {
    size_t group = 0;
    size_t chunk = 0;
    size_t end = 0;      // its last token + 1
    bool known = false;  // its digest is known (else it is missing)
    EntryKeys computed;
    Fingerprint* keys = nullptr;
  };
  // A round of the walk: the next chunks to end, across groups.
  struct WalkRound {
    size_t n = 0;
    size_t absent = 0;  // the first chunk found absent (n: none)
    WalkChunk chunks[kMaxRound];
    Presence presence[kMaxRound];  // of chunks [0, absent]
  };

  // FullAttentionRun's steps in the shared pipeline (query/round_pipeline.h):
  // a round's chunks are taken in the order they end, hashed and
  // fingerprinted with no lock held; one hold prefetches their keys and
  // checks the round before; the first absent chunk ends the walk.
  class WalkRounds {
   public:
    static constexpr bool kProbes = false;
    using Round = WalkRound;

    WalkRounds(ChunkQuery& query, size_t credited)
        : query_(query),
          credited_(credited),
          round_(query.chain_.hashes_tokens() ? kTokenRound : kGivenRound),
          stride_(std::max<size_t>(1, query.MaxPrefixesPerGroup())),
          run_(credited) {}

    // The walk's answer: `credited`, or one less than the end of its first
    // missing chunk.
    size_t run() const { return run_; }

    void Init(Round& round, size_t slot) {
      for (size_t i = 0; i < kMaxRound; ++i) {
        round.chunks[i].keys = query_.scratch_.walk_keys.data() + (slot * kMaxRound + i) * stride_;
      }
    }
    bool empty(const Round& round) const { return round.n == 0; }
    size_t Prepare(Round& round) {
      std::vector<size_t>& next = query_.scratch_.next_chunk;
      size_t g = 0;
      round.n = 0;
      for (size_t end; round.n < round_ && (end = query_.NextChunkEnd(&g)) <= credited_; ++round.n) {
        WalkChunk& added = round.chunks[round.n];
        added.group = g;
        added.chunk = next[g]++;
        added.end = end;
        added.known = added.chunk < query_.ChunksInside(g) && query_.FingerprintChunk(g, added.chunk, added.keys, &added.computed);
      }
      return round.n;
    }
    void BeforeCheck(const Round& round) {
      const ChunkQueryHooks* hooks = query_.hooks_;
      if (hooks == nullptr || hooks->before_chunk_keys == nullptr) return;
      for (size_t i = 0; i < round.n; ++i) {
        if (round.chunks[i].known) hooks->before_chunk_keys(hooks->user, round.chunks[i].group, round.chunks[i].chunk);
      }
    }
    void Prefetch(const Index::Reader& reader, const Round& round) {
      for (size_t i = 0; i < round.n; ++i) {
        const WalkChunk& chunk = round.chunks[i];
        if (chunk.known) query_.Prefetch(reader, chunk.keys, chunk.computed);
      }
    }
    void Check(const Index::Reader& reader, Round& round) {
      round.absent = round.n;
      for (size_t i = 0; i < round.n; ++i) {
        const WalkChunk& chunk = round.chunks[i];
        round.presence[i] =
            chunk.known ? query_.CheckChunk(reader, chunk.group, chunk.chunk, chunk.keys, chunk.computed) : kAbsent;
        if (!query_.Counts(round.presence[i])) {
          round.absent = i;
          return;
        }
      }
    }
    bool Answer(const Round& round) {
      for (size_t i = 0; i < round.n && i <= round.absent; ++i) {
        ++query_.chunks_looked_up_;
        const WalkChunk& chunk = round.chunks[i];
        if (chunk.known) query_.PresenceOf(chunk.group, chunk.chunk) = round.presence[i];
      }
      if (round.absent == round.n) return true;
      run_ = round.chunks[round.absent].end - 1;
      return false;
    }

   private:
    ChunkQuery& query_;
    const size_t credited_;
    const size_t round_;
    const size_t stride_;
    size_t run_;
  };

  // Whether the sliding-window and Mamba groups hold at `length` tokens.
  // Without a full-attention group, some chunk must vouch for the prefix:
  // sliding windows of one token need none, and a prefix no object was
  // found for is a miss, never a hit (index-semantics.md).
  bool OtherGroupsHold(size_t length) {
    size_t vouching = 0;  // chunks found present
    for (size_t g = 0; g < layout_.groups().size(); ++g) {
      const Layout::Group& group = layout_.groups()[g];
      if (group.kind == GroupKind::kFullAttention) continue;
      const size_t ending = length / group.block_size;  // chunks ending at or before length
      const size_t needed = group.kind == GroupKind::kMamba ? 1 : std::min<size_t>(group.window_chunks, ending);
      if (group.kind == GroupKind::kMamba && length % group.block_size != 0) return false;
      for (size_t k = 0; k < needed; ++k) {
        const size_t chunk = ending - 1 - k;
        if (chunk >= ChunksInside(g) || !ChunkPresent(g, chunk)) return false;
        ++vouching;
      }
    }
    return vouching > 0 || layout_.has_full_attention();
  }

  Index& index_;
  const Layout& layout_;
  ScratchLease scratch_lease_;
  Scratch& scratch_;  // *scratch_lease_
  Chain chain_;
  // Each group's slot plan, kept by the thread from its last query of this
  // layout (query/query_plans.h).
  QueryPlans::Lease plans_;
  const ChunkQueryHooks* hooks_;
  const size_t n_tokens_;
  size_t chunks_looked_up_ = 0;
  uint8_t max_tier_ = UINT8_MAX;  // LimitTier
  bool full_attention_known_ = false;  // Blocks looked up every full-attention chunk (FullAttentionRunFromPresence)
};

bool BlockSizeMatches(Index& index, const Layout& layout, uint32_t block_size) {
  return sci::BlockSizeMatches(index, block_size, layout.router_block_size(), layout.block_size_warning(), "vLLM query",
                              "main_event_block_size");
}

}  // namespace

size_t BlocksToCheck(const Layout& layout, size_t n_tokens, uint32_t block_size) {
  return block_size == layout.router_block_size() ? n_tokens / block_size : 0;
}

PageQueryResult CheckBlocks(Index& index, const Layout& layout, const ChainSource& source, uint32_t block_size,
                            std::span<uint8_t> hits, const ChunkQueryHooks* hooks) {
  if (!BlockSizeMatches(index, layout, block_size)) return PageQueryResult{};
  if (hits.size() < source.n_tokens / block_size) {
    throw std::length_error("vLLM block query: hits buffer shorter than the block count");
  }
  ChunkQuery<> query(index, layout, source, hooks, /*prefix=*/false);
  PageQueryResult result = query.Blocks(hits);
  // prefix_hits is the usable prefix, Dynamo's answer (CheckPrefix's), not
  // the leading run of hits[]: on a hybrid layout a run of full-attention
  // chunks can pass the last block whose Mamba or window state is stored,
  // and a router reading prefix_hits would credit blocks it cannot load.
  // The chunks Blocks looked up are not looked up again.
  const PageQueryResult prefix = query.Prefix();
  result.prefix_hits = prefix.prefix_hits;
  result.prefix_tokens = prefix.prefix_tokens;
  result.pages_examined = result.n_pages;
  CountQuery(index, result, result.n_pages);
  return result;
}

PageQueryResult CheckTiers(Index& index, const Layout& layout, const ChainSource& source, uint32_t block_size,
                           std::span<uint8_t> tiers, TierAnswer* answer, const ChunkQueryHooks* hooks) {
  answer->n_tiers = index.tiers().n_tiers();
  if (!BlockSizeMatches(index, layout, block_size)) {
    SummariseTiers({}, MediumTiers::kAbsent, false, answer);
    return PageQueryResult{};
  }
  const size_t n_blocks = source.n_tokens / block_size;
  if (tiers.size() < n_blocks) throw std::length_error("vLLM tier query: tiers buffer shorter than the block count");
  ChunkQuery<true> query(index, layout, source, hooks, /*prefix=*/false);
  PageQueryResult result = query.Blocks(tiers);
  SummariseTiers(tiers.first(n_blocks), MediumTiers::kAbsent, /*leading_run=*/false, answer);
  // Dynamo's prefix at each tier, from the chunks Blocks looked up (and the
  // few other chunks the prefix needs, each looked up once): L[t] counts
  // only chunks present at tier <= t.
  for (int t = 0; t < answer->n_tiers; ++t) {
    query.LimitTier(static_cast<uint8_t>(t));
    const PageQueryResult prefix = query.Prefix();
    answer->prefix_pages[static_cast<size_t>(t)] = prefix.prefix_hits;
    answer->prefix_tokens[static_cast<size_t>(t)] = prefix.prefix_tokens;
  }
  result.prefix_hits = answer->prefix_pages[static_cast<size_t>(answer->n_tiers - 1)];
  result.prefix_tokens = answer->prefix_tokens[static_cast<size_t>(answer->n_tiers - 1)];
  result.pages_examined = result.n_pages;
  CountQuery(index, result, result.n_pages);
  return result;
}

PageQueryResult CheckPrefix(Index& index, const Layout& layout, const ChainSource& source, uint32_t block_size,
                            const ChunkQueryHooks* hooks) {
  if (!BlockSizeMatches(index, layout, block_size)) return PageQueryResult{};
  ChunkQuery<> query(index, layout, source, hooks, /*prefix=*/true);
  const PageQueryResult result = query.Prefix();
  CountQuery(index, result, result.pages_examined);
  return result;
}

}  // namespace sci::vllm
