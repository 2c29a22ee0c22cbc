// What the C thunks ask of a layout, whichever family it is (SGLang
// HiCache, vLLM MooncakeStoreConnector): a sci_layout holds one
// LayoutFamily, chosen where the layout is made (capi_layout.cpp), and no
// thunk asks which family it has. A third family is one more
// implementation (family_<name>.h/.cpp) and the line in capi_layout.cpp
// that makes it.
//
// The thunks have checked what every family's call takes (the handles,
// the tokens, the extras, the result struct, the hits buffer of a token
// query) before they forward; a family checks only what is its own. Each C
// call costs one or two virtual calls, never one per page.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "index/index.h"
#include "query/query_result.h"
#include "shared_cache_index.h"
#include "vllm/block_hash.h"

namespace sci::capi {

class LayoutFamily {
 public:
  virtual ~LayoutFamily() = default;

  // sci_layout_get_family's answer.
  virtual sci_layout_family family() const = 0;
  // sci_layout_block_size's answer: the block size the engine's router
  // hashes requests in.
  virtual uint32_t block_size() const = 0;

  // The pages (vLLM: router blocks) a request of `n_tokens` answers at
  // `block_size`: the bytes its hits or tiers buffer must hold.
  virtual size_t PagesToCheck(size_t n_tokens, uint32_t block_size) const = 0;

  // The token queries. `extras` are a request's extra keys as vLLM defines
  // them (none: default); `hits` and `tiers` hold PagesToCheck bytes.
  // sci_index_check_pages and its _with_extras form:
  virtual PageQueryResult CheckPages(Index& index, std::span<const uint32_t> tokens, uint32_t block_size,
                                     const vllm::RequestExtras& extras, std::span<uint8_t> hits) const = 0;
  // The three prefix entry points (capi_prefix.cpp):
  virtual PageQueryResult CheckPrefix(Index& index, std::span<const uint32_t> tokens, uint32_t block_size,
                                      const vllm::RequestExtras& extras) const = 0;
  // sci_index_check_tiers:
  virtual PageQueryResult CheckTiers(Index& index, std::span<const uint32_t> tokens, uint32_t block_size,
                                     const vllm::RequestExtras& extras, std::span<uint8_t> tiers,
                                     TierAnswer* answer) const = 0;

  // The hash queries: a family takes its own engine's hashes and refuses
  // the other's call, naming the one to use (SCI_ERR_INVALID_ARGUMENT,
  // recorded). The refusal comes first, then the checks of the hashes (for
  // page hashes, of the hits buffer they size too), so that a bad call gets
  // the message it always got. `function` names the entry point in a
  // message; on SCI_OK `answer` is set.
  // sci_index_check_page_hashes:
  virtual sci_status CheckPageHashes(const char* function, Index& index, const sci_str* page_hashes,
                                     size_t n_page_hashes, uint8_t* hits, size_t hits_cap,
                                     PageQueryResult* answer) const = 0;
  // sci_index_check_block_hashes:
  virtual sci_status CheckBlockHashes(const char* function, Index& index, const sci_block_hashes& hashes,
                                      uint32_t block_size, PageQueryResult* answer) const = 0;
};

}  // namespace sci::capi
