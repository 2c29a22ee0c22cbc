// The SGLang HiCache family's answers to the C thunks (layout_family.h):
// its page query, prefix and tiers (src/sglang/page_query), its page
// hashes, and its refusal of vLLM's block hashes. SGLang's page hashes
// carry no extra keys: a page stored for a request with some cannot be told
// from one stored for the same tokens without them, so such a request has
// no hit. It is counted as a query and answers nothing, whichever call
// asked.
#include "family_sglang.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "capi_support.h"
#include "common/check.h"
#include "query_args.h"
#include "sglang/page_hash.h"
#include "sglang/page_query.h"

namespace sci::capi {
namespace {

// An empty salt is no salt (vLLM tests the salt for truth), so such a
// request is answered as one without extras.
bool HasExtras(const vllm::RequestExtras& extras) {
  return extras.has_lora || (extras.has_salt && !extras.cache_salt.empty());
}

class SGLangFamily final : public LayoutFamily {
 public:
  explicit SGLangFamily(std::unique_ptr<const Layout> layout) : layout_(std::move(layout)) {}

  const Layout& layout() const { return *layout_; }

  sci_layout_family family() const override { return SCI_LAYOUT_SGLANG; }
  uint32_t block_size() const override { return layout_->page_size(); }

  size_t PagesToCheck(size_t n_tokens, uint32_t block_size) const override {
    return sci::PagesToCheck(*layout_, n_tokens, block_size);
  }

  PageQueryResult CheckPages(Index& index, std::span<const uint32_t> tokens, uint32_t block_size,
                             const vllm::RequestExtras& extras, std::span<uint8_t> hits) const override {
    if (!HasExtras(extras)) return sci::CheckPages(index, *layout_, tokens, block_size, hits);
    std::fill(hits.begin(), hits.end(), uint8_t{0});
    index.query_counters().queries.Add();
    PageQueryResult r;
    r.n_pages = hits.size();
    return r;
  }

  PageQueryResult CheckPrefix(Index& index, std::span<const uint32_t> tokens, uint32_t block_size,
                              const vllm::RequestExtras& extras) const override {
    if (!HasExtras(extras)) return sci::CheckPrefix(index, *layout_, tokens, block_size);
    index.query_counters().queries.Add();
    return PageQueryResult{};
  }

  PageQueryResult CheckTiers(Index& index, std::span<const uint32_t> tokens, uint32_t block_size,
                             const vllm::RequestExtras& extras, std::span<uint8_t> tiers,
                             TierAnswer* answer) const override {
    if (!HasExtras(extras)) return sci::CheckTiers(index, *layout_, tokens, block_size, tiers, answer);
    std::fill(tiers.begin(), tiers.end(), uint8_t{SCI_TIER_ABSENT});
    index.query_counters().queries.Add();
    answer->n_tiers = index.tiers().n_tiers();
    PageQueryResult r;
    r.n_pages = tiers.size();
    return r;
  }

  sci_status CheckPageHashes(const char* function, Index& index, const sci_str* page_hashes, size_t n_page_hashes,
                             uint8_t* hits, size_t hits_cap, PageQueryResult* answer) const override {
    if (page_hashes == nullptr && n_page_hashes > 0) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: page_hashes is NULL but n_page_hashes is %d", function,
                   n_page_hashes);
    }
    if (sci_status status = CheckHitsBuffer(function, hits, hits_cap, n_page_hashes); status != SCI_OK) {
      return status;
    }
    // Checked here, once, so that the query may take every hash as valid.
    for (size_t i = 0; i < n_page_hashes; ++i) {
      std::string_view hash;
      if (!ToView(page_hashes[i], &hash) || !IsPageHashHex(hash)) {
        return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: page_hashes[%d] is not 64 lowercase hex characters", function, i);
      }
    }
    *answer = sci::CheckPageHashes(
        index, *layout_, n_page_hashes,
        [page_hashes](size_t page) { return std::string_view(page_hashes[page].ptr, page_hashes[page].len); },
        std::span(hits, n_page_hashes));
    return SCI_OK;
  }

  sci_status CheckBlockHashes(const char* function, Index&, const sci_block_hashes&, uint32_t,
                              PageQueryResult*) const override {
    return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: layout is an SGLang layout (use sci_index_check_page_hashes)",
                 function);
  }

 private:
  std::unique_ptr<const Layout> layout_;  // never null
};

}  // namespace

std::unique_ptr<const LayoutFamily> MakeSGLangFamily(std::unique_ptr<const Layout> layout) {
  return std::make_unique<const SGLangFamily>(std::move(layout));
}

const Layout& SGLangLayoutOf(const LayoutFamily& family) {
  SCI_DCHECK(family.family() == SCI_LAYOUT_SGLANG, "only an SGLang family holds an SGLang layout");
  return static_cast<const SGLangFamily&>(family).layout();
}

}  // namespace sci::capi
