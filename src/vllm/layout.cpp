#include "vllm/layout.h"

#include <numeric>

#include "common/format.h"

namespace sci::vllm {
namespace {

// The checks of Create that need no layout, in descriptor order; "" if the
// spec can be honoured.
std::string ValidateSpec(const LayoutSpec& spec) {
  if (spec.main_event_block_size == 0) return "main_event_block_size is 0";
  if (spec.groups.empty()) return "groups is empty";
  if (spec.groups.size() > Layout::kMaxGroups) {
    return sci::StrFormat("groups has %d entries (at most %d)", spec.groups.size(), Layout::kMaxGroups);
  }
  const uint32_t hash_block_size = spec.groups[0].hash_block_size;
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    const GroupSpec& group = spec.groups[g];
    if (group.hash_block_size == 0) return sci::StrFormat("groups[%d].hash_block_size is 0", g);
    if (group.hash_block_size != hash_block_size) {
      return sci::StrFormat("groups[%d].hash_block_size is %d, but groups[0]'s is %d (the chain is one)", g,
                             group.hash_block_size, hash_block_size);
    }
    if (group.block_size == 0 || group.block_size % hash_block_size != 0) {
      return sci::StrFormat("groups[%d].block_size is %d (must be a positive multiple of hash_block_size %d)", g,
                             group.block_size, hash_block_size);
    }
    if (group.kind == GroupKind::kSlidingWindow && group.sliding_window == 0) {
      return sci::StrFormat("groups[%d].sliding_window is 0 (a sliding_window group needs its window)", g);
    }
    if (group.key_prefixes.empty()) return sci::StrFormat("groups[%d].key_prefixes is empty", g);
    if (group.key_prefixes.size() > Layout::kMaxPrefixesPerGroup) {
      return sci::StrFormat("groups[%d].key_prefixes has %d entries (at most %d)", g, group.key_prefixes.size(),
                             Layout::kMaxPrefixesPerGroup);
    }
    for (size_t p = 0; p < group.key_prefixes.size(); ++p) {
      const std::string& prefix = group.key_prefixes[p];
      if (prefix.empty()) return sci::StrFormat("groups[%d].key_prefixes[%d] is empty", g, p);
      if (prefix.size() + 1 + kPageHashHexLength > Layout::kMaxKeyBytes) {
        return sci::StrFormat("groups[%d].key_prefixes[%d] is %d bytes (a key would exceed %d)", g, p,
                               prefix.size(), Layout::kMaxKeyBytes);
      }
    }
  }
  return "";
}

// lcm(a, b), or 0 past kMaxAlignment.
uint64_t BoundedLcm(uint64_t a, uint64_t b) {
  const uint64_t lcm = std::lcm(a, b);
  return lcm > Layout::kMaxAlignment ? 0 : lcm;
}

}  // namespace

std::unique_ptr<const Layout> Layout::Create(const LayoutSpec& spec, std::string* error) {
  if (std::string problem = ValidateSpec(spec); !problem.empty()) {
    *error = std::move(problem);
    return nullptr;
  }
  std::unique_ptr<Layout> layout(new Layout());
  layout->algorithm_ = spec.algorithm;
  layout->none_hash_ = NoneHash(spec.algorithm, spec.python_hash_seed);
  layout->hash_block_size_ = spec.groups[0].hash_block_size;
  layout->router_block_size_ = spec.main_event_block_size;
  layout->tenant_seed_ = TenantSeed(spec.tenant_id);
  layout->memo_domain_ = LayoutMemoDomain(spec.algorithm, layout->none_hash_);

  uint64_t alignment = BoundedLcm(spec.main_event_block_size,
                                  spec.lcm_block_size == 0 ? spec.main_event_block_size : spec.lcm_block_size);
  uint64_t chunk_lcm = 1;  // of every group's block_size: it divides the alignment, so it is bounded too
  bool every_group_full_attention = true;
  for (const GroupSpec& spec_group : spec.groups) {
    alignment = alignment == 0 ? 0 : BoundedLcm(alignment, spec_group.block_size);
    chunk_lcm = BoundedLcm(chunk_lcm, spec_group.block_size);
    every_group_full_attention = every_group_full_attention && spec_group.kind == GroupKind::kFullAttention;
    Group group;
    group.kind = spec_group.kind;
    group.block_size = spec_group.block_size;
    if (group.kind == GroupKind::kSlidingWindow) {
      // The chunks holding the window's last sliding_window - 1 tokens
      // before the prefix's end: vLLM recomputes the last one itself.
      // In 64 bits: in 32, a window within block_size of 2^32 wrapped to
      // 0 chunks and its group vouched for nothing (issue #34, R3). Both
      // terms are below 2^32, so the quotient fits window_chunks.
      group.window_chunks = static_cast<uint32_t>(
          (uint64_t{spec_group.sliding_window} - 1 + uint64_t{group.block_size} - 1) / group.block_size);
    }
    layout->has_full_attention_ = layout->has_full_attention_ || group.kind == GroupKind::kFullAttention;
    group.first_prefix = static_cast<uint32_t>(layout->prefixes_.size());
    group.n_prefixes = static_cast<uint32_t>(spec_group.key_prefixes.size());
    std::vector<SlotName> slots;
    for (const std::string& prefix : spec_group.key_prefixes) {
      std::string with_separator = prefix + std::string(kKeySeparator);
      // A prefix holding a run of 64 hex digits would split the key there
      // (fingerprint.h): such keys are fingerprinted whole, as the writer does.
      const bool hash_ended = HexRunEnd(with_separator) == kNoHexRun;
      layout->secrets_.push_back(hash_ended ? HashEndSecretOf(layout->tenant_seed_, with_separator) : HashEndSecret{});
      layout->hash_ended_.push_back(hash_ended ? 1 : 0);
      slots.push_back(SlotName::Named(with_separator, ""));
      layout->prefixes_.push_back(std::move(with_separator));
    }
    layout->group_slots_.push_back(std::move(slots));
    layout->groups_.push_back(group);
  }
  if (alignment == 0) {
    *error = sci::StrFormat("the alignment (lcm of main_event_block_size, coordinator.lcm_block_size and every "
                             "groups[].block_size) exceeds %d tokens",
                             kMaxAlignment);
    return nullptr;
  }
  layout->alignment_ = static_cast<uint32_t>(alignment);
  // What the engine loads, in tokens (docs/vllm-family.md, "Credit in
  // tokens"): with full attention alone, whole chunks of every group, so a
  // multiple of each group's block_size, whatever the router's block; a
  // window or Mamba state is kept only at the alignment's multiples.
  layout->full_attention_only_ = every_group_full_attention;
  layout->load_granularity_ = every_group_full_attention ? static_cast<uint32_t>(chunk_lcm) : layout->alignment_;
  return layout;
}

Fingerprint Layout::WholeKeyFingerprint(size_t prefix, const BlockDigest& digest) const {
  char key[kMaxKeyBytes];
  const std::string& head = prefixes_[prefix];
  head.copy(key, head.size());
  ToHex(digest, key + head.size());
  return FingerprintOf(tenant_seed_, std::string_view(key, head.size() + kPageHashHexLength));
}

std::vector<std::string> Layout::KeysFor(size_t group, std::string_view chunk_hash_hex) const {
  std::vector<std::string> keys;
  const Group& g = groups_[group];
  for (uint32_t p = g.first_prefix; p < g.first_prefix + g.n_prefixes; ++p) {
    keys.push_back(prefixes_[p] + std::string(chunk_hash_hex));
  }
  return keys;
}

}  // namespace sci::vllm
