// Fuzzes the readers of the layouts workers publish as JSON: the vLLM
// descriptor (vllm::ParseDescriptorJson, vllm::LooksLikeDescriptor) and
// SGLang's runtime config (ParseRuntimeConfigJson). The input is the JSON
// text itself, so the committed seeds are plain descriptors and configs.
//
// Invariants, besides "never crash":
//   - a refusal sets an error and leaves the caller's spec as it was;
//   - a descriptor read has what the reader promises: at least one group,
//     every size at least 1, each group's block_size and the
//     main_event_block_size multiples of the one hash_block_size all groups
//     share, non-empty key prefixes, a window exactly for sliding-window
//     groups, a decimal seed; and the text looks like a descriptor;
//   - a bare descriptor (an object without "vllm_mooncake_store") reads the
//     same wrapped, and is refused for the same field, its path prefixed
//     with "vllm_mooncake_store.";
//   - a runtime config read onto a fresh spec had a page_size; read onto a
//     spec that has one it reads the same, and a config refused only for
//     its missing page_size is then read (or refused for something else);
//     Layout::Create either builds a read config or says why not;
//   - a descriptor read goes through vllm::Layout::Create likewise; a
//     layout built (of either family) answers a tiny query on an empty
//     index with no hit: CheckPrefix over a few tokens is 0 (and, for vLLM,
//     every CheckBlocks entry is 0 and the counts agree).
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_text.h"
#include "fuzz_check.h"
#include "index/index.h"
#include "sglang/layout.h"
#include "sglang/page_query.h"
#include "sglang/runtime_config.h"
#include "vllm/chunk_query.h"
#include "vllm/layout.h"
#include "vllm/layout_spec.h"

namespace sci::fuzz {
namespace {

// An index nothing is ever stored in: every query of it must miss.
Index& EmptyIndex() {
  static Index index;
  return index;
}

// A few tokens: a few blocks of `block_size` and one more, at most 256.
std::vector<uint32_t> FewTokens(uint32_t block_size) {
  std::vector<uint32_t> tokens(std::min<size_t>(size_t{3} * block_size + 1, 256));
  std::iota(tokens.begin(), tokens.end(), 1u);
  return tokens;
}

void CheckVllmLayout(const vllm::LayoutSpec& spec) {
  std::string refused;
  const auto layout = vllm::Layout::Create(spec, &refused);
  if (layout == nullptr) {
    SCI_FUZZ_CHECK(!refused.empty(), "vllm::Layout::Create refused without a reason");
    return;
  }
  const uint32_t b = layout->router_block_size();
  SCI_FUZZ_CHECK(b == spec.main_event_block_size, "router block %u, descriptor %u", b, spec.main_event_block_size);
  SCI_FUZZ_CHECK(layout->alignment() > 0 && layout->alignment() % b == 0, "alignment %u, block %u",
                 layout->alignment(), b);
  const std::vector<uint32_t> tokens = FewTokens(b);
  const PageQueryResult prefix = vllm::CheckPrefix(EmptyIndex(), *layout, vllm::ChainSource::Tokens(tokens), b);
  SCI_FUZZ_CHECK(prefix.prefix_hits == 0 && prefix.total_hits == 0, "an empty index answered %zu blocks",
                 static_cast<size_t>(prefix.prefix_hits));
  std::vector<uint8_t> hits(vllm::BlocksToCheck(*layout, tokens.size(), b), 9);
  SCI_FUZZ_CHECK(hits.size() == tokens.size() / b, "%zu blocks to check of %zu tokens", hits.size(), tokens.size());
  const PageQueryResult blocks = vllm::CheckBlocks(EmptyIndex(), *layout, vllm::ChainSource::Tokens(tokens), b, hits);
  SCI_FUZZ_CHECK(blocks.total_hits == 0 && blocks.prefix_hits == 0 && blocks.n_pages == hits.size(),
                 "an empty index: %zu block hits of %zu", static_cast<size_t>(blocks.total_hits),
                 static_cast<size_t>(blocks.n_pages));
  SCI_FUZZ_CHECK(std::all_of(hits.begin(), hits.end(), [](uint8_t hit) { return hit == 0; }),
                 "an empty index: a block reported present");
}

void CheckSglangLayout(const Layout& layout) {
  const uint32_t page_size = layout.page_size();
  const std::vector<uint32_t> tokens = FewTokens(page_size);
  const PageQueryResult prefix = CheckPrefix(EmptyIndex(), layout, tokens, page_size);
  SCI_FUZZ_CHECK(prefix.prefix_hits == 0 && prefix.total_hits == 0, "an empty index answered %zu pages",
                 static_cast<size_t>(prefix.prefix_hits));
}

bool SameGroup(const vllm::GroupSpec& a, const vllm::GroupSpec& b) {
  return a.group_id == b.group_id && a.kind == b.kind && a.block_size == b.block_size &&
         a.hash_block_size == b.hash_block_size && a.sliding_window == b.sliding_window &&
         a.key_prefixes == b.key_prefixes;
}

bool SameDescriptor(const vllm::LayoutSpec& a, const vllm::LayoutSpec& b) {
  if (a.algorithm != b.algorithm || a.python_hash_seed != b.python_hash_seed ||
      a.main_event_block_size != b.main_event_block_size || a.lcm_block_size != b.lcm_block_size ||
      a.tenant_id != b.tenant_id || a.groups.size() != b.groups.size()) {
    return false;
  }
  for (size_t g = 0; g < a.groups.size(); ++g) {
    if (!SameGroup(a.groups[g], b.groups[g])) return false;
  }
  return true;
}

bool SameConfig(const LayoutSpec& a, const LayoutSpec& b) {
  if (a.page_size != b.page_size || a.tp_size != b.tp_size || a.pp_size != b.pp_size ||
      a.tp_lcm_size != b.tp_lcm_size || a.is_mla_model != b.is_mla_model || a.is_eagle != b.is_eagle ||
      a.should_split_heads != b.should_split_heads || a.extra_backend_tag != b.extra_backend_tag ||
      a.key_prefix != b.key_prefix || a.tenant_id != b.tenant_id || a.pools.size() != b.pools.size()) {
    return false;
  }
  for (size_t p = 0; p < a.pools.size(); ++p) {
    if (a.pools[p].suffixes != b.pools[p].suffixes || a.pools[p].hit_policy != b.pools[p].hit_policy ||
        a.pools[p].trailing_pages != b.pools[p].trailing_pages) {
      return false;
    }
  }
  return true;
}

void CheckDescriptorSpec(const vllm::LayoutSpec& spec) {
  SCI_FUZZ_CHECK(!spec.groups.empty(), "a descriptor read with no group");
  SCI_FUZZ_CHECK(spec.algorithm == vllm::HashAlgorithm::kSha256 || spec.algorithm == vllm::HashAlgorithm::kSha256Cbor,
                 "algorithm %d", static_cast<int>(spec.algorithm));
  SCI_FUZZ_CHECK(!spec.python_hash_seed.empty() && spec.python_hash_seed.size() <= 10 &&
                     spec.python_hash_seed.find_first_not_of("0123456789") == std::string::npos,
                 "seed \"%s\"", spec.python_hash_seed.c_str());
  const uint32_t hash_block_size = spec.groups[0].hash_block_size;
  SCI_FUZZ_CHECK(hash_block_size > 0, "hash_block_size 0");
  SCI_FUZZ_CHECK(spec.main_event_block_size > 0 && spec.main_event_block_size % hash_block_size == 0,
                 "main_event_block_size %u, hash_block_size %u", spec.main_event_block_size, hash_block_size);
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    const vllm::GroupSpec& group = spec.groups[g];
    SCI_FUZZ_CHECK(group.hash_block_size == hash_block_size, "group %zu hashes in blocks of %u, group 0 of %u", g,
                   group.hash_block_size, hash_block_size);
    SCI_FUZZ_CHECK(group.block_size > 0 && group.block_size % hash_block_size == 0, "group %zu block_size %u", g,
                   group.block_size);
    SCI_FUZZ_CHECK(group.kind == vllm::GroupKind::kFullAttention || group.kind == vllm::GroupKind::kSlidingWindow ||
                       group.kind == vllm::GroupKind::kMamba,
                   "group %zu kind %d", g, static_cast<int>(group.kind));
    SCI_FUZZ_CHECK((group.kind == vllm::GroupKind::kSlidingWindow) == (group.sliding_window > 0),
                   "group %zu kind %d with window %u", g, static_cast<int>(group.kind), group.sliding_window);
    SCI_FUZZ_CHECK(!group.key_prefixes.empty(), "group %zu has no key prefix", g);
    for (const std::string& prefix : group.key_prefixes) SCI_FUZZ_CHECK(!prefix.empty(), "group %zu: empty prefix", g);
  }
}

void CheckDescriptor(std::string_view text) {
  vllm::LayoutSpec spec;
  spec.tenant_id = "untouched";
  std::string error;
  const bool read = vllm::ParseDescriptorJson(text, &spec, &error);
  const bool looks = vllm::LooksLikeDescriptor(text);
  if (!read) {
    SCI_FUZZ_CHECK(!error.empty(), "a refusal without a reason");
    SCI_FUZZ_CHECK(spec.tenant_id == "untouched" && spec.groups.empty(), "a refusal changed the spec");
  } else {
    CheckDescriptorSpec(spec);
    SCI_FUZZ_CHECK(looks, "a descriptor read that does not look like one");
    CheckVllmLayout(spec);
  }

  nlohmann::json root;
  std::string why;
  ParseJson(text, &root, &why);
  // A byte order mark is skipped at the start of a text only, not inside a wrapper.
  if (!root.is_object() || root.contains("vllm_mooncake_store") || text.starts_with("\xEF\xBB\xBF")) return;
  const std::string wrapped_text = "{\"vllm_mooncake_store\":" + std::string(text) + "}";
  vllm::LayoutSpec wrapped;
  std::string wrapped_error;
  const bool wrapped_read = vllm::ParseDescriptorJson(wrapped_text, &wrapped, &wrapped_error);
  SCI_FUZZ_CHECK(vllm::LooksLikeDescriptor(wrapped_text), "a wrapped descriptor that does not look like one");
  SCI_FUZZ_CHECK(wrapped_read == read, "bare %d, wrapped %d (%s)", read, wrapped_read, wrapped_error.c_str());
  if (read) {
    SCI_FUZZ_CHECK(SameDescriptor(spec, wrapped), "wrapping changed the spec");
  } else {
    // The path, not the whole message: a problem may cite another field by its own path.
    const std::string path = error.substr(0, error.find(": "));
    SCI_FUZZ_CHECK(wrapped_error.starts_with("vllm_mooncake_store." + path + ": "), "bare \"%s\", wrapped \"%s\"",
                   error.c_str(), wrapped_error.c_str());
  }
}

void CheckRuntimeConfig(std::string_view text) {
  LayoutSpec fresh;
  std::string error;
  const bool read = ParseRuntimeConfigJson(text, &fresh, &error);
  SCI_FUZZ_CHECK(read || !error.empty(), "a refusal without a reason");
  if (!read) SCI_FUZZ_CHECK(SameConfig(fresh, LayoutSpec{}), "a refusal changed the spec");

  LayoutSpec given;
  given.page_size = 7;
  std::string given_error;
  const bool given_read = ParseRuntimeConfigJson(text, &given, &given_error);
  if (read) {
    SCI_FUZZ_CHECK(given_read && SameConfig(fresh, given), "a spec with a page size read it differently (%s)",
                   given_error.c_str());
    nlohmann::json root;
    std::string why;
    SCI_FUZZ_CHECK(ParseJson(text, &root, &why), "read text that is not JSON: %s", why.c_str());
    SCI_FUZZ_CHECK(root.is_object() && root.contains("page_size") && !root["page_size"].is_null(),
                   "read without a page_size");
    std::string refused;
    const auto layout = Layout::Create(fresh, &refused);
    SCI_FUZZ_CHECK(layout != nullptr || !refused.empty(), "Layout::Create refused without a reason");
    if (layout != nullptr) CheckSglangLayout(*layout);
  } else if (error == "page_size is missing") {
    SCI_FUZZ_CHECK(given_read ? given.page_size == 7 : given_error != error, "page size given, then \"%s\"",
                   given_error.c_str());
  } else {
    SCI_FUZZ_CHECK(!given_read && given_error == error, "fresh \"%s\", given \"%s\"", error.c_str(),
                   given_error.c_str());
  }
}

}  // namespace
}  // namespace sci::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  sci::fuzz::CheckDescriptor(text);
  sci::fuzz::CheckRuntimeConfig(text);
  return 0;
}
