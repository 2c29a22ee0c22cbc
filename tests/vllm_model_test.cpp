// Model-based randomized test of the vLLM family's queries (docs: the
// MooncakeStoreConnector doc, section 3 "Chunks, groups and the router's
// answer"; index-semantics.md). A reference model kept deliberately plain --
// a std::set of present (tenant, key) strings, chunk keys spelled out as
// "<prefix>@<hex>" from vllm::HashChain's digests, and Dynamo's answer
// computed the obvious way (every candidate length, every group's rule) --
// is compared after every step of a random event stream with the library's
// CheckPrefix and CheckBlocks, by tokens (with and without LoRA / salt
// extras), by digests and by 64-bit event hashes.
//
// The stream stores and removes whole chunks, single keys of a chunk,
// whole request prefixes (with holes), keys of another tenant or another
// rank (noise that must not count), duplicates (a batch sent twice, a key
// stored twice), tenant clears, whole clears and gaps; stored events carry
// no group_id, the connector's "vllm-mooncake-store:..." or the
// second-generation master's "0". Layouts: full attention only (TP 2, with
// and without cache_prefix, chunks of one and of two router blocks),
// sliding window, Mamba hybrid, MLA (one prefix), TP 8, and the other
// shapes a descriptor allows (router blocks of two hash blocks, a
// coordinator lcm of no group's size, two full-attention groups, no
// full-attention group: sliding windows or Mamba alone, a router block of
// four chunks); both hash algorithms. Every answer is also checked in
// tokens (prefix_tokens, 1.4). Single-threaded, so the library must equal the model
// exactly: no false hit and no false miss.
//
// One rule beyond section 3: a prefix some chunk must vouch for (a layout
// of one-token sliding windows alone needs none at any length; answering
// such a prefix would be a hit with nothing looked up).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <numeric>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "index/index.h"
#include "index/medium_tiers.h"
#include "vllm/block_hash.h"
#include "vllm/chunk_query.h"
#include "vllm/layout.h"

namespace sci::vllm {
namespace {

constexpr uint32_t kHashBlock = 16;

std::string HexOf(const BlockDigest& digest) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t byte : digest) {
    hex += kDigits[byte >> 4];
    hex += kDigits[byte & 15];
  }
  return hex;
}

// ---- the cases ----

struct GroupCase {
  GroupKind kind;
  uint32_t block_size;
  uint32_t window = 0;  // sliding window, tokens
};

struct Case {
  const char* name;
  const char* cache_prefix;  // "" = none
  const char* model;
  int tp_prefixes;           // distinct tp ranks in each group's prefixes
  std::vector<GroupCase> groups;
  uint32_t router_block = 16;
  uint32_t lcm_block = 0;    // 0: the descriptor leaves it out
  const char* tenant = "";   // the layout's tenant ("" = default)
  HashAlgorithm algorithm = HashAlgorithm::kSha256;
  uint64_t seed = 1;
};

// GoogleTest names a failing case by this, not by its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::string PrefixOf(const Case& c, size_t group, int rank) {
  std::string prefix = c.cache_prefix[0] != '\0' ? std::string(c.cache_prefix) + "@" : std::string();
  return prefix + c.model + "@tp_rank:" + std::to_string(rank) + "@pcp0@dcp0@pp_rank:0@group:" +
         std::to_string(group);
}

LayoutSpec SpecOf(const Case& c) {
  LayoutSpec spec;
  spec.algorithm = c.algorithm;
  spec.main_event_block_size = c.router_block;
  spec.lcm_block_size = c.lcm_block;
  spec.tenant_id = c.tenant;
  for (size_t g = 0; g < c.groups.size(); ++g) {
    GroupSpec group;
    group.group_id = static_cast<uint32_t>(g);
    group.kind = c.groups[g].kind;
    group.block_size = c.groups[g].block_size;
    group.hash_block_size = kHashBlock;
    group.sliding_window = c.groups[g].window;
    for (int rank = 0; rank < c.tp_prefixes; ++rank) group.key_prefixes.push_back(PrefixOf(c, g, rank));
    spec.groups.push_back(std::move(group));
  }
  return spec;
}

// ---- the reference model ----

std::string TenantName(const std::string& tenant) { return tenant.empty() ? "default" : tenant; }

struct Model {
  const Case& c;
  // (tenant, key) -> its media under the per-medium rule (kCpu, kDisk;
  // 0: unknown, which any removal drops).
  std::map<std::pair<std::string, std::string>, uint8_t> present;
  static constexpr uint8_t kCpu = 1, kDisk = 2;
  static uint8_t MediumBit(std::string_view medium) { return medium == "cpu" ? kCpu : medium == "disk" ? kDisk : 0; }

  void Store(const std::pair<std::string, std::string>& key, std::string_view medium) {
    const auto held = present.find(key);
    const uint8_t bit = MediumBit(medium);
    present[key] = bit != 0 && held != present.end() && held->second != 0 ? held->second | bit : bit;
  }
  void Remove(const std::pair<std::string, std::string>& key, std::string_view medium) {
    const auto held = present.find(key);
    const uint8_t bit = MediumBit(medium);
    if (held == present.end()) return;
    if (bit != 0 && (held->second & ~bit) != 0) {
      held->second &= static_cast<uint8_t>(~bit);  // still on another medium
    } else {
      present.erase(held);
    }
  }

  // Chunk `chunk` of group g, for a request of n_tokens whose router holds
  // the hex digests `hex` ("" for one it could not learn), present at tier
  // `max_tier` or faster (the default map: cpu 0, disk and unknown media 1).
  bool ChunkPresent(const std::vector<std::string>& hex, size_t n_tokens, size_t g, size_t chunk,
                    int max_tier = 1) const {
    const size_t end = (chunk + 1) * c.groups[g].block_size;
    if (end > n_tokens) return false;
    const size_t key_block = end / kHashBlock - 1;
    if (key_block >= hex.size() || hex[key_block].empty()) return false;
    for (int rank = 0; rank < c.tp_prefixes; ++rank) {
      const auto it = present.find({TenantName(c.tenant), PrefixOf(c, g, rank) + "@" + hex[key_block]});
      if (it == present.end()) return false;
      if (max_tier < 1 && (it->second & kCpu) == 0) return false;
    }
    return true;
  }

  // Section 3's rule, and one more (index-semantics.md: uncertainty is a
  // miss): some chunk must vouch for the prefix (a layout of one-token
  // sliding windows alone needs none).
  bool Holds(const std::vector<std::string>& hex, size_t n_tokens, size_t length, int max_tier) const {
    size_t required = 0;
    for (size_t g = 0; g < c.groups.size(); ++g) {
      const GroupCase& group = c.groups[g];
      const size_t ending = length / group.block_size;  // chunks ending at or before length
      switch (group.kind) {
        case GroupKind::kFullAttention:
          for (size_t chunk = 0; chunk < ending; ++chunk) {
            if (!ChunkPresent(hex, n_tokens, g, chunk, max_tier)) return false;
          }
          required += ending;
          break;
        case GroupKind::kSlidingWindow: {
          const size_t window_chunks = (group.window - 1 + group.block_size - 1) / group.block_size;
          const size_t needed = std::min(window_chunks, ending);
          for (size_t chunk = ending - needed; chunk < ending; ++chunk) {
            if (!ChunkPresent(hex, n_tokens, g, chunk, max_tier)) return false;
          }
          required += needed;
          break;
        }
        case GroupKind::kMamba:
          if (length % group.block_size != 0 || ending == 0 || !ChunkPresent(hex, n_tokens, g, ending - 1, max_tier)) {
            return false;
          }
          required += 1;
          break;
      }
    }
    return required > 0;
  }

  // Dynamo's answer, in router blocks.
  size_t Prefix(const std::vector<std::string>& hex, size_t n_tokens, int max_tier = 1) const {
    if (n_tokens == 0) return 0;
    const size_t b = c.router_block;
    const size_t credited = (n_tokens - 1) / b * b;
    size_t alignment = std::lcm<size_t>(b, c.lcm_block == 0 ? b : c.lcm_block);
    for (const GroupCase& group : c.groups) alignment = std::lcm<size_t>(alignment, group.block_size);
    for (size_t length = credited / alignment * alignment; length > 0; length -= alignment) {
      if (Holds(hex, n_tokens, length, max_tier)) return length / b;
    }
    return 0;
  }

  // The leading prompt tokens the engine loads (the 1.4 answer in tokens,
  // docs/vllm-family.md "Credit in tokens"): with full attention alone, the
  // longest run of whole chunks of every group -- a multiple of each
  // group's block_size -- that leaves the last token to compute; else the
  // aligned answer above, in tokens.
  size_t Tokens(const std::vector<std::string>& hex, size_t n_tokens, int max_tier = 1) const {
    size_t granule = 1;
    for (const GroupCase& group : c.groups) {
      if (group.kind != GroupKind::kFullAttention) return Prefix(hex, n_tokens, max_tier) * c.router_block;
      granule = std::lcm<size_t>(granule, group.block_size);
    }
    if (n_tokens == 0) return 0;
    for (size_t length = (n_tokens - 1) / granule * granule; length > 0; length -= granule) {
      if (Holds(hex, n_tokens, length, max_tier)) return length;
    }
    return 0;
  }

  // Per block: every full-attention chunk the block overlaps is inside the
  // request and present (chunk_query.h); no full-attention group, no hit.
  std::vector<uint8_t> Blocks(const std::vector<std::string>& hex, size_t n_tokens, int max_tier = 1) const {
    const size_t b = c.router_block;
    std::vector<uint8_t> hits(n_tokens / b, 0);
    bool any_full = false;
    for (const GroupCase& group : c.groups) any_full = any_full || group.kind == GroupKind::kFullAttention;
    if (!any_full) return hits;
    for (size_t i = 0; i < hits.size(); ++i) {
      bool hit = true;
      for (size_t g = 0; g < c.groups.size() && hit; ++g) {
        if (c.groups[g].kind != GroupKind::kFullAttention) continue;
        const size_t size = c.groups[g].block_size;
        for (size_t chunk = i * b / size; chunk <= ((i + 1) * b - 1) / size && hit; ++chunk) {
          hit = ChunkPresent(hex, n_tokens, g, chunk, max_tier);
        }
      }
      hits[i] = hit ? 1 : 0;
    }
    return hits;
  }
  // Each block's tier (MediumTiers::kAbsent: no hit).
  std::vector<uint8_t> BlockTiers(const std::vector<std::string>& hex, size_t n_tokens) const {
    const std::vector<uint8_t> fast = Blocks(hex, n_tokens, 0), any = Blocks(hex, n_tokens, 1);
    std::vector<uint8_t> tiers(any.size());
    for (size_t i = 0; i < tiers.size(); ++i) tiers[i] = fast[i] ? 0 : any[i] ? 1 : MediumTiers::kAbsent;
    return tiers;
  }
};

// ---- requests ----

const std::string kLora = "adapter-a";
const std::string kSalt = "salt-1";

RequestExtras ExtrasOf(int kind) {
  RequestExtras extras;
  if (kind == 1 || kind == 2) extras.has_lora = true, extras.lora_name = kLora;
  if (kind == 2 || kind == 3) extras.has_salt = true, extras.cache_salt = kSalt;
  return extras;
}

struct Request {
  std::vector<uint32_t> tokens;
  int extras_kind = 0;
  std::vector<BlockDigest> chain;  // every whole block's digest
  std::vector<std::string> hex;
};

// Prompts sharing prefixes of one root (so chunks are shared), each under
// every kind of extras.
std::vector<Request> MakeRequests(const Case& c, std::mt19937_64& rng) {
  std::vector<uint32_t> root(200);
  for (uint32_t& token : root) token = static_cast<uint32_t>(rng() % 50000);
  root[7] = 70000;           // a four-byte id
  root[150] = 0x80000001u;   // an id past 2^31
  const size_t splits[] = {0, 16, 37, 64, 128, 200};
  std::vector<Request> requests;
  for (size_t split : splits) {
    std::vector<uint32_t> prompt(root.begin(), root.begin() + static_cast<std::ptrdiff_t>(split));
    const size_t length = split + rng() % 90;
    while (prompt.size() < length) prompt.push_back(static_cast<uint32_t>(rng() % 50000));
    for (int kind = 0; kind < 4; ++kind) {
      Request request;
      request.tokens = prompt;
      request.extras_kind = kind;
      request.chain = HashChain(c.algorithm, "0", request.tokens, kHashBlock, ExtrasOf(kind));
      for (const BlockDigest& digest : request.chain) request.hex.push_back(HexOf(digest));
      requests.push_back(std::move(request));
    }
  }
  return requests;
}

// ---- the driver ----

struct OwnedEvent {
  EventKind kind;
  std::string key, group_id, tenant, medium;
};

class Driver {
 public:
  Driver(const Case& c, const Layout& layout) : c_(c), layout_(layout), model_{c, {}}, rng_(c.seed) {
    requests_ = MakeRequests(c, rng_);
  }

  void Run(int steps) {
    for (step_ = 0; step_ < steps; ++step_) {
      Step();
      for (int q = 0; q < 3; ++q) {
        if (!Compare()) return;
      }
    }
  }

  size_t hits_seen() const { return hits_seen_; }
  size_t tier_prefixes_seen() const { return tier_prefixes_seen_; }
  size_t prefix_hits_seen() const { return prefix_hits_seen_; }
  size_t tokens_past_blocks_seen() const { return tokens_past_blocks_seen_; }

 private:
  size_t Pick(size_t n) { return n == 0 ? 0 : rng_() % n; }

  std::vector<std::string> ChunkKeys(const Request& request, size_t g, size_t chunk) const {
    const size_t key_block = (chunk + 1) * c_.groups[g].block_size / kHashBlock - 1;
    std::vector<std::string> keys;
    for (int rank = 0; rank < c_.tp_prefixes; ++rank) keys.push_back(PrefixOf(c_, g, rank) + "@" + request.hex[key_block]);
    return keys;
  }
  // A chunk of the request, or false when it has none of group g.
  bool PickChunk(const Request& request, size_t* g, size_t* chunk) {
    *g = Pick(c_.groups.size());
    const size_t chunks = request.tokens.size() / c_.groups[*g].block_size;
    if (chunks == 0) return false;
    *chunk = Pick(chunks);
    return true;
  }
  std::string GroupLabel(const Request& request, size_t key_block) {
    switch (rng_() % 3) {
      case 0: return "";
      case 1: {
        std::string label = "vllm-mooncake-store:";
        if (c_.cache_prefix[0] != '\0') label += std::string(c_.cache_prefix) + "@";
        return label + c_.model + "@" + request.hex[key_block];
      }
      default: return "0";
    }
  }
  OwnedEvent Stored(std::string key, std::string group, std::string tenant = "") {
    return OwnedEvent{EventKind::kStored, std::move(key), std::move(group), tenant.empty() ? LayoutTenant() : tenant,
                      rng_() % 4 == 0 ? "disk" : "cpu"};
  }
  // Under the per-medium rule: from memory, from disk, or (no medium) whole.
  OwnedEvent Removed(std::string key, std::string tenant = "") {
    const uint64_t medium = rng_() % 10;
    return OwnedEvent{EventKind::kRemoved, std::move(key), rng_() % 2 ? "" : "0",
                      tenant.empty() ? LayoutTenant() : tenant, medium < 5 ? "cpu" : medium < 8 ? "disk" : ""};
  }
  // The layout's tenant as events spell it: "" and "default" are one.
  std::string LayoutTenant() {
    if (c_.tenant[0] != '\0') return c_.tenant;
    return rng_() % 2 ? "" : "default";
  }

  void Apply(std::vector<OwnedEvent> batch, bool gap = false) {
    sequence_ += gap ? 2 + rng_() % 5 : 1;
    std::vector<Event> events;
    for (const OwnedEvent& e : batch) events.push_back(Event{e.kind, e.key, e.group_id, e.tenant, e.medium});
    index_.ApplyBatch(sequence_, events);
    if (gap) model_.present.clear();  // a gap clears first (plain rules)
    for (const OwnedEvent& e : batch) {
      const std::pair<std::string, std::string> key{TenantName(e.tenant), e.key};
      switch (e.kind) {
        case EventKind::kStored: model_.Store(key, e.medium); break;
        case EventKind::kRemoved: model_.Remove(key, e.medium); break;
        case EventKind::kAllCleared: model_.present.clear(); break;
        case EventKind::kTenantCleared:
          for (auto it = model_.present.begin(); it != model_.present.end();) {
            it = it->first.first == TenantName(e.tenant) ? model_.present.erase(it) : std::next(it);
          }
          break;
        default: break;
      }
    }
    last_batch_ = std::move(batch);
  }

  void Step() {
    const size_t r = Pick(requests_.size());
    last_request_ = r;
    const Request& request = requests_[r];
    size_t g = 0, chunk = 0;
    const int op = static_cast<int>(rng_() % 100);
    if (op < 22) {  // store a whole chunk, in one batch or key by key
      if (!PickChunk(request, &g, &chunk)) return;
      const std::string label = GroupLabel(request, (chunk + 1) * c_.groups[g].block_size / kHashBlock - 1);
      std::vector<OwnedEvent> batch;
      for (const std::string& key : ChunkKeys(request, g, chunk)) batch.push_back(Stored(key, label));
      if (rng_() % 3 == 0) {
        for (OwnedEvent& e : batch) Apply({std::move(e)});
      } else {
        Apply(std::move(batch));
      }
    } else if (op < 32) {  // remove a whole chunk
      if (!PickChunk(request, &g, &chunk)) return;
      std::vector<OwnedEvent> batch;
      for (const std::string& key : ChunkKeys(request, g, chunk)) batch.push_back(Removed(key));
      Apply(std::move(batch));
    } else if (op < 41) {  // store one key of a chunk
      if (!PickChunk(request, &g, &chunk)) return;
      const std::vector<std::string> keys = ChunkKeys(request, g, chunk);
      Apply({Stored(keys[Pick(keys.size())], GroupLabel(request, 0))});
    } else if (op < 50) {  // remove one key of a chunk
      if (!PickChunk(request, &g, &chunk)) return;
      const std::vector<std::string> keys = ChunkKeys(request, g, chunk);
      Apply({Removed(keys[Pick(keys.size())])});
    } else if (op < 66) {  // a worker stores the request's chunks up to some length, a few missing
      const size_t length = Pick(request.tokens.size() + 1);
      std::vector<OwnedEvent> batch;
      for (size_t group = 0; group < c_.groups.size(); ++group) {
        for (size_t ch = 0; (ch + 1) * c_.groups[group].block_size <= length; ++ch) {
          if (rng_() % 12 == 0) continue;
          const std::string label = GroupLabel(request, (ch + 1) * c_.groups[group].block_size / kHashBlock - 1);
          for (const std::string& key : ChunkKeys(request, group, ch)) batch.push_back(Stored(key, label));
        }
      }
      Apply(std::move(batch));
    } else if (op < 74) {  // remove a random present key of the layout's tenant
      std::vector<std::string> mine;
      for (const auto& [key, media] : model_.present) {
        if (key.first == TenantName(c_.tenant)) mine.push_back(key.second);
      }
      if (mine.empty()) return;
      Apply({Removed(mine[Pick(mine.size())])});
    } else if (op < 79) {  // the last batch again, as a duplicate: ignored
      if (last_batch_.empty()) return;
      std::vector<Event> events;
      for (const OwnedEvent& e : last_batch_) events.push_back(Event{e.kind, e.key, e.group_id, e.tenant, e.medium});
      index_.ApplyBatch(sequence_, events);
    } else if (op < 83) {  // a tenant's clear: the layout's or another
      const std::string tenant = rng_() % 2 ? LayoutTenant() : std::string("other");
      Apply({OwnedEvent{EventKind::kTenantCleared, "", "", tenant, ""}});
    } else if (op < 85) {  // a whole clear: an all-cleared event, Index::Clear or a gap
      const int how = static_cast<int>(rng_() % 3);
      if (how == 0) {
        Apply({OwnedEvent{EventKind::kAllCleared, "", "", "", ""}});
      } else if (how == 1) {
        index_.Clear();
        model_.present.clear();
        last_batch_.clear();  // no cursor now: sent again, it would not be a duplicate
      } else {
        if (!PickChunk(request, &g, &chunk)) return;
        std::vector<OwnedEvent> batch;
        for (const std::string& key : ChunkKeys(request, g, chunk)) batch.push_back(Stored(key, ""));
        Apply(std::move(batch), /*gap=*/true);
      }
    } else if (op < 93) {  // noise: the chunk's keys in another tenant, or of another rank, or in capitals
      if (!PickChunk(request, &g, &chunk)) return;
      std::vector<OwnedEvent> batch;
      const std::vector<std::string> keys = ChunkKeys(request, g, chunk);
      const int how = static_cast<int>(rng_() % 3);
      for (const std::string& key : keys) {
        if (how == 0) {
          batch.push_back(Stored(key, "", "other"));
        } else if (how == 1) {
          batch.push_back(Stored(key.substr(0, key.size() - 65) + "9@" + key.substr(key.size() - 64), ""));
        } else {
          std::string upper = key;
          std::transform(upper.end() - 64, upper.end(), upper.end() - 64, [](char ch) { return static_cast<char>(std::toupper(ch)); });
          batch.push_back(Stored(upper, ""));
        }
      }
      Apply(std::move(batch));
    } else {  // one batch storing a chunk twice, or storing, removing and storing one key
      if (!PickChunk(request, &g, &chunk)) return;
      const std::vector<std::string> keys = ChunkKeys(request, g, chunk);
      std::vector<OwnedEvent> batch;
      if (rng_() % 2) {
        for (const std::string& key : keys) batch.push_back(Stored(key, "0"));
        for (const std::string& key : keys) batch.push_back(Stored(key, ""));
      } else {
        const std::string& key = keys[Pick(keys.size())];
        batch.push_back(Stored(key, ""));
        batch.push_back(Removed(key));
        if (rng_() % 2) batch.push_back(Stored(key, "0"));
      }
      Apply(std::move(batch));
    }
  }

  std::string Where(const Request& request, size_t n_tokens, const char* entry) const {
    return std::string(c_.name) + " seed " + std::to_string(c_.seed) + " step " + std::to_string(step_) + " " +
           entry + ": request of " + std::to_string(n_tokens) + "/" + std::to_string(request.tokens.size()) +
           " tokens, extras " + std::to_string(request.extras_kind);
  }

  // One request, every entry point against the model. False on a disagreement.
  bool Compare() {
    const Request& request = requests_[rng_() % 2 ? last_request_ : Pick(requests_.size())];
    size_t n_tokens = request.tokens.size();
    if (rng_() % 2) n_tokens = Pick(n_tokens + 1);
    const std::span<const uint32_t> tokens(request.tokens.data(), n_tokens);
    const size_t whole = n_tokens / kHashBlock;
    const std::vector<std::string> hex(request.hex.begin(), request.hex.begin() + static_cast<std::ptrdiff_t>(whole));

    // The router may hold fewer digests than the request has whole blocks.
    const size_t n_digests = rng_() % 4 == 0 ? Pick(whole + 1) : whole;
    const std::vector<std::string> known(hex.begin(), hex.begin() + static_cast<std::ptrdiff_t>(n_digests));
    std::vector<uint8_t> bytes;
    std::vector<uint64_t> event_hashes;
    for (size_t i = 0; i < n_digests; ++i) {
      bytes.insert(bytes.end(), request.chain[i].begin(), request.chain[i].end());
      event_hashes.push_back(EventHashOf(request.chain[i]));
    }

    const size_t want_prefix = model_.Prefix(hex, n_tokens);
    const size_t want_prefix_known = model_.Prefix(known, n_tokens);
    const size_t want_tokens = model_.Tokens(hex, n_tokens);
    const size_t want_tokens_known = model_.Tokens(known, n_tokens);
    if (want_tokens > want_prefix * c_.router_block) ++tokens_past_blocks_seen_;
    const std::vector<uint8_t> want_blocks = model_.Blocks(hex, n_tokens);
    const std::vector<uint8_t> want_blocks_known = model_.Blocks(known, n_tokens);
    prefix_hits_seen_ += want_prefix;
    for (uint8_t hit : want_blocks) hits_seen_ += hit;

    const RequestExtras extras = ExtrasOf(request.extras_kind);
    const uint32_t b = c_.router_block;
    struct Entry {
      const char* name;
      ChainSource source;
      size_t prefix;
      size_t tokens;
      const std::vector<uint8_t>* blocks;
    };
    const Entry entries[] = {
        {"tokens", ChainSource::Tokens(tokens, extras), want_prefix, want_tokens, &want_blocks},
        {"digests", ChainSource::Digests(bytes.data(), n_digests, n_tokens), want_prefix_known, want_tokens_known,
         &want_blocks_known},
        {"event hashes", ChainSource::EventHashes(event_hashes, n_tokens), want_prefix_known, want_tokens_known,
         &want_blocks_known},
    };
    for (const Entry& entry : entries) {
      const PageQueryResult prefix = CheckPrefix(index_, layout_, entry.source, b);
      EXPECT_EQ(prefix.prefix_hits, entry.prefix) << Where(request, n_tokens, entry.name) << " (CheckPrefix)";
      EXPECT_EQ(prefix.total_hits, entry.prefix) << Where(request, n_tokens, entry.name) << " (CheckPrefix)";
      EXPECT_EQ(prefix.n_pages, n_tokens / b) << Where(request, n_tokens, entry.name) << " (CheckPrefix)";
      EXPECT_EQ(prefix.prefix_tokens, entry.tokens) << Where(request, n_tokens, entry.name) << " (CheckPrefix tokens)";

      std::vector<uint8_t> hits(n_tokens / b + 1, 9);
      const PageQueryResult blocks =
          CheckBlocks(index_, layout_, entry.source, b, std::span<uint8_t>(hits.data(), n_tokens / b));
      EXPECT_EQ(hits.back(), 9) << Where(request, n_tokens, entry.name) << ": wrote past the blocks";
      hits.pop_back();
      EXPECT_EQ(hits, *entry.blocks) << Where(request, n_tokens, entry.name) << " (CheckBlocks)";
      size_t total = 0;
      for (uint8_t hit : *entry.blocks) total += hit;
      EXPECT_EQ(blocks.n_pages, n_tokens / b) << Where(request, n_tokens, entry.name);
      EXPECT_EQ(blocks.total_hits, total) << Where(request, n_tokens, entry.name);
      // prefix_hits is Dynamo's usable prefix (CheckPrefix's answer), on every
      // layout kind; the leading run of hits[] may be longer (a hybrid's Mamba
      // state missing) or shorter (no full-attention group: hits[] all 0).
      EXPECT_EQ(blocks.prefix_hits, entry.prefix) << Where(request, n_tokens, entry.name) << " (prefix_hits)";
      EXPECT_EQ(blocks.prefix_tokens, entry.tokens) << Where(request, n_tokens, entry.name) << " (CheckBlocks tokens)";

      // Tiers: each block's, and Dynamo's prefix at each tier.
      const std::vector<std::string>& digests = entry.blocks == &want_blocks ? hex : known;
      std::vector<uint8_t> tiers(n_tokens / b + 1, 9);
      TierAnswer answer;
      const PageQueryResult tiered =
          CheckTiers(index_, layout_, entry.source, b, std::span<uint8_t>(tiers.data(), n_tokens / b), &answer);
      EXPECT_EQ(tiers.back(), 9) << Where(request, n_tokens, entry.name) << ": wrote past the blocks";
      tiers.pop_back();
      EXPECT_EQ(tiers, model_.BlockTiers(digests, n_tokens)) << Where(request, n_tokens, entry.name) << " (CheckTiers)";
      EXPECT_EQ(answer.n_tiers, 2);
      EXPECT_EQ(answer.prefix_pages[0], model_.Prefix(digests, n_tokens, 0)) << Where(request, n_tokens, entry.name);
      EXPECT_EQ(answer.prefix_pages[1], entry.prefix) << Where(request, n_tokens, entry.name);
      EXPECT_EQ(tiered.prefix_hits, entry.prefix) << Where(request, n_tokens, entry.name);
      EXPECT_EQ(answer.prefix_tokens[0], model_.Tokens(digests, n_tokens, 0)) << Where(request, n_tokens, entry.name);
      EXPECT_EQ(answer.prefix_tokens[1], entry.tokens) << Where(request, n_tokens, entry.name);
      EXPECT_EQ(tiered.prefix_tokens, entry.tokens) << Where(request, n_tokens, entry.name);
      EXPECT_EQ(answer.pages_at[0] + answer.pages_at[1], total) << Where(request, n_tokens, entry.name);
      tier_prefixes_seen_ += answer.prefix_pages[0];
    }
    // A block size other than the router's checks nothing.
    EXPECT_EQ(CheckPrefix(index_, layout_, ChainSource::Tokens(tokens, extras), 2 * b).prefix_hits, 0u);
    EXPECT_EQ(BlocksToCheck(layout_, n_tokens, 2 * b), 0u);
    // Every digest a present key of the layout carries resolves from its event hash.
    for (size_t i = 0; i < whole; ++i) {
      bool carried = false;
      for (size_t g = 0; g < c_.groups.size() && !carried; ++g) {
        for (int rank = 0; rank < c_.tp_prefixes && !carried; ++rank) {
          carried = model_.present.count({TenantName(c_.tenant), PrefixOf(c_, g, rank) + "@" + hex[i]}) != 0;
        }
      }
      if (!carried) continue;
      BlockDigest digest{};
      EXPECT_TRUE(index_.DigestOfEventHash(TenantSeed(c_.tenant), EventHashOf(request.chain[i]), &digest) && digest == request.chain[i])
          << Where(request, n_tokens, "DigestOfEventHash") << ", block " << i;
    }
    return !::testing::Test::HasFailure();
  }

  const Case& c_;
  const Layout& layout_;
  Model model_;
  std::mt19937_64 rng_;
  std::vector<Request> requests_;
  Index index_{VllmIndexOptions(IndexOptions{.residency = Residency::kPerMedium})};
  uint64_t sequence_ = 0;
  std::vector<OwnedEvent> last_batch_;
  size_t last_request_ = 0;
  int step_ = 0;
  size_t hits_seen_ = 0, prefix_hits_seen_ = 0, tier_prefixes_seen_ = 0;
  size_t tokens_past_blocks_seen_ = 0;  // answers whose tokens reach past the credited blocks
};

// ---- the suite ----

std::vector<Case> Cases() {
  const std::vector<Case> shapes = {
      {"FullTp2Prefix", "prod", "Qwen3-8B", 2, {{GroupKind::kFullAttention, 16}}},
      {"FullTp2NoPrefixTenant", "", "Qwen3-8B", 2, {{GroupKind::kFullAttention, 16}}, 16, 0, "tenant-a"},
      {"FullChunk32Tp2", "", "Llama-3.1-8B", 2, {{GroupKind::kFullAttention, 32}}},
      {"SlidingWindowTp2", "prod", "gemma-3-12b-it", 2,
       {{GroupKind::kFullAttention, 16}, {GroupKind::kSlidingWindow, 16, 40}}, 16, 32},
      {"SlidingWindowWideChunks", "", "gpt-oss-20b", 1,
       {{GroupKind::kSlidingWindow, 32, 17}, {GroupKind::kFullAttention, 16}}},
      {"MambaHybridTp2", "prod", "Qwen3-Next-80B", 2,
       {{GroupKind::kFullAttention, 16}, {GroupKind::kMamba, 64}}, 16, 64},
      {"MambaHybridNoPrefix", "", "Nemotron-H", 2, {{GroupKind::kFullAttention, 16}, {GroupKind::kMamba, 64}}},
      {"Mla", "", "DeepSeek-V3", 1, {{GroupKind::kFullAttention, 16}}},
      {"Tp8", "prod", "Llama-3.1-70B", 8, {{GroupKind::kFullAttention, 16}}},
      // Shapes the descriptor allows besides: router blocks of two hash
      // blocks, a coordinator lcm that is no group's size, two
      // full-attention groups, no full-attention group at all.
      {"Router32", "prod", "Qwen3-8B", 2, {{GroupKind::kFullAttention, 16}}, 32},
      {"Lcm48", "", "Qwen3-8B", 1, {{GroupKind::kFullAttention, 16}}, 16, 48},
      // A router block of four chunks (DCP's shape, Dynamo's DEP #14944: a
      // 12,288-token router block over 128-token chunks, scaled down): the
      // answer in tokens counts whole chunks past the last whole block.
      {"Router64Chunks16", "prod", "Qwen3-8B", 2, {{GroupKind::kFullAttention, 16}}, 64, 64},
      // Shapes an outside review of 1.4 added: full-attention groups whose
      // chunks do not divide the router block, or of two sizes under a
      // router block of several; a window or Mamba hybrid under a wide block.
      {"TwoFull16And48Router64", "prod", "M", 2, {{GroupKind::kFullAttention, 16}, {GroupKind::kFullAttention, 48}}, 64},
      {"Full32Router16", "", "M", 1, {{GroupKind::kFullAttention, 32}}, 16},
      {"Full48Router32", "", "M", 1, {{GroupKind::kFullAttention, 48}}, 32},
      {"TwoFull32And48Lcm80", "", "M", 1, {{GroupKind::kFullAttention, 32}, {GroupKind::kFullAttention, 48}}, 16, 80},
      {"TwoFull16And32Router128", "", "M", 2, {{GroupKind::kFullAttention, 16}, {GroupKind::kFullAttention, 32}}, 128},
      {"WindowHybridRouter64", "", "M", 1, {{GroupKind::kFullAttention, 16}, {GroupKind::kSlidingWindow, 16, 20}}, 64},
      {"MambaHybridRouter32", "", "M", 1, {{GroupKind::kFullAttention, 16}, {GroupKind::kMamba, 64}}, 32},
      {"TwoFullGroups", "prod", "M", 2, {{GroupKind::kFullAttention, 16}, {GroupKind::kFullAttention, 32}}},
      {"SlidingWindowOnly", "", "M", 2, {{GroupKind::kSlidingWindow, 16, 20}}},
      {"OneTokenWindowOnly", "", "M", 1, {{GroupKind::kSlidingWindow, 16, 1}, {GroupKind::kSlidingWindow, 32, 1}}},
      {"MambaOnly", "prod", "M", 2, {{GroupKind::kMamba, 32}}},
  };
  std::vector<Case> cases;
  uint64_t seed = 20261201;
  for (HashAlgorithm algorithm : {HashAlgorithm::kSha256, HashAlgorithm::kSha256Cbor}) {
    for (Case c : shapes) {
      c.algorithm = algorithm;
      c.seed = seed++;
      cases.push_back(c);
    }
  }
  return cases;
}

class VllmModel : public ::testing::TestWithParam<Case> {};

TEST_P(VllmModel, QueriesEqualTheModelAfterEveryStep) {
  const Case& c = GetParam();
  std::string error;
  const std::unique_ptr<const Layout> layout = Layout::Create(SpecOf(c), &error);
  ASSERT_NE(layout, nullptr) << error;
  Driver driver(c, *layout);
  driver.Run(1000);
  // The stream reaches hits (the comparison is not all zeros), where the layout has any.
  bool full = false, vouching = false;
  for (const GroupCase& group : c.groups) {
    full = full || group.kind == GroupKind::kFullAttention;
    vouching = vouching || group.kind != GroupKind::kSlidingWindow || group.window > 1;
  }
  if (full) EXPECT_GT(driver.hits_seen(), 0u);
  // Prefixes are multiples of the alignment: the stream's requests (at most
  // about 290 tokens) reach whole ones often only up to an alignment of 128.
  const bool reachable = layout->alignment() <= 128;
  if (vouching && reachable) EXPECT_GT(driver.prefix_hits_seen(), 0u);
  if (vouching && reachable) EXPECT_GT(driver.tier_prefixes_seen(), 0u) << "some prefixes should be all in memory";
  // Where the engine loads finer than the router credits (full attention
  // alone, chunks finer than the alignment), the stream reaches answers
  // whose tokens pass the credited blocks.
  bool finer = std::all_of(c.groups.begin(), c.groups.end(),
                           [](const GroupCase& group) { return group.kind == GroupKind::kFullAttention; });
  finer = finer && layout->load_granularity() < layout->alignment();
  if (finer) EXPECT_GT(driver.tokens_past_blocks_seen(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Layouts, VllmModel, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name) +
                                  (info.param.algorithm == HashAlgorithm::kSha256 ? "_Sha256" : "_Sha256Cbor");
                         });

}  // namespace
}  // namespace sci::vllm
