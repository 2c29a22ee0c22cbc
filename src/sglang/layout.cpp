#include "sglang/layout.h"

#include <algorithm>
#include <initializer_list>
#include <map>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/format.h"

namespace sci {
namespace {

constexpr std::string_view kGroupNamespace = kGroupIdPrefix;

// Debian's abseil has its own string_view, which absl::StrCat does not take
// from a std::string_view: join by hand.
std::string Concat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view part : parts) out.append(part);
  return out;
}

// The suffixes of a layout without advertised pools, in the order SGLang
// writes them.
std::vector<std::string> DerivedSuffixes(const LayoutSpec& spec) {
  const uint32_t tp = std::max(spec.tp_size, 1u);
  const uint32_t pp = std::max(spec.pp_size, 1u);
  std::vector<std::string> suffixes;
  if (spec.is_mla_model) {
    if (pp > 1) {
      for (uint32_t p = 0; p < pp; ++p) suffixes.push_back(absl::StrCat("_", p, "_k"));
    } else {
      suffixes.push_back("__k");
    }
    return suffixes;
  }
  const uint32_t ranks =
      spec.should_split_heads ? std::max({spec.tp_lcm_size != 0 ? spec.tp_lcm_size : tp, tp, 1u}) : tp;
  for (uint32_t p = 0; p < pp; ++p) {
    for (uint32_t rank = 0; rank < ranks; ++rank) {
      const std::string part = pp > 1 ? absl::StrCat("_", rank, "_", p) : absl::StrCat("_", rank);
      suffixes.push_back(absl::StrCat(part, "_k"));
      suffixes.push_back(absl::StrCat(part, "_v"));
    }
  }
  return suffixes;
}

// Keys per page of a layout without pools, computed without building them.
size_t DerivedKeyCount(const LayoutSpec& spec) {
  const size_t tp = std::max(spec.tp_size, 1u);
  const size_t pp = std::max(spec.pp_size, 1u);
  if (spec.is_mla_model) return pp;
  const size_t ranks =
      spec.should_split_heads ? std::max<size_t>({spec.tp_lcm_size != 0 ? spec.tp_lcm_size : tp, tp, 1}) : tp;
  return ranks * pp * 2;
}

std::string ValidateScalars(const LayoutSpec& spec) {
  if (spec.page_size == 0) return "page_size is 0";
  const std::pair<const char*, uint32_t> sizes[] = {
      {"tp_size", spec.tp_size}, {"pp_size", spec.pp_size}, {"tp_lcm_size", spec.tp_lcm_size}};
  for (const auto& [name, value] : sizes) {
    if (value > Layout::kMaxParallelSize) {
      return sci::StrFormat("%s is %d (more than %d)", name, value, Layout::kMaxParallelSize);
    }
  }
  return {};
}

std::string ValidatePools(const std::vector<PoolSpec>& pools) {
  size_t total = 0;
  for (size_t p = 0; p < pools.size(); ++p) {
    const PoolSpec& pool = pools[p];
    if (pool.hit_policy != HitPolicy::kAllPages && pool.hit_policy != HitPolicy::kTrailingPages) {
      return sci::StrFormat("pools[%d].hit_policy is %d (want all_pages 0 or trailing_pages 1)", p,
                             static_cast<int32_t>(pool.hit_policy));
    }
    if (pool.suffixes.empty()) return sci::StrFormat("pools[%d].suffixes is empty", p);
    for (size_t s = 0; s < pool.suffixes.size(); ++s) {
      // An empty suffix would make the logical key itself a page key: no
      // SGLang pool writes that, so it can only be a mistake.
      if (pool.suffixes[s].empty()) return sci::StrFormat("pools[%d].suffixes[%d] is empty", p, s);
    }
    total += pool.suffixes.size();
  }
  if (total > Layout::kMaxKeysPerPage) {
    return sci::StrFormat("pools have %d suffixes in total (more than %d keys per page)", total,
                           Layout::kMaxKeysPerPage);
  }
  return {};
}

// Everything about a spec that can be judged before building anything.
std::string ValidateSpec(const LayoutSpec& spec) {
  if (std::string problem = ValidateScalars(spec); !problem.empty()) return problem;
  if (std::string problem = ValidatePools(spec.pools); !problem.empty()) return problem;
  if (spec.pools.empty() && DerivedKeyCount(spec) > Layout::kMaxKeysPerPage) {
    return sci::StrFormat("tp_size %d, pp_size %d, tp_lcm_size %d give %d keys per page (more than %d)",
                           spec.tp_size, spec.pp_size, spec.tp_lcm_size, DerivedKeyCount(spec),
                           Layout::kMaxKeysPerPage);
  }
  return {};
}

// What names the keys: with pools the advertised key_prefix wins over the
// tag; without pools only the tag names keys.
struct KeyPrefixSource {
  std::string_view value;
  const char* field;  // for error messages
};
KeyPrefixSource KeyPrefixOf(const LayoutSpec& spec) {
  if (!spec.pools.empty() && !spec.key_prefix.empty()) return {spec.key_prefix, "key_prefix"};
  return {spec.extra_backend_tag, "extra_backend_tag"};
}

// Pools are described as (policy, trailing count, suffixes); a layout
// without pools is one all_pages pool of derived suffixes.
std::vector<PoolSpec> EffectivePools(const LayoutSpec& spec) {
  if (!spec.pools.empty()) return spec.pools;
  return {PoolSpec{DerivedSuffixes(spec), HitPolicy::kAllPages, 0}};
}

}  // namespace

std::unique_ptr<const Layout> Layout::Create(const LayoutSpec& spec, std::string* error) {
  if (std::string problem = ValidateSpec(spec); !problem.empty()) {
    *error = std::move(problem);
    return nullptr;
  }
  const std::vector<PoolSpec> pools = EffectivePools(spec);
  std::unique_ptr<Layout> layout(new Layout);
  layout->SetNames(spec);
  if (std::string problem = layout->CheckKeyLengths(spec, pools); !problem.empty()) {
    *error = std::move(problem);
    return nullptr;
  }
  const std::vector<std::vector<SuffixRef>> pool_refs = layout->FillSuffixArena(pools);
  layout->MakeLevels(pools, pool_refs);
  return layout;
}

void Layout::SetNames(const LayoutSpec& spec) {
  page_size_ = spec.page_size;
  is_eagle_ = spec.is_eagle;
  tenant_seed_ = TenantSeed(spec.tenant_id);
  const std::string_view tag = spec.extra_backend_tag;
  group_prefix_ = Concat({kGroupNamespace, tag, tag.empty() ? "" : "_"});
  const std::string_view prefix = KeyPrefixOf(spec).value;
  key_prefix_ = Concat({prefix, prefix.empty() ? "" : "_"});
}

std::string Layout::CheckKeyLengths(const LayoutSpec& spec, const std::vector<PoolSpec>& pools) {
  if (group_prefix_.size() + kPageHashHexLength > kMaxKeyBytes) {
    return sci::StrFormat("extra_backend_tag is %d bytes (group ids would exceed %d bytes)",
                           spec.extra_backend_tag.size(), kMaxKeyBytes);
  }
  size_t longest_suffix = 0;
  size_t longest_pool = 0, longest_index = 0;
  for (size_t p = 0; p < pools.size(); ++p) {
    for (size_t s = 0; s < pools[p].suffixes.size(); ++s) {
      if (pools[p].suffixes[s].size() > longest_suffix) {
        longest_suffix = pools[p].suffixes[s].size();
        longest_pool = p;
        longest_index = s;
      }
    }
  }
  max_key_length_ = key_prefix_.size() + kPageHashHexLength + longest_suffix;
  if (max_key_length_ <= kMaxKeyBytes) return {};
  const KeyPrefixSource prefix = KeyPrefixOf(spec);
  const std::string culprit = longest_suffix > prefix.value.size()
                                  ? sci::StrFormat("pools[%d].suffixes[%d]", longest_pool, longest_index)
                                  : std::string(prefix.field);
  return sci::StrFormat("%s is too long: keys would be %d bytes (at most %d)", culprit, max_key_length_,
                         kMaxKeyBytes);
}

std::vector<std::vector<Layout::SuffixRef>> Layout::FillSuffixArena(const std::vector<PoolSpec>& pools) {
  std::vector<std::vector<SuffixRef>> pool_refs(pools.size());
  for (size_t p = 0; p < pools.size(); ++p) {
    for (const std::string& suffix : pools[p].suffixes) {
      pool_refs[p].push_back(
          SuffixRef{static_cast<uint32_t>(suffix_arena_.size()), static_cast<uint32_t>(suffix.size())});
      suffix_arena_ += suffix;
    }
  }
  return pool_refs;
}

void Layout::MakeLevels(const std::vector<PoolSpec>& pools, const std::vector<std::vector<SuffixRef>>& pool_refs) {
  // Distinct trailing counts; a count of 0 covers no page and adds no level.
  std::vector<uint32_t>& thresholds = trailing_thresholds_;
  for (const PoolSpec& pool : pools) {
    if (pool.hit_policy == HitPolicy::kTrailingPages && pool.trailing_pages > 0) {
      thresholds.push_back(pool.trailing_pages);
    }
  }
  std::sort(thresholds.begin(), thresholds.end());
  thresholds.erase(std::unique(thresholds.begin(), thresholds.end()), thresholds.end());

  // Level j: the all_pages pools plus the trailing pools among the j largest
  // counts, each level's suffixes contiguous and in pool order.
  for (size_t j = 0; j <= thresholds.size(); ++j) {
    const uint32_t min_trailing = j == 0 ? UINT32_MAX : thresholds[thresholds.size() - j];
    Level level;
    level.first_suffix = static_cast<uint32_t>(suffix_refs_.size());
    for (size_t p = 0; p < pools.size(); ++p) {
      const bool covers = pools[p].hit_policy == HitPolicy::kAllPages ||
                          (j > 0 && pools[p].trailing_pages >= min_trailing);
      if (!covers) continue;
      suffix_refs_.insert(suffix_refs_.end(), pool_refs[p].begin(), pool_refs[p].end());
    }
    level.n_suffixes = static_cast<uint32_t>(suffix_refs_.size()) - level.first_suffix;
    levels_.push_back(level);
  }

  // Each level's keys as the page store names them: the key prefix, the
  // digest, a suffix (index/slot_plan.h).
  level_slots_.clear();
  for (const Level& level : levels_) {
    std::vector<SlotName> slots;
    for (uint32_t i = level.first_suffix; i < level.first_suffix + level.n_suffixes; ++i) {
      slots.push_back(SlotName::Named(key_prefix_, std::string(Suffix(i))));
    }
    level_slots_.push_back(std::move(slots));
  }
}

std::string Layout::GroupId(std::string_view page_hash_hex) const {
  return Concat({group_prefix_, page_hash_hex});
}

std::vector<std::string> Layout::KeysFor(std::string_view page_hash_hex, size_t page, size_t n_pages) const {
  const Level& level = LevelFor(page, n_pages);
  std::vector<std::string> keys;
  for (uint32_t i = level.first_suffix; i < level.first_suffix + level.n_suffixes; ++i) {
    keys.push_back(Concat({key_prefix_, page_hash_hex, Suffix(i)}));
  }
  return keys;
}

}  // namespace sci
