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
//     every CheckBlocks entry is 0 and the counts agree);
//   - a vLLM layout built answers, on an index holding some of the chunks
//     of a few tokens (which ones: bits of a hash of the text), exactly
//     what a straightforward reference says (vllm_reference.h: the digests
//     hashed again without the memo, every chunk's keys looked up one by
//     one, Dynamo's prefix and the block hits worked out from them), by
//     tokens (a first, second and third sight, so the memo is filled and
//     used) and by digests;
//   - sci_layout_new_json, the C entry point, agrees: SCI_OK with a layout
//     of the family and block size read exactly when the readers and
//     Create build one, else SCI_ERR_INVALID_ARGUMENT, no layout, and an
//     error naming the family.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/json_text.h"
#include "fuzz_check.h"
#include "shared_cache_index.h"
#include "vllm_reference.h"
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

// Some chunks of `tokens` stored (by the bits of `seed`), then every query
// compared with the reference.
void CheckVllmAnswers(const vllm::LayoutSpec& spec, const vllm::Layout& layout, const std::vector<uint32_t>& tokens,
                      uint64_t seed) {
  const uint32_t b = layout.router_block_size();
  const uint32_t hash_block = spec.groups[0].hash_block_size;
  if (tokens.size() / hash_block > 64) return;  // a few blocks are enough (and keep the harness fast)
  const std::vector<vllm::BlockDigest> chain =
      vllm::HashChain(spec.algorithm, spec.python_hash_seed, tokens, hash_block);
  Index index(vllm::VllmIndexOptions());
  std::vector<std::string> keys;
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    const size_t per_chunk = spec.groups[g].block_size / hash_block;
    for (size_t c = 0; (c + 1) * per_chunk <= chain.size(); ++c, seed = seed >> 1 | seed << 63) {
      if ((seed & 1) == 0) continue;
      std::string hex(kPageHashHexLength, '\0');
      ToHex(chain[(c + 1) * per_chunk - 1], hex.data());
      for (std::string& key : layout.KeysFor(g, hex)) keys.push_back(std::move(key));
    }
  }
  std::vector<Event> events;
  for (const std::string& key : keys) events.push_back(Event{EventKind::kStored, key, {}, spec.tenant_id, "cpu"});
  index.ApplyBatch(1, events);
  const VllmReference reference(index, spec, layout, chain, tokens.size());
  const size_t want_prefix = reference.Prefix();
  const std::vector<uint8_t> want_hits = reference.Blocks();
  for (int sight = 1; sight <= 3; ++sight) {
    const size_t prefix = vllm::CheckPrefix(index, layout, vllm::ChainSource::Tokens(tokens), b).prefix_hits;
    SCI_FUZZ_CHECK(prefix == want_prefix, "prefix %zu (sight %d), the reference %zu", prefix, sight, want_prefix);
    std::vector<uint8_t> hits(vllm::BlocksToCheck(layout, tokens.size(), b), 9);
    vllm::CheckBlocks(index, layout, vllm::ChainSource::Tokens(tokens), b, hits);
    SCI_FUZZ_CHECK(hits == want_hits, "block hits (sight %d) differ from the reference", sight);
  }
  std::vector<uint8_t> digests;
  for (const vllm::BlockDigest& digest : chain) digests.insert(digests.end(), digest.begin(), digest.end());
  const size_t by_digests =
      vllm::CheckPrefix(index, layout, vllm::ChainSource::Digests(digests.data(), chain.size(), tokens.size()), b)
          .prefix_hits;
  SCI_FUZZ_CHECK(by_digests == want_prefix, "prefix %zu by digests, the reference %zu", by_digests, want_prefix);
}

void CheckVllmLayout(const vllm::LayoutSpec& spec, uint64_t seed) {
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
  CheckVllmAnswers(spec, *layout, tokens, seed);
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

// Whether `text` builds a layout through the library's readers (which
// family, and its block size), for the C entry point's check.
struct Built {
  bool ok = false;
  bool vllm = false;
  uint32_t block_size = 0;
};

void CheckDescriptor(std::string_view text, Built* built) {
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
    CheckVllmLayout(spec, XXH3_64bits(text.data(), text.size()));
    std::string refused;
    if (looks && vllm::Layout::Create(spec, &refused) != nullptr) *built = Built{true, true, spec.main_event_block_size};
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

void CheckRuntimeConfig(std::string_view text, Built* built) {
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
    if (layout != nullptr && !vllm::LooksLikeDescriptor(text)) *built = Built{true, false, fresh.page_size};
  } else if (error == "page_size is missing") {
    SCI_FUZZ_CHECK(given_read ? given.page_size == 7 : given_error != error, "page size given, then \"%s\"",
                   given_error.c_str());
  } else {
    SCI_FUZZ_CHECK(!given_read && given_error == error, "fresh \"%s\", given \"%s\"", error.c_str(),
                   given_error.c_str());
  }
}

// sci_layout_new_json reads a descriptor when the text looks like one, else
// a runtime config: it builds exactly what the readers and Create build.
void CheckCApi(std::string_view text, const Built& built) {
  sci_layout* layout = nullptr;
  const sci_status status = sci_layout_new_json(sci_str{text.data(), text.size()}, &layout);
  if (built.ok) {
    SCI_FUZZ_CHECK(status == SCI_OK && layout != nullptr, "sci_layout_new_json: status %d (%s)", status,
                   sci_last_error());
    SCI_FUZZ_CHECK(sci_layout_get_family(layout) == (built.vllm ? SCI_LAYOUT_VLLM : SCI_LAYOUT_SGLANG),
                   "family %d", sci_layout_get_family(layout));
    SCI_FUZZ_CHECK(sci_layout_block_size(layout) == built.block_size, "block size %u, read %u",
                   sci_layout_block_size(layout), built.block_size);
  } else {
    SCI_FUZZ_CHECK(status == SCI_ERR_INVALID_ARGUMENT && layout == nullptr, "sci_layout_new_json: status %d", status);
    const std::string_view error = sci_last_error();
    SCI_FUZZ_CHECK(error.find("vLLM descriptor: ") != std::string_view::npos ||
                       error.find("SGLang runtime config: ") != std::string_view::npos,
                   "an error naming no family: %s", sci_last_error());
  }
  sci_layout_free(layout);
}

}  // namespace
}  // namespace sci::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  sci::fuzz::Built built;
  sci::fuzz::CheckDescriptor(text, &built);
  sci::fuzz::CheckRuntimeConfig(text, &built);
  sci::fuzz::CheckCApi(text, built);
  return 0;
}
