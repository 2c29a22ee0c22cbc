// A deterministic vLLM workload for sci-publish: the prompts of
// sglang_workload.h (the same token ids, so a router can recompute them),
// stored as vLLM workers running the MooncakeStoreConnector store them
// (docs/vllm-family.md): every chunk of every KV-cache group, one object per
// key prefix. Keys come from sci::vllm::Layout::KeysFor and digests from
// sci::vllm::HashChain, never re-derived here.
//
// Prompt length. A prompt of P router blocks (main_event_block_size b) has
// P * b + 1 tokens: a vLLM router never credits a request's last token, so
// without the extra one the last block could never be claimed and a fully
// stored prompt would answer P - 1 blocks. The ids are MakePrompts' in its
// one-extra-token form (the eagle one), whose shared prefix covers
// S * b + 1 tokens: the first S blocks hash alike across prompts, block S
// does not.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "publish_script.h"
#include "sglang_workload.h"
#include "vllm/layout.h"
#include "vllm/layout_spec.h"

namespace sci::tools {

// A descriptor and the layout built from it: the chain's seed and algorithm
// are the descriptor's, which the layout keeps only as NONE_HASH.
struct VllmLayout {
  vllm::LayoutSpec spec;
  std::unique_ptr<const vllm::Layout> layout;
};

// Reads a descriptor (vllm::ParseDescriptorJson) and builds its layout
// (vllm::Layout::Create); on error returns false with the reader's message.
bool LoadVllmLayout(std::string_view json, VllmLayout* out, std::string* error);

// The workload's prompts for router blocks of `block_size` tokens: P * b + 1
// tokens each (see above).
std::vector<std::vector<uint32_t>> MakeVllmPrompts(const WorkloadSpec& spec, uint32_t block_size);

// Emits the events of every object of every distinct chunk of `prompts`,
// chunk by chunk in token order (at each hash-block boundary, the groups
// whose chunks end there, in group order; a chunk's keys in prefix order),
// under the descriptor's tenant. A chunk (group, hash) shared by several
// prompts is published once, as vLLM stores it once. The first generation
// stores each object on cpu with the connector's group id
// "vllm-mooncake-store:<key prefix up to @tp_rank:>@<hash>"; the second
// names the KV group ("0", "1", ...) as that master does, gives each chunk
// the life of page_life.h (n counting distinct chunks from 0) and, with
// `end_with_cleared`, ends with a `cleared` of the tenant.
void ForEachVllmWorkloadEvent(const VllmLayout& layout, const std::vector<std::vector<uint32_t>>& prompts,
                              Generation generation, bool end_with_cleared,
                              const std::function<void(const ScriptEvent&)>& emit);

}  // namespace sci::tools
