// C thunks that make a layout (from a spec, or from either family's JSON),
// free it and answer what it is (its family, its block size). They
// translate and check C arguments; derivation lives in src/sglang/ and
// src/vllm/. The layout's family is chosen here, once, when it is made:
// every later call asks the sci_layout's LayoutFamily (layout_family.h).
#include <cstring>
#include <memory>
#include <string>

#include "capi_support.h"
#include "family_sglang.h"
#include "family_vllm.h"
#include "handles.h"
#include "sglang/layout.h"
#include "sglang/runtime_config.h"
#include "vllm/layout.h"
#include "vllm/layout_spec.h"

using sci::capi::Failf;
using sci::capi::Guard;
using sci::capi::HasStructSize;
using sci::capi::ToView;

namespace {

constexpr const char* kLayoutNew = "sci_layout_new";

// A C string field into a C++ one; false (with the error recorded) when it
// has a NULL pointer and a length.
bool CopyString(sci_str in, const char* field, std::string* out, sci_status* status) {
  std::string_view view;
  if (!ToView(in, &view)) {
    *status = Failf(SCI_ERR_INVALID_ARGUMENT, "%s: spec->%s has a NULL ptr and a non-zero len", kLayoutNew, field);
    return false;
  }
  out->assign(view);
  return true;
}

// The C pools into C++ ones. Counts are checked against the layout's bound
// before anything is read, so a garbage count cannot walk off the caller's
// arrays.
sci_status ConvertPools(const sci_layout_spec& spec, std::vector<sci::PoolSpec>* pools) {
  if (spec.pools == nullptr && spec.n_pools > 0) {
    return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: spec->pools is NULL but spec->n_pools is %d", kLayoutNew,
                 spec.n_pools);
  }
  if (spec.n_pools > sci::Layout::kMaxKeysPerPage) {
    return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: spec->n_pools is %d (more than %d keys per page)", kLayoutNew,
                 spec.n_pools, sci::Layout::kMaxKeysPerPage);
  }
  pools->resize(spec.n_pools);
  for (size_t p = 0; p < spec.n_pools; ++p) {
    const sci_pool& in = spec.pools[p];
    sci::PoolSpec& out = (*pools)[p];
    if (in.suffixes == nullptr && in.n_suffixes > 0) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: spec->pools[%d].suffixes is NULL but n_suffixes is %d",
                   kLayoutNew, p, in.n_suffixes);
    }
    if (in.n_suffixes > sci::Layout::kMaxKeysPerPage) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: spec->pools[%d].n_suffixes is %d (more than %d keys per page)",
                   kLayoutNew, p, in.n_suffixes, sci::Layout::kMaxKeysPerPage);
    }
    switch (in.hit_policy) {
      case SCI_HIT_ALL_PAGES: out.hit_policy = sci::HitPolicy::kAllPages; break;
      case SCI_HIT_TRAILING_PAGES: out.hit_policy = sci::HitPolicy::kTrailingPages; break;
      default:
        return Failf(SCI_ERR_INVALID_ARGUMENT,
                     "%s: spec->pools[%d].hit_policy is %d (want SCI_HIT_ALL_PAGES or SCI_HIT_TRAILING_PAGES)",
                     kLayoutNew, p, in.hit_policy);
    }
    out.trailing_pages = in.trailing_pages;
    out.suffixes.resize(in.n_suffixes);
    for (size_t s = 0; s < in.n_suffixes; ++s) {
      std::string_view suffix;
      if (!ToView(in.suffixes[s], &suffix)) {
        return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: spec->pools[%d].suffixes[%d] has a NULL ptr and a non-zero len",
                     kLayoutNew, p, s);
      }
      out.suffixes[s].assign(suffix);
    }
  }
  return SCI_OK;
}

}  // namespace

extern "C" {

sci_status sci_layout_new(const sci_layout_spec* spec, sci_layout** out) {
  return Guard(kLayoutNew, [&] {
    if (out == nullptr) return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: out is NULL", kLayoutNew);
    *out = nullptr;
    if (spec == nullptr) return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: spec is NULL", kLayoutNew);
    if (!HasStructSize(spec->struct_size, SCI_FIELD_END(sci_layout_spec, n_pools))) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: spec->struct_size %u is too small (need >= %u)", kLayoutNew,
                   spec->struct_size, SCI_FIELD_END(sci_layout_spec, n_pools));
    }
    sci::LayoutSpec converted;
    converted.page_size = spec->page_size;
    converted.tp_size = spec->tp_size;
    converted.pp_size = spec->pp_size;
    converted.tp_lcm_size = spec->tp_lcm_size;
    converted.is_mla_model = spec->is_mla_model;
    converted.is_eagle = spec->is_eagle;
    converted.should_split_heads = spec->should_split_heads;
    sci_status status = SCI_OK;
    if (!CopyString(spec->extra_backend_tag, "extra_backend_tag", &converted.extra_backend_tag, &status) ||
        !CopyString(spec->key_prefix, "key_prefix", &converted.key_prefix, &status) ||
        !CopyString(spec->tenant_id, "tenant_id", &converted.tenant_id, &status)) {
      return status;
    }
    if (status = ConvertPools(*spec, &converted.pools); status != SCI_OK) return status;
    std::string error;
    std::unique_ptr<const sci::Layout> layout = sci::Layout::Create(converted, &error);
    if (layout == nullptr) return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: spec->%s", kLayoutNew, error);
    *out = new sci_layout(sci::capi::MakeSGLangFamily(std::move(layout)));
    return SCI_OK;
  });
}

void sci_layout_free(sci_layout* layout) { delete layout; }

sci_status sci_layout_new_json(sci_str json, sci_layout** out) {
  constexpr const char* kFunction = "sci_layout_new_json";
  return Guard(kFunction, [&] {
    if (out == nullptr) return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: out is NULL", kFunction);
    *out = nullptr;
    std::string_view text;
    if (!ToView(json, &text)) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: json has a NULL ptr and a non-zero len", kFunction);
    }
    std::string error;
    if (sci::vllm::LooksLikeDescriptor(text)) {
      sci::vllm::LayoutSpec spec;
      if (!sci::vllm::ParseDescriptorJson(text, &spec, &error)) {
        return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: vLLM descriptor: %s", kFunction, error);
      }
      std::unique_ptr<const sci::vllm::Layout> layout = sci::vllm::Layout::Create(spec, &error);
      if (layout == nullptr) return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: vLLM descriptor: %s", kFunction, error);
      *out = new sci_layout(sci::capi::MakeVllmFamily(std::move(layout)));
      return SCI_OK;
    }
    sci::LayoutSpec spec;
    if (!sci::ParseRuntimeConfigJson(text, &spec, &error)) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: SGLang runtime config: %s", kFunction, error);
    }
    std::unique_ptr<const sci::Layout> layout = sci::Layout::Create(spec, &error);
    if (layout == nullptr) return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: SGLang runtime config: %s", kFunction, error);
    *out = new sci_layout(sci::capi::MakeSGLangFamily(std::move(layout)));
    return SCI_OK;
  });
}

// A NULL layout answers as the header says: SGLang, block size 0.
sci_layout_family sci_layout_get_family(const sci_layout* layout) {
  return layout != nullptr ? layout->family->family() : SCI_LAYOUT_SGLANG;
}

uint32_t sci_layout_block_size(const sci_layout* layout) {
  return layout != nullptr ? layout->family->block_size() : 0;
}

}  // extern "C"
