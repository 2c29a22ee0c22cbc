// C thunk for the tier query (1.3): checks and translates the C arguments,
// then asks the layout's family (layout_family.h); the query lives in
// src/sglang/page_query and src/vllm/chunk_query.
#include <span>

#include "capi_support.h"
#include "handles.h"
#include "query_args.h"

using sci::capi::CheckHitsBuffer;
using sci::capi::CheckIndexAndLayout;
using sci::capi::CheckTokens;
using sci::capi::ConvertExtras;
using sci::capi::Failf;
using sci::capi::Guard;
using sci::capi::HasStructSize;

namespace {

void WriteTierResult(const sci::PageQueryResult& r, const sci::TierAnswer& answer, sci_tier_result* result) {
  sci_tier_result out{};
  out.struct_size = result->struct_size;
  out.n_tiers = static_cast<uint32_t>(answer.n_tiers);
  out.n_pages = r.n_pages;
  for (int t = 0; t < SCI_TIERS_MAX; ++t) {
    out.prefix_pages[t] = answer.prefix_pages[static_cast<size_t>(t)];
    out.pages_at[t] = answer.pages_at[static_cast<size_t>(t)];
    out.prefix_tokens[t] = answer.prefix_tokens[static_cast<size_t>(t)];
  }
  sci::capi::WriteVersioned(out, result);
}

}  // namespace

extern "C" sci_status sci_index_check_tiers(sci_index* index, const sci_layout* layout, const uint32_t* tokens,
                                            size_t n_tokens, uint32_t block_size, const sci_request_extras* extras,
                                            uint8_t* page_tier, size_t page_tier_cap, sci_tier_result* result) {
  constexpr const char* kFunction = "sci_index_check_tiers";
  return Guard(kFunction, [&] {
    if (sci_status status = CheckIndexAndLayout(kFunction, index, layout); status != SCI_OK) return status;
    if (result == nullptr) return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: result is NULL", kFunction);
    if (!HasStructSize(result->struct_size, SCI_FIELD_END(sci_tier_result, pages_at))) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: result->struct_size %u is too small (need >= %u)", kFunction,
                   result->struct_size, SCI_FIELD_END(sci_tier_result, pages_at));
    }
    if (sci_status status = CheckTokens(kFunction, tokens, n_tokens); status != SCI_OK) return status;
    sci::vllm::RequestExtras converted;
    if (sci_status status = ConvertExtras(kFunction, extras, &converted); status != SCI_OK) return status;
    const sci::capi::LayoutFamily& family = *layout->family;
    const size_t n_pages = family.PagesToCheck(n_tokens, block_size);
    if (sci_status status = CheckHitsBuffer(kFunction, page_tier, page_tier_cap, n_pages); status != SCI_OK) {
      return status;
    }
    sci::TierAnswer answer;
    const sci::PageQueryResult r = family.CheckTiers(index->impl, std::span(tokens, n_tokens), block_size, converted,
                                                     std::span(page_tier, n_pages), &answer);
    WriteTierResult(r, answer, result);
    return SCI_OK;
  });
}
