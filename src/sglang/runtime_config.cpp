// Mirrors rust-example/src/layout_builder.rs (from_json, pool_from_json):
// the same checks in the same order, so both bindings name the same field
// first for a config with several faults.
#include "sglang/runtime_config.h"

#include <concepts>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "common/cat.h"
#include "common/json_text.h"
#include "common/unknown_fields.h"

namespace sci {
namespace {

using nlohmann::json;

bool Invalid(std::string* error, std::string why) {
  *error = std::move(why);
  return false;
}

// Each leaves *field alone when the member is absent or null.
bool ReadUint32(const json& object, std::string_view name, std::string_view path, uint32_t* field,
                std::string* error, bool* given = nullptr) {
  const json* value = JsonMember(object, name);
  if (given != nullptr) *given = value != nullptr;
  if (value == nullptr) return true;
  if (!JsonUint32(*value, field)) {
    return Invalid(error, Cat(path, " must be an unsigned 32-bit integer, got ", JsonValueText(*value)));
  }
  return true;
}

bool ReadBool(const json& object, std::string_view name, bool* field, std::string* error) {
  const json* value = JsonMember(object, name);
  if (value == nullptr) return true;
  if (!value->is_boolean()) return Invalid(error, Cat(name, " must be true or false, got ", JsonValueText(*value)));
  *field = value->get<bool>();
  return true;
}

bool ReadString(const json& object, std::string_view name, std::string_view path, std::string* field,
                std::string* error) {
  const json* value = JsonMember(object, name);
  if (value == nullptr) return true;
  if (!value->is_string()) return Invalid(error, Cat(path, " must be a string, got ", JsonValueText(*value)));
  *field = value->get<std::string>();
  return true;
}

bool ReadPool(const json& value, const std::string& path, PoolSpec* pool, std::string* error) {
  if (!value.is_object()) return Invalid(error, Cat(path, " must be an object, got ", JsonValueText(value)));
  WarnUnknownFields(value, "SGLang runtime config", path, {"suffixes", "hit_policy", "trailing_pages"});
  const json* suffixes = JsonMember(value, "suffixes");
  if (suffixes == nullptr) return Invalid(error, Cat(path, ".suffixes is missing"));
  if (!suffixes->is_array()) {
    return Invalid(error, Cat(path, ".suffixes must be an array of strings, got ", JsonValueText(*suffixes)));
  }
  for (size_t i = 0; i < suffixes->size(); ++i) {
    const json& suffix = (*suffixes)[i];
    if (!suffix.is_string()) {
      return Invalid(error, Cat(path, ".suffixes[", i, "] must be a string, got ", JsonValueText(suffix)));
    }
    pool->suffixes.push_back(suffix.get<std::string>());
  }
  // trailing_pages is checked whatever the policy, as the Rust reader does.
  std::string policy;
  uint32_t trailing = 0;
  bool trailing_given = false;
  if (!ReadString(value, "hit_policy", path + ".hit_policy", &policy, error) ||
      !ReadUint32(value, "trailing_pages", path + ".trailing_pages", &trailing, error, &trailing_given)) {
    return false;
  }
  if (policy.empty() || policy == "all_pages") {
    pool->hit_policy = HitPolicy::kAllPages;
  } else if (policy == "trailing_pages") {
    if (!trailing_given) {
      return Invalid(error,
                     Cat(path, ".trailing_pages is missing (required by hit_policy \"trailing_pages\")"));
    }
    pool->hit_policy = HitPolicy::kTrailingPages;
    pool->trailing_pages = trailing;
  } else {
    return Invalid(error, Cat(path, ".hit_policy must be \"all_pages\" or \"trailing_pages\", got ",
                                       JsonValueText(policy)));
  }
  return true;
}

}  // namespace

bool ParseRuntimeConfigJson(std::string_view text, LayoutSpec* spec, std::string* error) {
  JsonDocument document;
  json& config = document.value;
  std::string why;
  if (!ParseJson(text, &config, &why)) return Invalid(error, "not valid JSON: " + why);
  if (!config.is_object()) return Invalid(error, "expected a JSON object, got " + JsonValueText(config));
  WarnUnknownFields(config, "SGLang runtime config", "",
                    {"page_size", "tp_size", "pp_size", "tp_lcm_size", "is_mla_model", "is_eagle",
                     "should_split_heads", "extra_backend_tag", "key_prefix", "tenant_id", "pools"});

  LayoutSpec read = *spec;
  bool page_size_given = false;
  if (!ReadUint32(config, "page_size", "page_size", &read.page_size, error, &page_size_given)) return false;
  if (!page_size_given && spec->page_size == 0) return Invalid(error, "page_size is missing");
  if (!ReadUint32(config, "tp_size", "tp_size", &read.tp_size, error) ||
      !ReadUint32(config, "pp_size", "pp_size", &read.pp_size, error) ||
      !ReadUint32(config, "tp_lcm_size", "tp_lcm_size", &read.tp_lcm_size, error) ||
      !ReadBool(config, "is_mla_model", &read.is_mla_model, error) ||
      !ReadBool(config, "is_eagle", &read.is_eagle, error) ||
      !ReadBool(config, "should_split_heads", &read.should_split_heads, error) ||
      !ReadString(config, "extra_backend_tag", "extra_backend_tag", &read.extra_backend_tag, error) ||
      !ReadString(config, "key_prefix", "key_prefix", &read.key_prefix, error) ||
      !ReadString(config, "tenant_id", "tenant_id", &read.tenant_id, error)) {
    return false;
  }
  if (const json* pools = JsonMember(config, "pools"); pools != nullptr) {
    if (!pools->is_array()) return Invalid(error, "pools must be an array, got " + JsonValueText(*pools));
    read.pools.clear();
    for (size_t i = 0; i < pools->size(); ++i) {
      PoolSpec pool;
      if (!ReadPool((*pools)[i], Cat("pools[", i, "]"), &pool, error)) return false;
      read.pools.push_back(std::move(pool));
    }
  }
  *spec = std::move(read);
  return true;
}

}  // namespace sci
