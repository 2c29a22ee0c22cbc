// C thunks for layouts read from JSON, the vLLM family's queries, and
// requests with extras. They translate and check C arguments; the rest
// lives in src/vllm/ (and src/sglang/ for SGLang's JSON).
#include "capi_vllm.h"

#include <algorithm>
#include <memory>
#include <span>
#include <string>

#include "capi_support.h"
#include "query_args.h"
#include "sglang/page_query.h"
#include "sglang/runtime_config.h"
#include "vllm/chunk_query.h"
#include "vllm/layout_spec.h"

using sci::capi::CheckHitsBuffer;
using sci::capi::CheckIndexAndLayout;
using sci::capi::CheckQueryHandles;
using sci::capi::CheckTokens;
using sci::capi::Fail;
using sci::capi::Failf;
using sci::capi::Guard;
using sci::capi::HasStructSize;
using sci::capi::ToView;
using sci::capi::WriteResult;

namespace sci::capi {

// The extras of a request; false (the error recorded) for a bad struct.
sci_status ConvertExtras(const char* function, const sci_request_extras* in, vllm::RequestExtras* out) {
  *out = {};
  if (in == nullptr) return SCI_OK;
  if (!HasStructSize(in->struct_size, SCI_FIELD_END(sci_request_extras, cache_salt))) {
    return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: extras->struct_size %u is too small (need >= %u)", function,
                 in->struct_size, SCI_FIELD_END(sci_request_extras, cache_salt));
  }
  if (in->lora_name.ptr != nullptr) {
    out->has_lora = true;
    out->lora_name = std::string_view(in->lora_name.ptr, in->lora_name.len);
  } else if (in->lora_name.len > 0) {
    return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: extras->lora_name has a NULL ptr and a non-zero len", function);
  }
  if (in->cache_salt.ptr != nullptr) {
    out->has_salt = true;
    out->cache_salt = std::string_view(in->cache_salt.ptr, in->cache_salt.len);
  } else if (in->cache_salt.len > 0) {
    return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: extras->cache_salt has a NULL ptr and a non-zero len", function);
  }
  return SCI_OK;
}

// An empty salt is no salt (vLLM tests the salt for truth).
bool HasExtras(const vllm::RequestExtras& extras) {
  return extras.has_lora || (extras.has_salt && !extras.cache_salt.empty());
}

sci_status CheckVllmBlocks(const char* function, sci_index* index, const vllm::Layout& layout,
                           const uint32_t* tokens, size_t n_tokens, uint32_t block_size,
                           const sci_request_extras* extras, uint8_t* hits, size_t hits_cap,
                           sci_page_result* result) {
  vllm::RequestExtras converted;
  if (sci_status status = ConvertExtras(function, extras, &converted); status != SCI_OK) return status;
  const size_t n_blocks = vllm::BlocksToCheck(layout, n_tokens, block_size);
  if (sci_status status = CheckHitsBuffer(function, hits, hits_cap, n_blocks); status != SCI_OK) return status;
  const PageQueryResult r =
      vllm::CheckBlocks(index->impl, layout, vllm::ChainSource::Tokens(std::span(tokens, n_tokens), converted),
                        block_size, std::span(hits, n_blocks));
  WriteResult(r, result);
  return SCI_OK;
}

}  // namespace sci::capi

extern "C" {

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
      *out = new sci_layout(std::move(layout));
      return SCI_OK;
    }
    sci::LayoutSpec spec;
    if (!sci::ParseRuntimeConfigJson(text, &spec, &error)) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: SGLang runtime config: %s", kFunction, error);
    }
    std::unique_ptr<const sci::Layout> layout = sci::Layout::Create(spec, &error);
    if (layout == nullptr) return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: SGLang runtime config: %s", kFunction, error);
    *out = new sci_layout(std::move(layout));
    return SCI_OK;
  });
}

sci_layout_family sci_layout_get_family(const sci_layout* layout) {
  return layout != nullptr && layout->vllm != nullptr ? SCI_LAYOUT_VLLM : SCI_LAYOUT_SGLANG;
}

uint32_t sci_layout_block_size(const sci_layout* layout) {
  if (layout == nullptr) return 0;
  return layout->vllm != nullptr ? layout->vllm->router_block_size() : layout->impl->page_size();
}

sci_status sci_index_check_pages_with_extras(sci_index* index, const sci_layout* layout, const uint32_t* tokens,
                                             size_t n_tokens, uint32_t block_size, const sci_request_extras* extras,
                                             uint8_t* hits, size_t hits_cap, sci_page_result* result) {
  constexpr const char* kFunction = "sci_index_check_pages_with_extras";
  return Guard(kFunction, [&] {
    if (sci_status status = CheckQueryHandles(kFunction, index, layout, result); status != SCI_OK) return status;
    if (sci_status status = CheckTokens(kFunction, tokens, n_tokens); status != SCI_OK) return status;
    if (layout->vllm != nullptr) {
      return sci::capi::CheckVllmBlocks(kFunction, index, *layout->vllm, tokens, n_tokens, block_size, extras, hits,
                                        hits_cap, result);
    }
    sci::vllm::RequestExtras converted;
    if (sci_status status = sci::capi::ConvertExtras(kFunction, extras, &converted); status != SCI_OK) return status;
    if (!sci::capi::HasExtras(converted)) {
      return sci_index_check_pages(index, layout, tokens, n_tokens, block_size, hits, hits_cap, result);
    }
    // SGLang's page hashes carry no extras: such a page cannot be told from
    // the same tokens without them, so nothing is a hit.
    const size_t n_pages = sci::PagesToCheck(*layout->impl, n_tokens, block_size);
    if (sci_status status = CheckHitsBuffer(kFunction, hits, hits_cap, n_pages); status != SCI_OK) return status;
    std::fill(hits, hits + n_pages, uint8_t{0});
    index->impl.query_counters().queries.Add();
    sci::PageQueryResult r;
    r.n_pages = n_pages;
    WriteResult(r, result);
    return SCI_OK;
  });
}

sci_status sci_index_check_block_hashes(sci_index* index, const sci_layout* layout, const sci_block_hashes* hashes,
                                        uint32_t block_size, size_t* prefix_blocks) {
  constexpr const char* kFunction = "sci_index_check_block_hashes";
  return Guard(kFunction, [&] {
    if (sci_status status = CheckIndexAndLayout(kFunction, index, layout); status != SCI_OK) return status;
    if (prefix_blocks == nullptr) return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: prefix_blocks is NULL", kFunction);
    if (hashes == nullptr) return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: hashes is NULL", kFunction);
    if (!HasStructSize(hashes->struct_size, SCI_FIELD_END(sci_block_hashes, n_tokens))) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: hashes->struct_size %u is too small (need >= %u)", kFunction,
                   hashes->struct_size, SCI_FIELD_END(sci_block_hashes, n_tokens));
    }
    if (layout->vllm == nullptr) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: layout is an SGLang layout (use sci_index_check_page_hashes)",
                   kFunction);
    }
    const sci::vllm::Layout& vllm = *layout->vllm;
    const size_t n = hashes->n_hashes;
    if (n > 0 && (hashes->digests == nullptr) == (hashes->event_hashes == nullptr)) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: set exactly one of hashes->digests and hashes->event_hashes",
                   kFunction);
    }
    if (n > SIZE_MAX / vllm.hash_block_size() - 1) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: hashes->n_hashes %d is too large", kFunction, n);
    }
    const size_t covered = n * vllm.hash_block_size();
    const size_t n_tokens = hashes->n_tokens == 0 ? covered + 1 : hashes->n_tokens;
    if (n_tokens < covered) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: hashes->n_tokens %d is shorter than %d hashes of %d tokens",
                   kFunction, n_tokens, n, vllm.hash_block_size());
    }
    const sci::vllm::ChainSource source =
        hashes->digests != nullptr
            ? sci::vllm::ChainSource::Digests(hashes->digests, n, n_tokens)
            : sci::vllm::ChainSource::EventHashes(std::span(hashes->event_hashes, n), n_tokens);
    *prefix_blocks = sci::vllm::CheckPrefix(index->impl, vllm, source, block_size).prefix_hits;
    return SCI_OK;
  });
}

}  // extern "C"
