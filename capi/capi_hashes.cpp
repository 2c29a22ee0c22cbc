// C thunks for the queries from hashes the caller already holds: SGLang's
// page hashes (1.1), vLLM's block hashes (1.2). They translate and check C
// arguments; the queries live in src/sglang/page_query and
// src/vllm/chunk_query.
#include <cstdint>
#include <span>
#include <string_view>

#include "capi_support.h"
#include "handles.h"
#include "query_args.h"
#include "sglang/page_hash.h"
#include "sglang/page_query.h"
#include "vllm/chunk_query.h"

using sci::capi::CheckHitsBuffer;
using sci::capi::CheckIndexAndLayout;
using sci::capi::CheckQueryHandles;
using sci::capi::Failf;
using sci::capi::Guard;
using sci::capi::HasStructSize;
using sci::capi::ToView;
using sci::capi::WriteResult;

extern "C" {

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
