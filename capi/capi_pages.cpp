// C thunks for the page query (1.0; with a request's extras 1.2): they
// translate and check C arguments, and send a vLLM layout to
// capi_vllm.cpp's side of the query; the queries live in
// src/sglang/page_query and src/vllm/chunk_query.
#include <algorithm>
#include <span>

#include "capi_support.h"
#include "capi_vllm.h"
#include "handles.h"
#include "query_args.h"
#include "sglang/page_query.h"

using sci::capi::CheckHitsBuffer;
using sci::capi::CheckQueryHandles;
using sci::capi::CheckTokens;
using sci::capi::Guard;
using sci::capi::WriteResult;

extern "C" {

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

}  // extern "C"
