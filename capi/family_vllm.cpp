// The vLLM MooncakeStoreConnector family's answers to the C thunks
// (layout_family.h): its block and prefix queries and tiers over chunk
// hashes (src/vllm/chunk_query), a request's extras taken into its hashes,
// the block hashes a caller already holds, and its refusal of SGLang's
// page hashes.
#include "family_vllm.h"

#include <cstdint>
#include <utility>

#include "capi_support.h"
#include "vllm/chunk_query.h"

namespace sci::capi {
namespace {

class VllmFamily final : public LayoutFamily {
 public:
  explicit VllmFamily(std::unique_ptr<const vllm::Layout> layout) : layout_(std::move(layout)) {}

  sci_layout_family family() const override { return SCI_LAYOUT_VLLM; }
  uint32_t block_size() const override { return layout_->router_block_size(); }

  size_t PagesToCheck(size_t n_tokens, uint32_t block_size) const override {
    return vllm::BlocksToCheck(*layout_, n_tokens, block_size);
  }

  PageQueryResult CheckPages(Index& index, std::span<const uint32_t> tokens, uint32_t block_size,
                             const vllm::RequestExtras& extras, std::span<uint8_t> hits) const override {
    return vllm::CheckBlocks(index, *layout_, vllm::ChainSource::Tokens(tokens, extras), block_size, hits);
  }

  PageQueryResult CheckPrefix(Index& index, std::span<const uint32_t> tokens, uint32_t block_size,
                              const vllm::RequestExtras& extras) const override {
    return vllm::CheckPrefix(index, *layout_, vllm::ChainSource::Tokens(tokens, extras), block_size);
  }

  PageQueryResult CheckTiers(Index& index, std::span<const uint32_t> tokens, uint32_t block_size,
                             const vllm::RequestExtras& extras, std::span<uint8_t> tiers,
                             TierAnswer* answer) const override {
    return vllm::CheckTiers(index, *layout_, vllm::ChainSource::Tokens(tokens, extras), block_size, tiers, answer);
  }

  sci_status CheckPageHashes(const char* function, Index&, const sci_str*, size_t, uint8_t*, size_t,
                             PageQueryResult*) const override {
    return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: layout is a vLLM layout (use sci_index_check_block_hashes)",
                 function);
  }

  // The hashes are chained digests or the engine's 64-bit event hashes, one
  // per hash block of the layout; n_tokens 0 is the header's default (one
  // token past the hashes).
  sci_status CheckBlockHashes(const char* function, Index& index, const sci_block_hashes& hashes,
                              uint32_t block_size, PageQueryResult* answer) const override {
    const size_t n = hashes.n_hashes;
    if (n > 0 && (hashes.digests == nullptr) == (hashes.event_hashes == nullptr)) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: set exactly one of hashes->digests and hashes->event_hashes",
                   function);
    }
    if (n > SIZE_MAX / layout_->hash_block_size() - 1) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: hashes->n_hashes %d is too large", function, n);
    }
    const size_t covered = n * layout_->hash_block_size();
    const size_t n_tokens = hashes.n_tokens == 0 ? covered + 1 : hashes.n_tokens;
    if (n_tokens < covered) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "%s: hashes->n_tokens %d is shorter than %d hashes of %d tokens",
                   function, n_tokens, n, layout_->hash_block_size());
    }
    const vllm::ChainSource source =
        hashes.digests != nullptr ? vllm::ChainSource::Digests(hashes.digests, n, n_tokens)
                                  : vllm::ChainSource::EventHashes(std::span(hashes.event_hashes, n), n_tokens);
    *answer = vllm::CheckPrefix(index, *layout_, source, block_size);
    return SCI_OK;
  }

 private:
  std::unique_ptr<const vllm::Layout> layout_;  // never null
};

}  // namespace

std::unique_ptr<const LayoutFamily> MakeVllmFamily(std::unique_ptr<const vllm::Layout> layout) {
  return std::make_unique<const VllmFamily>(std::move(layout));
}

}  // namespace sci::capi
