// C thunks for the prefix query, in pages (1.1, with extras 1.2) and in
// tokens (1.4): they check the arguments and send the request to its
// family's prefix walk (src/sglang/page_query, src/vllm/chunk_query), one
// answer for all three.
#include <span>

#include "capi_support.h"
#include "capi_vllm.h"
#include "handles.h"
#include "query_args.h"
#include "sglang/page_query.h"
#include "vllm/chunk_query.h"

using sci::capi::CheckIndexAndLayout;
using sci::capi::CheckTokens;
using sci::capi::Failf;
using sci::capi::Guard;

namespace {

// The prefix answer of either family; `extras` may be NULL. An SGLang
// layout's page hashes carry no extras, so a request with any has no hit
// (as sci_index_check_pages_with_extras).
sci_status AnswerPrefix(const char* function, sci_index* index, const sci_layout* layout, const uint32_t* tokens,
                        size_t n_tokens, uint32_t block_size, const sci_request_extras* extras,
                        sci::PageQueryResult* answer) {
  if (sci_status status = CheckTokens(function, tokens, n_tokens); status != SCI_OK) return status;
  sci::vllm::RequestExtras converted;
  if (sci_status status = sci::capi::ConvertExtras(function, extras, &converted); status != SCI_OK) return status;
  const std::span<const uint32_t> request(tokens, n_tokens);
  if (layout->vllm != nullptr) {
    *answer = sci::vllm::CheckPrefix(index->impl, *layout->vllm, sci::vllm::ChainSource::Tokens(request, converted),
                                     block_size);
  } else if (sci::capi::HasExtras(converted)) {
    index->impl.query_counters().queries.Add();
    *answer = sci::PageQueryResult{};
  } else {
    *answer = sci::CheckPrefix(index->impl, *layout->impl, request, block_size);
  }
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
