// C thunks for layouts and the page queries. They translate and check C
// arguments, and send a vLLM layout to capi_vllm.cpp's thunks; derivation
// and the queries live in src/sglang/ and src/vllm/.
#include <algorithm>
#include <cstring>
#include <memory>
#include <span>
#include <string>

#include "capi_support.h"
#include "capi_vllm.h"
#include "query_args.h"
#include "handles.h"
#include "sglang/layout.h"
#include "sglang/page_hash.h"
#include "sglang/page_query.h"

using sci::capi::Fail;
using sci::capi::Failf;
using sci::capi::Guard;
using sci::capi::HasStructSize;
using sci::capi::ToView;
using sci::capi::CheckHitsBuffer;
using sci::capi::CheckIndexAndLayout;
using sci::capi::CheckQueryHandles;
using sci::capi::CheckTokens;
using sci::capi::WriteResult;

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
    *out = new sci_layout(std::move(layout));
    return SCI_OK;
  });
}

void sci_layout_free(sci_layout* layout) { delete layout; }

sci_status sci_index_check_pages(sci_index* index, const sci_layout* layout, const uint32_t* tokens, size_t n_tokens,
                                 uint32_t block_size, uint8_t* hits, size_t hits_cap, sci_page_result* result) {
  constexpr const char* kFunction = "sci_index_check_pages";
  return Guard(kFunction, [&] {
    if (sci_status status = CheckQueryHandles(kFunction, index, layout, result); status != SCI_OK) return status;
    if (sci_status status = CheckTokens(kFunction, tokens, n_tokens); status != SCI_OK) return status;
    if (layout->vllm != nullptr) {
      return sci::capi::CheckVllmBlocks(kFunction, index, *layout->vllm, tokens, n_tokens, block_size, nullptr, hits,
                                        hits_cap, result);
    }
    const size_t n_pages = sci::PagesToCheck(*layout->impl, n_tokens, block_size);
    if (sci_status status = CheckHitsBuffer(kFunction, hits, hits_cap, n_pages); status != SCI_OK) return status;
    const sci::PageQueryResult r = sci::CheckPages(index->impl, *layout->impl, std::span(tokens, n_tokens),
                                                   block_size, std::span(hits, n_pages));
    WriteResult(r, result);
    return SCI_OK;
  });
}

sci_status sci_index_check_page_hashes(sci_index* index, const sci_layout* layout, const sci_str* page_hashes,
                                       size_t n_page_hashes, uint8_t* hits, size_t hits_cap,
                                       sci_page_result* result) {
  constexpr const char* kFunction = "sci_index_check_page_hashes";
  return Guard(kFunction, [&] {
    if (sci_status status = CheckQueryHandles(kFunction, index, layout, result); status != SCI_OK) return status;
    if (layout->vllm != nullptr) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: layout is a vLLM layout (use sci_index_check_block_hashes)",
                   kFunction);
    }
    if (page_hashes == nullptr && n_page_hashes > 0) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: page_hashes is NULL but n_page_hashes is %d", kFunction,
                   n_page_hashes);
    }
    if (sci_status status = CheckHitsBuffer(kFunction, hits, hits_cap, n_page_hashes); status != SCI_OK) {
      return status;
    }
    for (size_t i = 0; i < n_page_hashes; ++i) {
      std::string_view hash;
      if (!ToView(page_hashes[i], &hash) || !sci::IsPageHashHex(hash)) {
        return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: page_hashes[%d] is not 64 lowercase hex characters", kFunction, i);
      }
    }
    const sci::PageQueryResult r = sci::CheckPageHashes(
        index->impl, *layout->impl, n_page_hashes,
        [page_hashes](size_t page) { return std::string_view(page_hashes[page].ptr, page_hashes[page].len); },
        std::span(hits, n_page_hashes));
    WriteResult(r, result);
    return SCI_OK;
  });
}

}  // extern "C"
