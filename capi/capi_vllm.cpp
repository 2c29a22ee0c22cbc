// The vLLM family's side of the page queries and the request extras both
// families take, for the thunks of capi_pages.cpp, capi_prefix.cpp and
// capi_tiers.cpp once they have checked the arguments every query takes.
#include "capi_vllm.h"

#include <span>

#include "capi_support.h"
#include "query_args.h"
#include "vllm/chunk_query.h"

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
