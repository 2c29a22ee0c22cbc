#include "sglang_workload.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_format.h"
#include "common/splitmix64.h"
#include "page_life.h"
#include "text.h"
#include "sglang/page_hash.h"

namespace sci::tools {

uint64_t SplitMix64(uint64_t x) { return sci::SplitMix64(x); }  // one step from state x

std::vector<std::vector<uint32_t>> MakePrompts(const WorkloadSpec& spec, uint32_t page_size, bool eagle) {
  const size_t extra = eagle ? 1 : 0;
  const size_t length = size_t{spec.pages} * page_size + extra;
  const size_t shared = spec.shared_prefix_pages == 0
                            ? 0
                            : std::min(length, size_t{spec.shared_prefix_pages} * page_size + extra);
  const uint32_t vocab = spec.vocab == 0 ? 1 : spec.vocab;
  std::vector<std::vector<uint32_t>> prompts(spec.prompts);
  for (uint32_t p = 0; p < spec.prompts; ++p) {
    std::vector<uint32_t>& tokens = prompts[p];
    tokens.resize(length);
    for (size_t j = 0; j < length; ++j) {
      const uint64_t stream = j < shared ? 0 : uint64_t{p} + 1;
      tokens[j] = static_cast<uint32_t>(
          SplitMix64(spec.seed * 0x9E3779B97F4A7C15ull + stream * 0xBF58476D1CE4E5B9ull + j) % vocab);
    }
  }
  return prompts;
}

void ForEachWorkloadEvent(const Layout& layout, std::string_view tenant,
                          const std::vector<std::vector<uint32_t>>& prompts, Generation generation,
                          bool end_with_cleared, const std::function<void(const ScriptEvent&)>& emit) {
  // A page is identified by its hash *and* its place from the end: with
  // trailing pools, the same page needs more keys nearer the end.
  std::set<std::pair<std::string, size_t>> published;
  ScriptEvent event;
  event.stored = true;
  event.tenant_id = tenant.empty() ? "default" : std::string(tenant);
  event.medium = "cpu";
  for (const std::vector<uint32_t>& tokens : prompts) {
    const std::vector<std::string> hashes = PageHashesHex(tokens, layout.page_size(), layout.is_eagle());
    for (size_t page = 0; page < hashes.size(); ++page) {
      if (!published.emplace(hashes[page], hashes.size() - page).second) continue;
      event.group_id = layout.GroupId(hashes[page]);
      event.base_block_idx = page;
      std::vector<std::string> keys = layout.KeysFor(hashes[page], page, hashes.size());
      if (generation == Generation::kSecond) {
        ForEachPageLifeEvent(published.size() - 1, keys, event, emit);
        continue;
      }
      for (std::string& key : keys) {
        event.object_key = std::move(key);
        emit(event);
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

namespace {

bool ParsePoolFlag(std::string_view text, PoolSpec* pool, std::string* error) {
  std::string_view suffixes = text;
  if (const size_t at = text.find('@'); at != std::string_view::npos) {
    suffixes = text.substr(0, at);
    const std::string_view policy = text.substr(at + 1);
    constexpr std::string_view kTrailing = "trailing=";
    uint32_t count = 0;
    if (policy.substr(0, kTrailing.size()) != kTrailing ||
        !ParseUnsigned(policy.substr(kTrailing.size()), &count)) {
      *error = absl::StrFormat("--pool \"%s\": after '@' write trailing=<pages>", text);
      return false;
    }
    pool->hit_policy = HitPolicy::kTrailingPages;
    pool->trailing_pages = count;
  }
  for (std::string_view suffix : Split(suffixes, ",", /*skip_empty=*/false)) pool->suffixes.emplace_back(suffix);
  return true;
}

}  // namespace

bool ApplyLayoutFlags(const CommandLine& flags, LayoutSpec* spec, std::string* error) {
  uint64_t value = 0;
  const auto uint_flag = [&](std::string_view name, uint32_t* field) {
    if (!flags.Has(name)) return true;
    if (!flags.GetUint(name, 0, UINT32_MAX, &value, error)) return false;
    *field = static_cast<uint32_t>(value);
    return true;
  };
  if (!uint_flag("page-size", &spec->page_size) || !uint_flag("tp", &spec->tp_size) ||
      !uint_flag("pp", &spec->pp_size) || !uint_flag("tp-lcm", &spec->tp_lcm_size)) {
    return false;
  }
  if (flags.Has("mla")) spec->is_mla_model = true;
  if (flags.Has("eagle")) spec->is_eagle = true;
  if (flags.Has("split-heads")) spec->should_split_heads = true;
  if (flags.Has("tag")) spec->extra_backend_tag = flags.Get("tag");
  if (flags.Has("key-prefix")) spec->key_prefix = flags.Get("key-prefix");
  if (flags.Has("tenant")) spec->tenant_id = flags.Get("tenant");
  if (flags.Has("pool")) {
    spec->pools.clear();
    for (const std::string& text : flags.All("pool")) {
      PoolSpec pool;
      if (!ParsePoolFlag(text, &pool, error)) return false;
      spec->pools.push_back(std::move(pool));
    }
  }
  return true;
}

}  // namespace sci::tools
