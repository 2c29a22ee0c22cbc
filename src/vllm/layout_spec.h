// What the library reads of the descriptor a vLLM worker running the
// MooncakeStoreConnector publishes (docs/vllm-family.md, "The descriptor"),
// as plain values: the vLLM family's counterpart of SGLang's LayoutSpec.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "vllm/block_hash.h"

namespace sci::vllm {

enum class GroupKind : uint8_t {
  kFullAttention = 0,  // "full_attention": every chunk up to the prefix
  kSlidingWindow = 1,  // "sliding_window": the last ceil((window - 1) / block_size) chunks
  kMamba = 2,          // "mamba" (align mode): the chunk ending exactly at the prefix
};

// One KV-cache group of the descriptor's `groups`.
struct GroupSpec {
  uint32_t group_id = 0;        // the descriptor's group_id (informational)
  GroupKind kind = GroupKind::kFullAttention;
  uint32_t block_size = 0;       // tokens a chunk of this group spans
  uint32_t hash_block_size = 0;  // tokens per sub-hash (the chain's block)
  uint32_t sliding_window = 0;   // tokens, kSlidingWindow only
  // Every object a chunk needs is "<prefix>@<chunk hash hex>", one per prefix.
  std::vector<std::string> key_prefixes;
};

struct LayoutSpec {
  HashAlgorithm algorithm = HashAlgorithm::kSha256;
  std::string python_hash_seed = "0";  // from hash.seed_policy "pythonhashseed-N"
  uint32_t main_event_block_size = 0;  // the router's block size b
  uint32_t lcm_block_size = 0;         // coordinator.lcm_block_size; 0 = main_event_block_size
  std::string tenant_id;               // empty = "default"
  std::vector<GroupSpec> groups;
};

// Reads the descriptor, bare or wrapped as {"vllm_mooncake_store": {...}}.
// On error returns false and sets *error to the JSON path and the problem
// ("groups[1].kind: \"linear\" is not a known kind"), the paths of a
// wrapped descriptor starting "vllm_mooncake_store.". Unknown fields are
// ignored; null means absent. A descriptor read is one whose block sizes
// fit each other (each group's block_size and main_event_block_size are
// multiples of the one hash_block_size every group shares); key lengths
// are Layout::Create's to judge. *spec is left alone on error.
bool ParseDescriptorJson(std::string_view json, LayoutSpec* spec, std::string* error);

// Whether `json` is a vLLM descriptor (bare or wrapped) rather than another
// family's runtime config: it has "vllm_mooncake_store" at the top, or no
// "page_size" (SGLang's) and one of the fields only a descriptor has
// (schema_version, groups, main_event_block_size, hash, coordinator). False
// for text that is not a JSON object.
bool LooksLikeDescriptor(std::string_view json);

}  // namespace sci::vllm
