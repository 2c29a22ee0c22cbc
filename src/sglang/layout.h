// How one model's SGLang workers name their pages in Mooncake: the group id
// and the physical object keys of each page
// (docs/sglang-hicache.md, "Group id" and "Object keys").
//
// A Layout is validated once, then immutable and shareable by any number of
// threads. Everything the page query needs per key is precomputed: the key
// prefix, the table of suffixes, the tenant seed. A key is then
// "<key prefix><64 hex page hash><suffix>", assembled in a caller's stack
// buffer (KeyBuffer), never in a std::string.
//
// Coverage levels. Pools with the trailing_pages policy cover only the last
// t pages of a request, so the set of keys a page needs depends on how far
// it is from the end. Those sets are nested (a page nearer the end needs
// every key a farther page needs, and more): level 0 holds the all_pages
// pools' suffixes, level j adds the pools whose t is among the j largest
// distinct trailing counts. Layouts without pools (or without trailing
// pools) have one level.
//
// Since 1.4 a page is one entry of the page store (index/object_store.h):
// each level's keys are named as slots (Slots(level)), which a query
// resolves to a slot plan once per index (query/query_plans.h).
#pragma once

#include "common/warn_once.h"
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "index/fingerprint.h"
#include "index/index.h"
#include "index/slot_plan.h"
#include "query/query_plans.h"
#include "sglang/page_hash.h"

namespace sci {

// SGLang's group ids: this, then the head of the page's keys (its tag, if
// any, and the page hash). 1.3 counted stray keys of SGLang pages in an
// index made with it as IndexOptions::head_group_prefix
// (SGLangIndexOptions); since 1.4 the option is kept and unused.
inline constexpr std::string_view kGroupIdPrefix = "sglang-hicache:";

// Options for an index serving SGLang layouts: `options` with SGLang's
// head-named groups (kGroupIdPrefix).
inline IndexOptions SGLangIndexOptions(IndexOptions options = {}) {
  options.head_group_prefix = std::string(kGroupIdPrefix);
  return options;
}

enum class HitPolicy : int32_t {
  kAllPages = 0,       // the pool covers every page
  kTrailingPages = 1,  // the pool covers page i of n only when i >= n - trailing_pages
};

struct PoolSpec {
  std::vector<std::string> suffixes;  // each carries its own separator, e.g. "__swa"
  HitPolicy hit_policy = HitPolicy::kAllPages;
  uint32_t trailing_pages = 0;  // used by kTrailingPages only; 0 covers no page
};

// The runtime config an SGLang worker publishes; empty strings mean unset.
struct LayoutSpec {
  uint32_t page_size = 0;
  uint32_t tp_size = 1;      // 0 behaves as 1
  uint32_t pp_size = 1;      // 0 behaves as 1
  uint32_t tp_lcm_size = 0;  // 0 = unset; used with should_split_heads
  bool is_mla_model = false;
  bool is_eagle = false;
  bool should_split_heads = false;
  std::string extra_backend_tag;
  std::string key_prefix;  // used with pools only
  std::string tenant_id;   // empty = "default"
  std::vector<PoolSpec> pools;
};

class Layout {
 public:
  // Bounds beyond which a spec cannot be a real deployment (and would make
  // one query's work unbounded).
  static constexpr uint32_t kMaxParallelSize = 1024;  // tp_size, pp_size, tp_lcm_size
  static constexpr size_t kMaxKeysPerPage = 4096;
  // Capacity of a KeyBuffer: every key and group id of a layout must fit.
  static constexpr size_t kMaxKeyBytes = 1024;

  // A set of keys one page needs.
  struct Level {
    uint32_t first_suffix = 0;  // into suffixes()
    uint32_t n_suffixes = 0;    // 0: the page needs no key, so it can never hit
  };

  struct SuffixRef {
    uint32_t offset = 0;  // into the suffix arena
    uint32_t length = 0;
  };

  // Validates `spec` and builds the layout. On a bad spec returns null and
  // sets *error to the offending field and the problem, relative to the
  // spec ("page_size is 0", "pools[1].suffixes[0] is empty"), so that a C
  // thunk can prefix it with its own names.
  static std::unique_ptr<const Layout> Create(const LayoutSpec& spec, std::string* error);

  uint32_t page_size() const { return page_size_; }
  // Never another layout's in the process (query/query_plans.h).
  uint64_t serial() const { return serial_; }
  // Lets the first query with another block size warn (query_accounting.h).
  const WarnOnce& block_size_warning() const { return block_size_warning_; }
  bool is_eagle() const { return is_eagle_; }
  uint64_t tenant_seed() const { return tenant_seed_; }

  // "sglang-hicache:" or "sglang-hicache:<tag>_": the group id is this
  // followed by the page hash.
  std::string_view group_prefix() const { return group_prefix_; }
  // "", "<tag>_" or "<key_prefix>_": every key starts with this and the page hash.
  std::string_view key_prefix() const { return key_prefix_; }

  // The keys page `page` of a request of `n_pages` pages needs.
  const Level& LevelFor(size_t page, size_t n_pages) const {
    const size_t from_end = n_pages - 1 - page;
    size_t level = 0;
    // Few distinct trailing counts (usually none or one): a scan beats a search.
    for (uint32_t t : trailing_thresholds_) level += t > from_end ? 1 : 0;
    return levels_[level];
  }
  std::string_view Suffix(uint32_t i) const {
    const SuffixRef& ref = suffix_refs_[i];
    return std::string_view(suffix_arena_).substr(ref.offset, ref.length);
  }
  const std::vector<Level>& levels() const { return levels_; }

  // The slots (index/slot_plan.h) of the keys `level` needs: the key
  // prefix and each suffix around the page's digest. What a query resolves
  // to a slot plan.
  const std::vector<SlotName>& Slots(const Level& level) const { return level_slots_[LevelIndex(level)]; }
  // `level`'s position in levels().
  size_t LevelIndex(const Level& level) const { return static_cast<size_t>(&level - levels_.data()); }

  // Longest key this layout derives (prefix + hash + longest suffix).
  size_t max_key_length() const { return max_key_length_; }

  // Readable forms, for tests and tools (they allocate; the query does not).
  std::string GroupId(std::string_view page_hash_hex) const;
  std::vector<std::string> KeysFor(std::string_view page_hash_hex, size_t page, size_t n_pages) const;

 private:
  WarnOnce block_size_warning_;
  Layout() = default;
  const uint64_t serial_ = NextLayoutSerial();

  // The steps of Create, after the spec is validated, in order:
  // page size, eagle, tenant seed, group and key prefixes;
  void SetNames(const LayoutSpec& spec);
  // every key and group id fits a KeyBuffer (else the field to blame);
  std::string CheckKeyLengths(const LayoutSpec& spec, const std::vector<PoolSpec>& pools);
  // each pool's suffixes once in the arena (their refs, per pool);
  std::vector<std::vector<SuffixRef>> FillSuffixArena(const std::vector<PoolSpec>& pools);
  // and the coverage levels, with each level's slot names.
  void MakeLevels(const std::vector<PoolSpec>& pools, const std::vector<std::vector<SuffixRef>>& pool_refs);

  uint32_t page_size_ = 0;
  bool is_eagle_ = false;
  uint64_t tenant_seed_ = 0;
  std::string group_prefix_;
  std::string key_prefix_;
  std::string suffix_arena_;
  std::vector<SuffixRef> suffix_refs_;  // each level's suffixes, contiguous
  std::vector<std::vector<SlotName>> level_slots_;  // Slots() of each level
  std::vector<uint32_t> trailing_thresholds_;  // distinct trailing counts > 0, ascending
  std::vector<Level> levels_;                  // trailing_thresholds_.size() + 1 of them
  size_t max_key_length_ = 0;
};

// Assembles keys and group ids in place: "<prefix><hash><suffix>" with the
// prefix written once per query and the hash once per page. Lives on the
// query's stack.
class KeyBuffer {
 public:
  // `prefix` must leave room for the hash and the longest suffix (Layout
  // guarantees it for its own prefixes).
  explicit KeyBuffer(std::string_view prefix) : hash_at_(prefix.size()) {
    prefix.copy(bytes_, prefix.size());
  }
  char* hash() { return bytes_ + hash_at_; }
  void SetHash(std::string_view hex) { hex.copy(hash(), kPageHashHexLength); }
  // The buffer's prefix and hash, with nothing after them.
  std::string_view Bare() const { return std::string_view(bytes_, hash_at_ + kPageHashHexLength); }
  // The prefix, hash and `suffix`.
  std::string_view With(std::string_view suffix) {
    char* end = bytes_ + hash_at_ + kPageHashHexLength;
    suffix.copy(end, suffix.size());
    return std::string_view(bytes_, static_cast<size_t>(end - bytes_) + suffix.size());
  }

 private:
  size_t hash_at_;
  char bytes_[Layout::kMaxKeyBytes];
};

}  // namespace sci
