// The vLLM family's side of the page queries and the request extras both
// families take, for the thunks (capi_pages.cpp, capi_prefix.cpp,
// capi_tiers.cpp) once they have checked the arguments every query takes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "handles.h"
#include "shared_cache_index.h"

namespace sci::capi {

// A request's extras from C (`in` may be NULL: none); an error status,
// recorded, for a bad struct.
sci_status ConvertExtras(const char* function, const sci_request_extras* in, vllm::RequestExtras* out);
// Whether a request has extras (an empty salt is none: vLLM tests the salt
// for truth).
bool HasExtras(const vllm::RequestExtras& extras);

// sci_index_check_pages on a vLLM layout (`extras` may be NULL).
sci_status CheckVllmBlocks(const char* function, sci_index* index, const vllm::Layout& layout,
                           const uint32_t* tokens, size_t n_tokens, uint32_t block_size,
                           const sci_request_extras* extras, uint8_t* hits, size_t hits_cap, sci_page_result* result);

}  // namespace sci::capi
