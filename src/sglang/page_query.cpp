#include "sglang/page_query.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "index/fingerprint.h"
#include "common/log.h"
#include "sglang/page_hash.h"

namespace sci {
namespace {

// Keys fingerprinted before any of them is looked up: their table lines are
// then prefetched together, under one lock hold, so the cache misses of a
// page's keys overlap instead of queueing.
constexpr uint32_t kKeysPerRound = 16;

// Pages hashed before their groups are probed. A round's group lines are
// prefetched as soon as it is hashed and probed only after the next round
// is: the DRAM round trips hide behind SHA-256 instead of adding to it, and
// one reader-lock hold serves a whole round (the lock word is the only line
// two querying threads both write).
constexpr size_t kPagesPerRound = 16;

// A page between its hash and its answer.
struct PendingPage {
  size_t page = 0;
  const Layout::Level* level = nullptr;
  bool checkable = false;  // the page needs at least one key
  char hash[kPageHashHexLength];
  Fingerprint group;
  GroupProbe probe;
};

// One query's state and steps, whatever the source of the page hashes.
// `write_hash(page, out)` writes page `page`'s 64 hex characters to `out`
// (pages come in order).
template <typename WriteHash>
class Query {
 public:
  Query(Index& index, const Layout& layout, size_t n_pages, WriteHash& write_hash, const PageQueryHooks* hooks)
      : index_(index),
        layout_(layout),
        n_pages_(n_pages),
        write_hash_(write_hash),
        hooks_(hooks),
        key_(layout.key_prefix()),
        group_(layout.group_prefix()) {}

  // Every page, hashed a round ahead of its lookups (check_pages).
  PageQueryResult AllPages(std::span<uint8_t> hits) {
    PageQueryResult result;
    result.n_pages = n_pages_;
    PendingPage rounds[2][kPagesPerRound];
    PendingPage* current = rounds[0];
    PendingPage* previous = rounds[1];
    size_t n_previous = 0;
    bool leading_run = true;
    bool round_hits[kPagesPerRound];
    const auto answer = [&](size_t n) {
      AnswerRound(previous, n, round_hits, &result);
      for (size_t i = 0; i < n; ++i) {
        const bool hit = round_hits[i];
        hits[previous[i].page] = hit ? 1 : 0;
        result.total_hits += hit ? 1 : 0;
        leading_run = leading_run && hit;
        result.prefix_hits += leading_run ? 1 : 0;
      }
    };
    for (size_t first = 0; first < n_pages_; first += kPagesPerRound) {
      const size_t n = std::min(kPagesPerRound, n_pages_ - first);
      for (size_t i = 0; i < n; ++i) Prepare(first + i, current[i]);
      {
        Index::Reader reader(index_);
        for (size_t i = 0; i < n; ++i) {
          if (current[i].checkable) reader.PrefetchGroup(current[i].group);
        }
        Probe(reader, previous, n_previous);
      }
      answer(n_previous);
      std::swap(current, previous);
      n_previous = n;
    }
    {
      Index::Reader reader(index_);
      Probe(reader, previous, n_previous);
    }
    answer(n_previous);
    return result;
  }

  // The leading run of hit pages, one page at a time: nothing past the
  // first miss is hashed or looked up (check_prefix).
  PageQueryResult Prefix() {
    PageQueryResult result;
    result.n_pages = n_pages_;
    PendingPage pending;
    for (size_t page = 0; page < n_pages_; ++page) {
      Prepare(page, pending);
      ++result.pages_examined;
      if (!pending.checkable) break;
      // Most prefixes end at a page nobody stored: its group is unknown and
      // its first key absent. Both lookups are started together, so that
      // miss costs one memory round trip, not two.
      key_.SetHash(std::string_view(pending.hash, kPageHashHexLength));
      const Fingerprint first_key =
          FingerprintOf(layout_.tenant_seed(), key_.With(layout_.Suffix(pending.level->first_suffix)));
      bool first_key_present = true;
      {
        Index::Reader reader(index_);
        reader.PrefetchGroup(pending.group);
        reader.PrefetchKey(first_key);
        pending.probe = reader.ProbeGroup(pending.group, pending.level->id);
        if (!pending.probe.verified) first_key_present = reader.ContainsKey(first_key);
      }
      if (!first_key_present) break;
      if (!Answer(pending, &result, /*first_key_checked=*/true)) break;
      ++result.total_hits;
      ++result.prefix_hits;
    }
    return result;
  }

 private:
  // Hashes page `page` and fingerprints its group id.
  void Prepare(size_t page, PendingPage& pending) {
    pending.page = page;
    pending.level = &layout_.LevelFor(page, n_pages_);
    pending.probe = GroupProbe{};
    write_hash_(page, pending.hash);
    pending.checkable = pending.level->n_suffixes > 0;
    if (!pending.checkable) return;
    group_.SetHash(std::string_view(pending.hash, kPageHashHexLength));
    pending.group = FingerprintOf(layout_.tenant_seed(), group_.Bare());
  }

  void Probe(const Index::Reader& reader, PendingPage* pages, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      if (pages[i].checkable) pages[i].probe = reader.ProbeGroup(pages[i].group, pages[i].level->id);
    }
  }

  // Answers a probed round. The keys of its unverified pages whose group is
  // known (the exact path: a stored page not verified yet) are fingerprinted
  // first and looked up under one lock hold with all their lines prefetched
  // together, so the cache misses of the whole round overlap instead of
  // queueing page by page. Other pages take Answer, one by one. Every hook
  // runs before any key of the round is looked up.
  void AnswerRound(const PendingPage* pages, size_t n, bool* hit, PageQueryResult* result) {
    if (hooks_ != nullptr && hooks_->after_group_probe != nullptr) {
      for (size_t i = 0; i < n; ++i) {
        if (pages[i].checkable) hooks_->after_group_probe(hooks_->user, pages[i].page);
      }
    }
    const uint64_t seed = layout_.tenant_seed();
    uint32_t first_key[kPagesPerRound];
    bool batched[kPagesPerRound] = {};
    uint32_t used = 0;
    for (size_t i = 0; i < n; ++i) {
      const PendingPage& page = pages[i];
      const uint32_t n_keys = page.checkable ? page.level->n_suffixes : 0;
      if (!page.checkable || page.probe.verified || !page.probe.exists || used + n_keys > kRoundKeys) continue;
      key_.SetHash(std::string_view(page.hash, kPageHashHexLength));
      for (uint32_t k = 0; k < n_keys; ++k) {
        round_keys_[used + k] = FingerprintOf(seed, key_.With(layout_.Suffix(page.level->first_suffix + k)));
      }
      batched[i] = true;
      first_key[i] = used;
      used += n_keys;
    }
    if (used > 0) {
      Index::Reader reader(index_);
      for (uint32_t k = 0; k < used; ++k) reader.PrefetchKey(round_keys_[k]);
      for (size_t i = 0; i < n; ++i) {
        if (!batched[i]) continue;
        const PendingPage& page = pages[i];
        hit[i] = reader.ContainsAll(std::span<const Fingerprint>(round_keys_ + first_key[i], page.level->n_suffixes));
        // Refused if the group changed since the probe (see ProveByKeys).
        if (hit[i]) reader.MarkVerified(page.group, page.probe, page.level->id);
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if (!batched[i]) hit[i] = Answer(pages[i], result, /*first_key_checked=*/false, /*hooked=*/true);
    }
  }

  // Whether a probed page is a hit: its group verified, else every key
  // present (which verifies the group, unless it changed since the probe).
  bool Answer(const PendingPage& pending, PageQueryResult* result, bool first_key_checked = false,
              bool hooked = false) {
    if (!pending.checkable) return false;
    if (!hooked && hooks_ != nullptr && hooks_->after_group_probe != nullptr) {
      hooks_->after_group_probe(hooks_->user, pending.page);
    }
    if (pending.probe.verified) {
      ++result->fast_path;
      return true;
    }
    return ProveByKeys(pending, first_key_checked);
  }

  // Looks every key of the page up, kKeysPerRound at a time. An unknown
  // group (SGLang most likely never stored the page) first looks up the
  // first key alone: a missing page then costs one fingerprint and one
  // lookup instead of a round of them. Either way a hit has checked every
  // key. The group is marked verified under the lock hold of the last
  // round -- refused if it changed since the probe: then the keys seen may
  // not be the group's whole object set, but the page itself was proven
  // present just now, so it still counts as a hit.
  bool ProveByKeys(const PendingPage& pending, bool first_key_checked) {
    const Layout::Level& level = *pending.level;
    const uint64_t seed = layout_.tenant_seed();
    key_.SetHash(std::string_view(pending.hash, kPageHashHexLength));
    uint32_t first = level.first_suffix;
    const uint32_t end = first + level.n_suffixes;
    if (first_key_checked) {
      ++first;
    } else if (!pending.probe.exists) {
      if (!index_.ContainsKey(FingerprintOf(seed, key_.With(layout_.Suffix(first))))) return false;
      ++first;
    }
    if (first == end) {
      // Nothing left to look up (a one-key page): mark under its own hold.
      if (pending.probe.exists) Index::Reader(index_).MarkVerified(pending.group, pending.probe, level.id);
      return true;
    }
    for (; first < end; first += kKeysPerRound) {
      const uint32_t n = std::min(end - first, kKeysPerRound);
      for (uint32_t k = 0; k < n; ++k) fingerprints_[k] = FingerprintOf(seed, key_.With(layout_.Suffix(first + k)));
      const std::span<const Fingerprint> keys(fingerprints_, n);
      Index::Reader reader(index_);
      for (const Fingerprint& key : keys) reader.PrefetchKey(key);
      if (!reader.ContainsAll(keys)) return false;
      if (first + n == end) reader.MarkVerified(pending.group, pending.probe, level.id);
    }
    return true;
  }

  Index& index_;
  const Layout& layout_;
  const size_t n_pages_;
  WriteHash& write_hash_;
  const PageQueryHooks* hooks_;
  KeyBuffer key_;
  KeyBuffer group_;
  Fingerprint fingerprints_[kKeysPerRound];
  // The keys of a round's exact-path pages (a tp8 round: 16 pages x 16 keys).
  static constexpr uint32_t kRoundKeys = kPagesPerRound * kKeysPerRound;
  Fingerprint round_keys_[kRoundKeys];
};

void CountQuery(Index& index, const PageQueryResult& result, size_t pages_checked) {
  Counters& counters = index.counters();
  counters.queries.Add();
  counters.pages_checked.Add(pages_checked);
  counters.page_hits.Add(result.total_hits);
  counters.fast_path_hits.Add(result.fast_path);
}

template <typename WriteHash>
PageQueryResult RunAllPages(Index& index, const Layout& layout, size_t n_pages, WriteHash write_hash,
                            std::span<uint8_t> hits, const PageQueryHooks* hooks) {
  if (hits.size() < n_pages) throw std::length_error("page query: hits buffer shorter than the page count");
  Query<WriteHash> query(index, layout, n_pages, write_hash, hooks);
  PageQueryResult result = query.AllPages(hits);
  result.pages_examined = n_pages;
  CountQuery(index, result, n_pages);
  return result;
}

bool BlockSizeMatches(Index& index, const Layout& layout, uint32_t block_size) {
  if (block_size == layout.page_size()) return true;
  // Counted as a query that checked no page: a router asking with the
  // wrong block size shows up as queries growing while pages_checked does not.
  index.counters().queries.Add();
  Logf(LogLevel::kDebug, "page query: block size %d is not the layout's page size %d; no page checked", block_size,
       layout.page_size());
  return false;
}

// Page hashes of a request of tokens, from the thread's digest memo: a
// prefix this thread has hashed before is not hashed again (page_hash.h).
// With `look_ahead` (every page will be asked for), each page's memo entry
// is prefetched a round of pages before it is hashed.
class TokenHashes {
 public:
  TokenHashes(const Layout& layout, std::span<const uint32_t> tokens, bool look_ahead)
      : hasher_(tokens, layout.page_size(), layout.is_eagle(), &PageDigestMemo::ForThisThread()),
        look_ahead_(look_ahead) {}
  size_t pages() const { return hasher_.pages(); }
  void operator()(size_t, char* out) {
    ToHex(hasher_.Next(), out);
    if (look_ahead_) hasher_.LookAhead(kPagesPerRound);
  }

 private:
  PageHasher hasher_;
  const bool look_ahead_;
};

}  // namespace

size_t PagesToCheck(const Layout& layout, size_t n_tokens, uint32_t block_size) {
  if (block_size != layout.page_size()) return 0;
  return WholePages(n_tokens, layout.page_size(), layout.is_eagle());
}

PageQueryResult CheckPages(Index& index, const Layout& layout, std::span<const uint32_t> tokens,
                           uint32_t block_size, std::span<uint8_t> hits, const PageQueryHooks* hooks) {
  if (!BlockSizeMatches(index, layout, block_size)) return PageQueryResult{};
  TokenHashes hashes(layout, tokens, /*look_ahead=*/true);
  return RunAllPages(index, layout, hashes.pages(), std::ref(hashes), hits, hooks);
}

PageQueryResult CheckPrefix(Index& index, const Layout& layout, std::span<const uint32_t> tokens,
                            uint32_t block_size) {
  if (!BlockSizeMatches(index, layout, block_size)) return PageQueryResult{};
  TokenHashes hashes(layout, tokens, /*look_ahead=*/false);
  auto write_hash = std::ref(hashes);
  Query<decltype(write_hash)> query(index, layout, hashes.pages(), write_hash, nullptr);
  const PageQueryResult result = query.Prefix();
  CountQuery(index, result, result.pages_examined);
  return result;
}

PageQueryResult CheckPageHashes(Index& index, const Layout& layout, size_t n_pages,
                                absl::FunctionRef<std::string_view(size_t page)> page_hash,
                                std::span<uint8_t> hits, const PageQueryHooks* hooks) {
  return RunAllPages(
      index, layout, n_pages,
      [page_hash](size_t page, char* out) {
        const std::string_view hash = page_hash(page);
        assert(IsPageHashHex(hash));  // validated at the boundary (see the header)
        std::memcpy(out, hash.data(), kPageHashHexLength);
      },
      hits, hooks);
}

}  // namespace sci
