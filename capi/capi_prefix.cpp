// C thunks for the prefix query, in pages (1.1, with extras 1.2) and in
// tokens (1.4): they check the arguments and ask the layout's family
// (layout_family.h) for its prefix walk (src/sglang/page_query,
// src/vllm/chunk_query), one answer for all three.
#include <span>

#include "capi_support.h"
#include "handles.h"
#include "query_args.h"

using sci::capi::CheckIndexAndLayout;
using sci::capi::CheckTokens;
using sci::capi::ConvertExtras;
using sci::capi::Failf;
using sci::capi::Guard;

namespace {

// The prefix answer of the layout's family; `extras` may be NULL.
sci_status AnswerPrefix(const char* function, sci_index* index, const sci_layout* layout, const uint32_t* tokens,
                        size_t n_tokens, uint32_t block_size, const sci_request_extras* extras,
                        sci::PageQueryResult* answer) {
  if (sci_status status = CheckTokens(function, tokens, n_tokens); status != SCI_OK) return status;
  sci::vllm::RequestExtras converted;
  if (sci_status status = ConvertExtras(function, extras, &converted); status != SCI_OK) return status;
  *answer = layout->family->CheckPrefix(index->impl, std::span(tokens, n_tokens), block_size, converted);
  return SCI_OK;
}

// sci_index_check_prefix and its _with_extras form: the answer in pages.
sci_status PrefixPages(const char* function, sci_index* index, const sci_layout* layout, const uint32_t* tokens,
                       size_t n_tokens, uint32_t block_size, const sci_request_extras* extras, size_t* prefix_pages) {
  return Guard(function, [&] {
    if (sci_status status = CheckIndexAndLayout(function, index, layout); status != SCI_OK) return status;
    if (prefix_pages == nullptr) return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: prefix_pages is NULL", function);
    sci::PageQueryResult answer;
    const sci_status status = AnswerPrefix(function, index, layout, tokens, n_tokens, block_size, extras, &answer);
    if (status == SCI_OK) *prefix_pages = answer.prefix_hits;
    return status;
  });
}

}  // namespace

extern "C" {

sci_status sci_index_check_prefix(sci_index* index, const sci_layout* layout, const uint32_t* tokens, size_t n_tokens,
                                  uint32_t block_size, size_t* prefix_pages) {
  return PrefixPages("sci_index_check_prefix", index, layout, tokens, n_tokens, block_size, nullptr, prefix_pages);
}

sci_status sci_index_check_prefix_with_extras(sci_index* index, const sci_layout* layout, const uint32_t* tokens,
                                              size_t n_tokens, uint32_t block_size,
                                              const sci_request_extras* extras, size_t* prefix_pages) {
  return PrefixPages("sci_index_check_prefix_with_extras", index, layout, tokens, n_tokens, block_size, extras,
                     prefix_pages);
}

sci_status sci_index_check_prefix_tokens(sci_index* index, const sci_layout* layout, const uint32_t* tokens,
                                         size_t n_tokens, uint32_t block_size, const sci_request_extras* extras,
                                         size_t* prefix_pages, size_t* prefix_tokens) {
  constexpr const char* kFunction = "sci_index_check_prefix_tokens";
  return Guard(kFunction, [&] {
    if (sci_status status = CheckIndexAndLayout(kFunction, index, layout); status != SCI_OK) return status;
    if (prefix_pages == nullptr && prefix_tokens == nullptr) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: prefix_pages and prefix_tokens are both NULL", kFunction);
    }
    sci::PageQueryResult answer;
    const sci_status status = AnswerPrefix(kFunction, index, layout, tokens, n_tokens, block_size, extras, &answer);
    if (status != SCI_OK) return status;
    if (prefix_pages != nullptr) *prefix_pages = answer.prefix_hits;
    if (prefix_tokens != nullptr) *prefix_tokens = answer.prefix_tokens;
    return SCI_OK;
  });
}

}  // extern "C"
