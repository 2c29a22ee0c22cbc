// C thunks for the queries from hashes the caller already holds: SGLang's
// page hashes (1.1), vLLM's block hashes (1.2). They check the arguments
// every call takes, then ask the layout's family (layout_family.h), which
// refuses the other family's hashes and checks its own.
#include "capi_support.h"
#include "handles.h"
#include "query_args.h"

using sci::capi::CheckIndexAndLayout;
using sci::capi::CheckQueryHandles;
using sci::capi::Failf;
using sci::capi::Guard;
using sci::capi::HasStructSize;
using sci::capi::WriteResult;

extern "C" {

sci_status sci_index_check_page_hashes(sci_index* index, const sci_layout* layout, const sci_str* page_hashes,
                                       size_t n_page_hashes, uint8_t* hits, size_t hits_cap,
                                       sci_page_result* result) {
  constexpr const char* kFunction = "sci_index_check_page_hashes";
  return Guard(kFunction, [&] {
    if (sci_status status = CheckQueryHandles(kFunction, index, layout, result); status != SCI_OK) return status;
    sci::PageQueryResult answer;
    const sci_status status = layout->family->CheckPageHashes(kFunction, index->impl, page_hashes, n_page_hashes,
                                                              hits, hits_cap, &answer);
    if (status == SCI_OK) WriteResult(answer, result);
    return status;
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
    sci::PageQueryResult answer;
    const sci_status status = layout->family->CheckBlockHashes(kFunction, index->impl, *hashes, block_size, &answer);
    if (status == SCI_OK) *prefix_blocks = answer.prefix_hits;
    return status;
  });
}

}  // extern "C"
