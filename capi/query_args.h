// Checks of the arguments every page query takes, whichever family answers
// it (layout_family.h), and the result the thunks write.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "capi_support.h"
#include "handles.h"
#include "query/query_result.h"
#include "vllm/block_hash.h"

namespace sci::capi {

// The two handles every query needs.
inline sci_status CheckIndexAndLayout(const char* function, const sci_index* index, const sci_layout* layout) {
  if (index == nullptr) return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: index is NULL", function);
  if (layout == nullptr) return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: layout is NULL", function);
  return SCI_OK;
}

inline sci_status CheckTokens(const char* function, const uint32_t* tokens, size_t n_tokens) {
  if (tokens == nullptr && n_tokens > 0) {
    return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: tokens is NULL but n_tokens is %d", function, n_tokens);
  }
  return SCI_OK;
}

// The handles and the result struct every page query needs.
inline sci_status CheckQueryHandles(const char* function, const sci_index* index, const sci_layout* layout,
                             const sci_page_result* result) {
  if (sci_status status = CheckIndexAndLayout(function, index, layout); status != SCI_OK) return status;
  if (result == nullptr) return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: result is NULL", function);
  if (!HasStructSize(result->struct_size, SCI_FIELD_END(sci_page_result, fast_path))) {
    return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: result->struct_size %u is too small (need >= %u)", function,
                 result->struct_size, SCI_FIELD_END(sci_page_result, fast_path));
  }
  return SCI_OK;
}

// A request's extras from C (`in` may be NULL: none), as vLLM's hashes take
// them; an error status, recorded, for a bad struct. (An SGLang layout takes
// them too: a request with any has no hit there.)
inline sci_status ConvertExtras(const char* function, const sci_request_extras* in, vllm::RequestExtras* out) {
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

// The hits buffer must hold one byte per page; NULL is fine with no page.
inline sci_status CheckHitsBuffer(const char* function, const uint8_t* hits, size_t hits_cap, size_t n_pages) {
  if (hits_cap < n_pages) {
    return Failf(SCI_ERR_BUFFER_TOO_SMALL, "%s: hits_cap is %d but the request has %d pages", function, hits_cap,
                 n_pages);
  }
  if (hits == nullptr && n_pages > 0) {
    return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: hits is NULL but the request has %d pages", function, n_pages);
  }
  return SCI_OK;
}

inline void WriteResult(const sci::PageQueryResult& r, sci_page_result* result) {
  sci_page_result out{};
  out.struct_size = result->struct_size;
  out.n_pages = r.n_pages;
  out.total_hits = r.total_hits;
  out.prefix_hits = r.prefix_hits;
  out.fast_path = r.fast_path;
  out.prefix_tokens = r.prefix_tokens;
  sci::capi::WriteVersioned(out, result);
}

}  // namespace sci::capi
