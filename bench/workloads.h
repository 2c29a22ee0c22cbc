// The workloads of docs/performance.md, by the names benchmark
// output uses: layouts (tp1, tp8, tp8pp2, mla, pools6), requests of 16, 169
// and 1024 pages of 64 tokens, index sizes (10k, 1m, 10m present keys) and
// hit mixes (all, half, none).
//
// The layouts are the ones the Rust comparison uses (rust-example/tests/
// common/mod.rs), so the two sets of numbers describe the same shapes.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "sglang/layout.h"

namespace sci::bench {

inline constexpr uint32_t kPageSize = 64;

inline LayoutSpec LayoutSpecNamed(std::string_view name) {
  LayoutSpec spec;
  spec.page_size = kPageSize;
  if (name == "tp1") return spec;
  if (name == "tp8") {
    spec.tp_size = 8;
  } else if (name == "tp8pp2") {
    spec.tp_size = 8;
    spec.pp_size = 2;
  } else if (name == "mla") {
    spec.is_mla_model = true;
  } else if (name == "pools6") {
    // Six advertised suffixes, one of them in a trailing-pages pool.
    spec.key_prefix = "llama";
    spec.pools = {PoolSpec{{"__k", "__v", "__k_scale", "__v_scale", "__idx"}, HitPolicy::kAllPages, 0},
                  PoolSpec{{"__swa"}, HitPolicy::kTrailingPages, 4}};
  } else {
    throw std::invalid_argument("unknown layout name " + std::string(name));
  }
  return spec;
}

inline std::unique_ptr<const Layout> LayoutNamed(std::string_view name) {
  std::string error;
  auto layout = Layout::Create(LayoutSpecNamed(name), &error);
  if (layout == nullptr) throw std::logic_error("layout " + std::string(name) + ": " + error);
  return layout;
}

inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// `pages` whole pages of pseudo-random token ids (a 32000-token vocabulary);
// different seeds give unrelated prompts.
inline std::vector<uint32_t> PromptTokens(uint64_t seed, size_t pages) {
  std::vector<uint32_t> tokens(pages * kPageSize);
  for (size_t j = 0; j < tokens.size(); ++j) {
    tokens[j] = static_cast<uint32_t>(SplitMix64(seed * 0x9E3779B97F4A7C15ull + j) % 32000);
  }
  return tokens;
}

// Parses the index-size names: "10k" -> 10'000, "1m" -> 1'000'000.
inline uint64_t SizeNamed(std::string_view name) {
  if (name == "10k") return 10'000;
  if (name == "1m") return 1'000'000;
  if (name == "10m") return 10'000'000;
  throw std::invalid_argument("unknown index size " + std::string(name));
}

enum class HitMix { kAll, kHalf, kNone };

inline HitMix HitMixNamed(std::string_view name) {
  if (name == "all") return HitMix::kAll;
  if (name == "half") return HitMix::kHalf;
  if (name == "none") return HitMix::kNone;
  throw std::invalid_argument("unknown hit mix " + std::string(name));
}

// Pages of a request the index holds under a hit mix: all of them, the
// first half, or none.
inline size_t StoredPages(HitMix mix, size_t pages) {
  switch (mix) {
    case HitMix::kAll: return pages;
    case HitMix::kHalf: return pages / 2;
    case HitMix::kNone: return 0;
  }
  return 0;
}

}  // namespace sci::bench
