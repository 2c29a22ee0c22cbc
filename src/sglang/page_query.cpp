#include "sglang/page_query.h"

#include <cassert>
#include <cstring>
#include <stdexcept>

#include "index/fingerprint.h"
#include "common/log.h"
#include "sglang/page_hash.h"

namespace sci {
namespace {

// Fingerprints a run of keys before looking any of them up, then looks them
// up under one lock hold with their table lines prefetched together, so the
// cache misses of a page's keys overlap instead of queueing.
constexpr uint32_t kKeysPerRound = 16;

// Whether every key of `level` is present. `likely_absent` (the page's group
// is unknown, so SGLang most likely never stored it) first looks up the
// first key alone: a missing page then costs one fingerprint and one lookup
// instead of a round of them. Either way a hit has checked every key.
// `fingerprints` is the caller's scratch of kKeysPerRound entries.
bool AllKeysPresent(const Index& index, const Layout& layout, const Layout::Level& level, KeyBuffer& key,
                    bool likely_absent, Fingerprint* fingerprints) {
  const uint64_t seed = layout.tenant_seed();
  uint32_t first = level.first_suffix;
  const uint32_t end = first + level.n_suffixes;
  if (likely_absent) {
    if (!index.ContainsKey(FingerprintOf(seed, key.With(layout.Suffix(first))))) return false;
    ++first;
  }
  for (; first < end; first += kKeysPerRound) {
    const uint32_t n = end - first < kKeysPerRound ? end - first : kKeysPerRound;
    for (uint32_t k = 0; k < n; ++k) fingerprints[k] = FingerprintOf(seed, key.With(layout.Suffix(first + k)));
    if (!index.ContainsAll(std::span<const Fingerprint>(fingerprints, n))) return false;
  }
  return true;
}

// The query proper, whatever the source of the page hashes. `write_hash(page,
// out)` writes page `page`'s 64 hex characters to `out` (pages come in order).
template <typename WriteHash>
PageQueryResult Run(Index& index, const Layout& layout, size_t n_pages, WriteHash write_hash,
                    std::span<uint8_t> hits, const PageQueryHooks* hooks) {
  if (hits.size() < n_pages) throw std::length_error("page query: hits buffer shorter than the page count");
  KeyBuffer key(layout.key_prefix());
  KeyBuffer group(layout.group_prefix());
  const uint64_t seed = layout.tenant_seed();
  Fingerprint fingerprints[kKeysPerRound];  // once per query, not per page
  PageQueryResult result;
  result.n_pages = n_pages;
  bool leading_run = true;
  for (size_t page = 0; page < n_pages; ++page) {
    bool hit = false;
    const Layout::Level& level = layout.LevelFor(page, n_pages);
    write_hash(page, key.hash());
    if (level.n_suffixes > 0) {
      std::memcpy(group.hash(), key.hash(), kPageHashHexLength);
      const Fingerprint group_id = FingerprintOf(seed, group.Bare());
      const GroupProbe probe = index.ProbeGroup(group_id, level.id);
      if (hooks != nullptr && hooks->after_group_probe != nullptr) hooks->after_group_probe(hooks->user, page);
      if (probe.verified) {
        hit = true;
        ++result.fast_path;
      } else if (AllKeysPresent(index, layout, level, key, /*likely_absent=*/!probe.exists, fingerprints)) {
        hit = true;
        // Refused if the group changed since the probe: then the keys seen
        // may not be the group's whole object set, but the page itself was
        // proven present just now, so it still counts as a hit.
        index.MarkVerified(group_id, probe, level.id);
      }
    }
    hits[page] = hit ? 1 : 0;
    result.total_hits += hit ? 1 : 0;
    leading_run = leading_run && hit;
    result.prefix_hits += leading_run ? 1 : 0;
  }
  Counters& counters = index.counters();
  counters.queries.Add();
  counters.pages_checked.Add(result.n_pages);
  counters.page_hits.Add(result.total_hits);
  counters.fast_path_hits.Add(result.fast_path);
  return result;
}

}  // namespace

size_t PagesToCheck(const Layout& layout, size_t n_tokens, uint32_t block_size) {
  if (block_size != layout.page_size()) return 0;
  return WholePages(n_tokens, layout.page_size(), layout.is_eagle());
}

PageQueryResult CheckPages(Index& index, const Layout& layout, std::span<const uint32_t> tokens,
                           uint32_t block_size, std::span<uint8_t> hits, const PageQueryHooks* hooks) {
  if (block_size != layout.page_size()) {
    // Counted as a query that checked no page: a router asking with the
    // wrong block size shows up as queries growing while pages_checked does not.
    index.counters().queries.Add();
    Logf(LogLevel::kDebug, "page query: block size %d is not the layout's page size %d; no page checked",
         block_size, layout.page_size());
    return PageQueryResult{};
  }
  // The thread's digest memo: a prefix this thread has hashed before is not
  // hashed again (page_hash.h).
  PageHasher hasher(tokens, layout.page_size(), layout.is_eagle(), &PageDigestMemo::ForThisThread());
  return Run(
      index, layout, hasher.pages(),
      [&hasher](size_t, char* out) { ToHex(hasher.Next(), out); },
      hits, hooks);
}

PageQueryResult CheckPageHashes(Index& index, const Layout& layout, size_t n_pages,
                                absl::FunctionRef<std::string_view(size_t page)> page_hash,
                                std::span<uint8_t> hits, const PageQueryHooks* hooks) {
  return Run(
      index, layout, n_pages,
      [page_hash](size_t page, char* out) {
        const std::string_view hash = page_hash(page);
        assert(IsPageHashHex(hash));  // validated at the boundary (see the header)
        std::memcpy(out, hash.data(), kPageHashHexLength);
      },
      hits, hooks);
}

}  // namespace sci
