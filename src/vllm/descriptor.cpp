// The descriptor reader (layout_spec.h): every field the library acts on is
// checked here, by its JSON path, so that a worker whose descriptor we
// cannot honour is refused by name instead of hashed wrong and never hit.
#include <algorithm>
#include <concepts>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/cat.h"
#include "common/json_text.h"
#include "common/unknown_fields.h"
#include "vllm/layout.h"
#include "vllm/layout_spec.h"

namespace sci::vllm {
namespace {

using nlohmann::json;

constexpr std::string_view kWrapper = "vllm_mooncake_store";

// Reads one descriptor; each Get names the field by `base` + its name, and
// leaves the first error in *error.
class DescriptorReader {
 public:
  explicit DescriptorReader(std::string* error) : error_(error) {}

  bool Read(const json& descriptor, std::string_view base, LayoutSpec* spec);

 private:
  static std::string Path(std::string_view base, std::string_view name) {
    return base.empty() ? std::string(name) : Cat(base, ".", name);
  }
  bool Fail(std::string_view path, std::string_view problem) {
    *error_ = Cat(path, ": ", problem);
    return false;
  }
  bool WrongType(std::string_view path, std::string_view want, const json& value) {
    return Fail(path, Cat("must be ", want, ", got ", JsonValueText(value)));
  }

  // Optional fields: nullopt / null when absent or null; false only on a wrong type.
  bool GetUint32(const json& object, std::string_view path, std::string_view name, std::optional<uint32_t>* out);
  bool GetString(const json& object, std::string_view path, std::string_view name, std::optional<std::string>* out);
  bool GetBool(const json& object, std::string_view path, std::string_view name, std::optional<bool>* out);
  bool GetObject(const json& object, std::string_view path, std::string_view name, const json** out);
  bool GetArray(const json& object, std::string_view path, std::string_view name, const json** out);

  // A required size: present and at least 1.
  bool GetSize(const json& object, std::string_view base, std::string_view name, uint32_t* out);

  bool ReadHash(const json& descriptor, std::string_view base, LayoutSpec* spec);
  bool ReadCoordinator(const json& descriptor, std::string_view base, LayoutSpec* spec);
  bool ReadGroup(const json& group, std::string_view path, size_t index, GroupSpec* out);

  std::string* error_;
};

bool DescriptorReader::GetUint32(const json& object, std::string_view path, std::string_view name,
                                 std::optional<uint32_t>* out) {
  const json* value = JsonMember(object, name);
  if (value == nullptr) return true;
  uint32_t n = 0;
  if (!JsonUint32(*value, &n)) return WrongType(path, "an unsigned 32-bit integer", *value);
  *out = n;
  return true;
}

bool DescriptorReader::GetString(const json& object, std::string_view path, std::string_view name,
                                 std::optional<std::string>* out) {
  const json* value = JsonMember(object, name);
  if (value == nullptr) return true;
  if (!value->is_string()) return WrongType(path, "a string", *value);
  *out = value->get<std::string>();
  return true;
}

bool DescriptorReader::GetBool(const json& object, std::string_view path, std::string_view name,
                               std::optional<bool>* out) {
  const json* value = JsonMember(object, name);
  if (value == nullptr) return true;
  if (!value->is_boolean()) return WrongType(path, "true or false", *value);
  *out = value->get<bool>();
  return true;
}

bool DescriptorReader::GetObject(const json& object, std::string_view path, std::string_view name,
                                 const json** out) {
  const json* value = JsonMember(object, name);
  if (value == nullptr) return true;
  if (!value->is_object()) return WrongType(path, "an object", *value);
  *out = value;
  return true;
}

bool DescriptorReader::GetArray(const json& object, std::string_view path, std::string_view name,
                                const json** out) {
  const json* value = JsonMember(object, name);
  if (value == nullptr) return true;
  if (!value->is_array()) return WrongType(path, "an array", *value);
  *out = value;
  return true;
}

bool DescriptorReader::GetSize(const json& object, std::string_view base, std::string_view name, uint32_t* out) {
  const std::string path = Path(base, name);
  std::optional<uint32_t> value;
  if (!GetUint32(object, path, name, &value)) return false;
  if (!value) return Fail(path, "is missing");
  if (*value == 0) return Fail(path, "must be at least 1");
  *out = *value;
  return true;
}

// Fields the descriptor format documents that this reader has no use for
// (docs/vllm-family.md, "The descriptor"): not warned about.
constexpr std::string_view kDocumentedUnread[] = {
    "adapter", "vllm_revision", "input", "main_event_group", "gpu_to_store_group", "partial_hash_hits",
    "cache_prefix"};
constexpr std::string_view kWhere = "vLLM descriptor";

bool DescriptorReader::Read(const json& descriptor, std::string_view base, LayoutSpec* spec) {
  WarnUnknownFields(descriptor, kWhere, base,
                    {"schema_version", "hash", "main_event_block_size", "coordinator", "tenant_id", "groups"},
                    kDocumentedUnread);
  const std::string version_path = Path(base, "schema_version");
  std::optional<uint32_t> version;
  if (!GetUint32(descriptor, version_path, "schema_version", &version)) return false;
  if (!version) return Fail(version_path, "is missing");
  if (*version != 1) return Fail(version_path, Cat(*version, " is not supported (this library reads 1)"));

  if (!ReadHash(descriptor, base, spec)) return false;
  if (!GetSize(descriptor, base, "main_event_block_size", &spec->main_event_block_size)) return false;
  if (!ReadCoordinator(descriptor, base, spec)) return false;

  std::optional<std::string> tenant;
  if (!GetString(descriptor, Path(base, "tenant_id"), "tenant_id", &tenant)) return false;
  if (tenant) spec->tenant_id = std::move(*tenant);

  const std::string groups_path = Path(base, "groups");
  const json* groups = nullptr;
  if (!GetArray(descriptor, groups_path, "groups", &groups)) return false;
  if (groups == nullptr) return Fail(groups_path, "is missing");
  if (groups->empty()) return Fail(groups_path, "is empty (a layout needs at least one group)");
  for (size_t i = 0; i < groups->size(); ++i) {
    const std::string group_path = Cat(groups_path, "[", i, "]");
    GroupSpec group;
    if (!ReadGroup((*groups)[i], group_path, i, &group)) return false;
    // One chain serves every group, hashed in blocks of one size.
    if (!spec->groups.empty() && group.hash_block_size != spec->groups[0].hash_block_size) {
      return Fail(Cat(group_path, ".hash_block_size"),
                  Cat(group.hash_block_size, " differs from ", groups_path, "[0].hash_block_size ",
                               spec->groups[0].hash_block_size, " (the groups share one hash chain)"));
    }
    spec->groups.push_back(std::move(group));
  }
  const uint32_t hash_block_size = spec->groups[0].hash_block_size;
  if (spec->main_event_block_size % hash_block_size != 0) {
    return Fail(Path(base, "main_event_block_size"),
                Cat(spec->main_event_block_size, " is not a multiple of hash_block_size ", hash_block_size));
  }
  return true;
}

bool DescriptorReader::ReadHash(const json& descriptor, std::string_view base, LayoutSpec* spec) {
  const std::string hash_path = Path(base, "hash");
  const json* hash = nullptr;
  if (!GetObject(descriptor, hash_path, "hash", &hash)) return false;
  if (hash == nullptr) return Fail(hash_path, "is missing");
  WarnUnknownFields(*hash, kWhere, hash_path,
                    {"algorithm", "digest_encoding", "key_separator", "gpu_event_hash", "seed_policy"},
                    kDocumentedUnread);

  const std::string algorithm_path = Path(hash_path, "algorithm");
  std::optional<std::string> algorithm;
  if (!GetString(*hash, algorithm_path, "algorithm", &algorithm)) return false;
  if (!algorithm) return Fail(algorithm_path, "is missing");
  if (*algorithm == "sha256") {
    spec->algorithm = HashAlgorithm::kSha256;
  } else if (*algorithm == "sha256_cbor") {
    spec->algorithm = HashAlgorithm::kSha256Cbor;
  } else if (*algorithm == "xxhash" || *algorithm == "xxhash_cbor") {
    return Fail(algorithm_path, Cat(JsonValueText(*algorithm),
                                             " is not supported: this library computes sha256 and sha256_cbor only"));
  } else {
    return Fail(algorithm_path, Cat(JsonValueText(*algorithm), " is not a known algorithm (sha256, sha256_cbor)"));
  }

  // Keys are "<prefix>@<hex digest>": any other spelling names objects we
  // would never find. Event hashes are the digests' low 64 bits: another
  // mapping would resolve them to the wrong digests.
  const struct {
    std::string_view name, only;
  } fixed[] = {{"digest_encoding", "hex"}, {"key_separator", kKeySeparator}, {"gpu_event_hash", "low64"}};
  for (const auto& field : fixed) {
    const std::string path = Path(hash_path, field.name);
    std::optional<std::string> value;
    if (!GetString(*hash, path, field.name, &value)) return false;
    if (value && *value != field.only) {
      return Fail(path, Cat(JsonValueText(*value), " is not supported (want \"", field.only, "\")"));
    }
  }

  const std::string seed_path = Path(hash_path, "seed_policy");
  std::optional<std::string> seed_policy;
  if (!GetString(*hash, seed_path, "seed_policy", &seed_policy)) return false;
  if (seed_policy) {
    constexpr std::string_view kPrefix = "pythonhashseed-";
    const std::string_view policy = *seed_policy;
    const std::string_view seed = policy.substr(std::min(policy.size(), kPrefix.size()));
    // PYTHONHASHSEED is a decimal from 0 to 4294967295 (Python refuses
    // anything else); NONE_HASH hashes it as the string the worker was given.
    bool decimal = policy.starts_with(kPrefix) && !seed.empty() && seed.size() <= 10;
    uint64_t n = 0;
    for (char c : seed) {
      decimal = decimal && c >= '0' && c <= '9';
      if (decimal) n = n * 10 + static_cast<uint64_t>(c - '0');
    }
    if (!decimal || n > UINT32_MAX) {
      return Fail(seed_path, Cat(JsonValueText(*seed_policy),
                                          " is not a known policy (want \"pythonhashseed-N\", N from 0 to 4294967295)"));
    }
    spec->python_hash_seed = std::string(seed);
  }
  return true;
}

bool DescriptorReader::ReadCoordinator(const json& descriptor, std::string_view base, LayoutSpec* spec) {
  const std::string coordinator_path = Path(base, "coordinator");
  const json* coordinator = nullptr;
  if (!GetObject(descriptor, coordinator_path, "coordinator", &coordinator)) return false;
  if (coordinator == nullptr) return true;
  WarnUnknownFields(*coordinator, kWhere, coordinator_path, {"lcm_block_size", "speculative", "drop_blocks"},
                    kDocumentedUnread);

  const std::string lcm_path = Path(coordinator_path, "lcm_block_size");
  std::optional<uint32_t> lcm;
  if (!GetUint32(*coordinator, lcm_path, "lcm_block_size", &lcm)) return false;
  if (lcm && *lcm == 0) return Fail(lcm_path, "must be at least 1 (or null: main_event_block_size)");
  spec->lcm_block_size = lcm.value_or(0);

  // Either moves the prefix the engine actually reuses away from the one
  // the chunks present in the store imply.
  for (std::string_view name : {std::string_view("speculative"), std::string_view("drop_blocks")}) {
    const std::string path = Path(coordinator_path, name);
    std::optional<bool> on;
    if (!GetBool(*coordinator, path, name, &on)) return false;
    if (on.value_or(false)) return Fail(path, "true is not supported");
  }
  return true;
}

bool DescriptorReader::ReadGroup(const json& group, std::string_view path, size_t index, GroupSpec* out) {
  if (!group.is_object()) return WrongType(path, "an object", group);
  WarnUnknownFields(group, kWhere, path,
                    {"group_id", "kind", "block_size", "hash_block_size", "key_prefixes", "sliding_window",
                     "mamba_cache_mode"},
                    kDocumentedUnread);

  std::optional<uint32_t> group_id;
  if (!GetUint32(group, Path(path, "group_id"), "group_id", &group_id)) return false;
  out->group_id = group_id.value_or(static_cast<uint32_t>(index));

  const std::string kind_path = Path(path, "kind");
  std::optional<std::string> kind;
  if (!GetString(group, kind_path, "kind", &kind)) return false;
  if (!kind) return Fail(kind_path, "is missing");
  if (*kind == "full_attention") {
    out->kind = GroupKind::kFullAttention;
  } else if (*kind == "sliding_window") {
    out->kind = GroupKind::kSlidingWindow;
  } else if (*kind == "mamba") {
    out->kind = GroupKind::kMamba;
  } else {
    return Fail(kind_path,
                Cat(JsonValueText(*kind), " is not a known kind (full_attention, sliding_window, mamba)"));
  }

  if (!GetSize(group, path, "block_size", &out->block_size) ||
      !GetSize(group, path, "hash_block_size", &out->hash_block_size)) {
    return false;
  }
  if (out->block_size % out->hash_block_size != 0) {
    return Fail(Path(path, "block_size"), Cat(out->block_size, " is not a multiple of hash_block_size ",
                                                       out->hash_block_size));
  }

  const std::string prefixes_path = Path(path, "key_prefixes");
  const json* prefixes = nullptr;
  if (!GetArray(group, prefixes_path, "key_prefixes", &prefixes)) return false;
  if (prefixes == nullptr) return Fail(prefixes_path, "is missing");
  if (prefixes->empty()) return Fail(prefixes_path, "is empty (a chunk needs at least one object)");
  for (size_t p = 0; p < prefixes->size(); ++p) {
    const json& prefix = (*prefixes)[p];
    const std::string prefix_path = Cat(prefixes_path, "[", p, "]");
    if (!prefix.is_string()) return WrongType(prefix_path, "a string", prefix);
    if (prefix.get_ref<const std::string&>().empty()) return Fail(prefix_path, "is empty");
    out->key_prefixes.push_back(prefix.get<std::string>());
  }

  // Read whatever the kind, so that a mistyped value is named; used by its own kind only.
  const std::string window_path = Path(path, "sliding_window");
  std::optional<uint32_t> window;
  if (!GetUint32(group, window_path, "sliding_window", &window)) return false;
  const std::string mode_path = Path(path, "mamba_cache_mode");
  std::optional<std::string> mode;
  if (!GetString(group, mode_path, "mamba_cache_mode", &mode)) return false;

  if (out->kind == GroupKind::kSlidingWindow) {
    if (!window) return Fail(window_path, "is missing (required by a sliding_window group)");
    if (*window == 0) return Fail(window_path, "must be at least 1");
    out->sliding_window = *window;
  }
  if (out->kind == GroupKind::kMamba) {
    // Only align mode stores the state at chunk boundaries, where a chunk's key says it is.
    if (!mode) return Fail(mode_path, "is missing (a mamba group needs \"align\")");
    if (*mode != "align") return Fail(mode_path, Cat(JsonValueText(*mode), " is not supported (want \"align\")"));
  }
  return true;
}

}  // namespace

bool ParseDescriptorJson(std::string_view text, LayoutSpec* spec, std::string* error) {
  JsonDocument document;
  json& root = document.value;
  std::string why;
  if (!ParseJson(text, &root, &why)) {
    *error = "not valid JSON: " + why;
    return false;
  }
  if (!root.is_object()) {
    *error = "expected a JSON object, got " + JsonValueText(root);
    return false;
  }
  const json* descriptor = &root;
  std::string_view base;
  if (const json* wrapped = JsonMember(root, kWrapper); wrapped != nullptr) {
    if (!wrapped->is_object()) {
      *error = Cat(kWrapper, ": must be an object, got ", JsonValueText(*wrapped));
      return false;
    }
    descriptor = wrapped;
    base = kWrapper;
  }
  LayoutSpec read;
  if (!DescriptorReader(error).Read(*descriptor, base, &read)) return false;
  *spec = std::move(read);
  return true;
}

bool LooksLikeDescriptor(std::string_view text) {
  JsonDocument document;
  json& root = document.value;
  std::string why;
  if (!ParseJson(text, &root, &why) || !root.is_object()) return false;
  // Any field only a descriptor has (and no SGLang page_size): a descriptor
  // missing a required field is then refused as one, naming the field.
  if (root.contains(kWrapper)) return true;
  if (root.contains("page_size")) return false;
  for (const char* field : {"schema_version", "groups", "main_event_block_size", "hash", "coordinator"}) {
    if (root.contains(field)) return true;
  }
  return false;
}

}  // namespace sci::vllm
