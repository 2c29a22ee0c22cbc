#include "vllm_workload.h"

#include <set>
#include <string>
#include <utility>

#include "page_life.h"
#include "query/digest.h"
#include "vllm/block_hash.h"

namespace sci::tools {

bool LoadVllmLayout(std::string_view json, VllmLayout* out, std::string* error) {
  vllm::LayoutSpec spec;
  if (!vllm::ParseDescriptorJson(json, &spec, error)) return false;
  std::unique_ptr<const vllm::Layout> layout = vllm::Layout::Create(spec, error);
  if (layout == nullptr) return false;
  out->spec = std::move(spec);
  out->layout = std::move(layout);
  return true;
}

std::vector<std::vector<uint32_t>> MakeVllmPrompts(const WorkloadSpec& spec, uint32_t block_size) {
  return MakePrompts(spec, block_size, /*eagle=*/true);
}

namespace {

// The connector's group id for one object: its key up to "@tp_rank:" is
// "[cache_prefix@]model_name store_namespace", what every prefix and group
// of the chunk shares.
std::string FirstGenerationGroupId(std::string_view key, std::string_view hex) {
  size_t end = key.find("@tp_rank:");
  if (end == std::string_view::npos) end = key.size() - hex.size() - 1;
  std::string group = "vllm-mooncake-store:";
  group.append(key.substr(0, end));
  group.push_back('@');
  group.append(hex);
  return group;
}

}  // namespace

void ForEachVllmWorkloadEvent(const VllmLayout& workload, const std::vector<std::vector<uint32_t>>& prompts,
                              Generation generation, bool end_with_cleared,
                              const std::function<void(const ScriptEvent&)>& emit) {
  const vllm::Layout& layout = *workload.layout;
  const uint32_t hash_block = layout.hash_block_size();
  std::set<std::pair<size_t, std::string>> published;  // (group, chunk hash hex)
  ScriptEvent event;
  event.stored = true;
  event.tenant_id = workload.spec.tenant_id.empty() ? "default" : workload.spec.tenant_id;
  event.medium = "cpu";
  std::string hex(kPageHashHexLength, '0');
  for (const std::vector<uint32_t>& tokens : prompts) {
    const std::vector<vllm::BlockDigest> chain =
        vllm::HashChain(workload.spec.algorithm, workload.spec.python_hash_seed, tokens, hash_block);
    for (size_t end = hash_block; end <= tokens.size(); end += hash_block) {
      // A chunk of group g ends at a multiple of its block size and is keyed
      // by the sub-hash that ends it.
      ToHex(chain[end / hash_block - 1], hex.data());
      for (size_t g = 0; g < layout.groups().size(); ++g) {
        const uint32_t chunk = layout.groups()[g].block_size;
        if (end % chunk != 0 || !published.emplace(g, hex).second) continue;
        event.base_block_idx = (end - chunk) / layout.router_block_size();
        std::vector<std::string> keys = layout.KeysFor(g, hex);
        if (generation == Generation::kSecond) {
          event.group_id = std::to_string(g);
          ForEachPageLifeEvent(published.size() - 1, keys, event, emit);
          continue;
        }
        for (std::string& key : keys) {
          event.group_id = FirstGenerationGroupId(key, hex);
          event.object_key = std::move(key);
          emit(event);
        }
      }
    }
  }
  if (generation == Generation::kSecond && end_with_cleared) {
    ScriptEvent cleared;
    cleared.stored = false;
    cleared.cleared = true;
    cleared.tenant_id = event.tenant_id;
    cleared.medium.clear();
    emit(cleared);
  }
}

}  // namespace sci::tools
