// A straightforward reference for the vLLM queries' answers, for the fuzz
// harnesses' differential checks: the block digests recomputed from the
// tokens with no memo (vllm::HashChain), each chunk's keys spelled out and
// looked up one by one (Index::Contains), and Dynamo's answer and the
// per-block hits worked out from those chunks by the rules as
// docs/vllm-family.md states them ("Chunks, groups and the answer"), with
// none of the query's rounds, walks, memo or scratch.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "index/fingerprint.h"
#include "index/index.h"
#include "query/digest.h"
#include "vllm/block_hash.h"
#include "vllm/layout.h"
#include "vllm/layout_spec.h"

namespace sci::fuzz {

class VllmReference {
 public:
  // `chain`: the request's digests, one per whole hash block of its
  // `n_tokens` tokens.
  VllmReference(const Index& index, const vllm::LayoutSpec& spec, const vllm::Layout& layout,
                const std::vector<vllm::BlockDigest>& chain, size_t n_tokens)
      : spec_(spec), layout_(layout), n_tokens_(n_tokens) {
    const uint64_t hash_block = spec.groups[0].hash_block_size;
    for (size_t g = 0; g < spec.groups.size(); ++g) {
      const uint64_t size = spec.groups[g].block_size;
      std::vector<bool> present;
      // Chunk c covers tokens [c * size, (c + 1) * size), keyed by the
      // digest of the hash block ending it.
      for (uint64_t c = 0; (c + 1) * size <= n_tokens; ++c) {
        const uint64_t key_block = (c + 1) * size / hash_block - 1;
        std::string hex(kPageHashHexLength, '\0');
        ToHex(chain[key_block], hex.data());
        bool all = true;
        for (const std::string& key : layout.KeysFor(g, hex)) {
          all = all && Index::Reader(index).Contains(layout.tenant_seed(), key);
        }
        present.push_back(all);
      }
      present_.push_back(std::move(present));
    }
  }

  // Whether chunk c of group g lies inside the request and has every key.
  bool Present(size_t g, uint64_t c) const { return c < present_[g].size() && present_[g][c]; }

  // Dynamo's answer, in router blocks: the longest L, a positive multiple
  // of the alignment, at most the request less its last token, rounded down
  // to a router block, at which every group holds.
  size_t Prefix() const {
    const uint64_t b = spec_.main_event_block_size;
    const uint64_t credited = n_tokens_ == 0 ? 0 : (n_tokens_ - 1) / b * b;
    const uint64_t alignment = layout_.alignment();
    uint64_t best = 0;
    for (uint64_t length = alignment; length <= credited; length += alignment) {
      if (Holds(length)) best = length;
    }
    return static_cast<size_t>(best / b);
  }

  // Per router block: a hit when, for every full-attention group, every
  // chunk the block overlaps is inside the request and present; no hit
  // without a full-attention group.
  std::vector<uint8_t> Blocks() const {
    const uint64_t b = spec_.main_event_block_size;
    std::vector<uint8_t> hits(n_tokens_ / b, 0);
    const bool any_full = std::any_of(spec_.groups.begin(), spec_.groups.end(), [](const vllm::GroupSpec& g) {
      return g.kind == vllm::GroupKind::kFullAttention;
    });
    if (!any_full) return hits;
    for (uint64_t i = 0; i < hits.size(); ++i) {
      bool hit = true;
      for (size_t g = 0; g < spec_.groups.size() && hit; ++g) {
        if (spec_.groups[g].kind != vllm::GroupKind::kFullAttention) continue;
        const uint64_t size = spec_.groups[g].block_size;
        for (uint64_t c = i * b / size; c <= ((i + 1) * b - 1) / size && hit; ++c) hit = Present(g, c);
      }
      hits[i] = hit ? 1 : 0;
    }
    return hits;
  }

 private:
  bool Holds(uint64_t length) const {
    bool any_full = false;
    size_t vouching = 0;
    for (size_t g = 0; g < spec_.groups.size(); ++g) {
      const vllm::GroupSpec& group = spec_.groups[g];
      const uint64_t size = group.block_size;
      const uint64_t ending = length / size;  // chunks ending at or before length
      switch (group.kind) {
        case vllm::GroupKind::kFullAttention:
          any_full = true;
          for (uint64_t c = 0; c < ending; ++c) {
            if (!Present(g, c)) return false;
          }
          break;
        case vllm::GroupKind::kSlidingWindow: {
          // The chunks holding the window's last sliding_window - 1 tokens.
          const uint64_t window_chunks = (uint64_t{group.sliding_window} - 1 + size - 1) / size;
          const uint64_t needed = std::min(window_chunks, ending);
          for (uint64_t k = 0; k < needed; ++k) {
            if (!Present(g, ending - 1 - k)) return false;
          }
          vouching += needed;
          break;
        }
        case vllm::GroupKind::kMamba:
          if (length % size != 0 || ending == 0 || !Present(g, ending - 1)) return false;
          ++vouching;
          break;
      }
    }
    // Without full attention, a prefix nothing was found present for is a miss.
    return any_full || vouching > 0;
  }

  const vllm::LayoutSpec& spec_;
  const vllm::Layout& layout_;
  const size_t n_tokens_;
  std::vector<std::vector<bool>> present_;
};

}  // namespace sci::fuzz
