// C thunks for the page query (1.0; with a request's extras 1.2): they
// check and translate the C arguments, then ask the layout's family
// (layout_family.h); the queries live in src/sglang/page_query and
// src/vllm/chunk_query.
#include <span>

#include "capi_support.h"
#include "handles.h"
#include "query_args.h"

using sci::capi::CheckHitsBuffer;
using sci::capi::CheckQueryHandles;
using sci::capi::CheckTokens;
using sci::capi::ConvertExtras;
using sci::capi::Guard;
using sci::capi::WriteResult;

namespace {

// Both entry points once their own arguments are checked: the hits buffer
// against the request's pages, then the family's answer.
sci_status AnswerPages(const char* function, sci_index* index, const sci_layout* layout, const uint32_t* tokens,
                       size_t n_tokens, uint32_t block_size, const sci::vllm::RequestExtras& extras, uint8_t* hits,
                       size_t hits_cap, sci_page_result* result) {
  const sci::capi::LayoutFamily& family = *layout->family;
  const size_t n_pages = family.PagesToCheck(n_tokens, block_size);
  if (sci_status status = CheckHitsBuffer(function, hits, hits_cap, n_pages); status != SCI_OK) return status;
  WriteResult(family.CheckPages(index->impl, std::span(tokens, n_tokens), block_size, extras, std::span(hits, n_pages)),
              result);
  return SCI_OK;
}

}  // namespace

extern "C" {

sci_status sci_index_check_pages(sci_index* index, const sci_layout* layout, const uint32_t* tokens, size_t n_tokens,
                                 uint32_t block_size, uint8_t* hits, size_t hits_cap, sci_page_result* result) {
  constexpr const char* kFunction = "sci_index_check_pages";
  return Guard(kFunction, [&] {
    if (sci_status status = CheckQueryHandles(kFunction, index, layout, result); status != SCI_OK) return status;
    if (sci_status status = CheckTokens(kFunction, tokens, n_tokens); status != SCI_OK) return status;
    return AnswerPages(kFunction, index, layout, tokens, n_tokens, block_size, sci::vllm::RequestExtras{}, hits,
                       hits_cap, result);
  });
}

sci_status sci_index_check_pages_with_extras(sci_index* index, const sci_layout* layout, const uint32_t* tokens,
                                             size_t n_tokens, uint32_t block_size, const sci_request_extras* extras,
                                             uint8_t* hits, size_t hits_cap, sci_page_result* result) {
  constexpr const char* kFunction = "sci_index_check_pages_with_extras";
  return Guard(kFunction, [&] {
    if (sci_status status = CheckQueryHandles(kFunction, index, layout, result); status != SCI_OK) return status;
    if (sci_status status = CheckTokens(kFunction, tokens, n_tokens); status != SCI_OK) return status;
    sci::vllm::RequestExtras converted;
    if (sci_status status = ConvertExtras(kFunction, extras, &converted); status != SCI_OK) return status;
    return AnswerPages(kFunction, index, layout, tokens, n_tokens, block_size, converted, hits, hits_cap, result);
  });
}

}  // extern "C"
