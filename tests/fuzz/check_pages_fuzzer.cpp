// Fuzzes sci_layout_new and sci_index_check_pages together: bytes -> a
// layout spec (sizes, flags, tag / prefix / tenant strings, pools with
// suffixes and hit policies) -> token ids -> which keys of which pages get
// stored (all, some, none, or those of a different request length), with or
// without their group ids, in an index that may be tiny (capacity refusals)
// -> a few rounds of query, then removals / re-stores, then query again (so
// verified groups and the fast path are exercised). Stores and removals are
// labelled with the page's group, none, or another page's. Under either
// residency rule (bit 3 of the capacity byte): keys are stored on "cpu",
// "disk", both or no medium, changes name "cpu", "disk", none or "ssd", and
// a change may clear the tenant (or everything).
//
// Invariants, besides "never crash":
//   - sci_layout_new either succeeds or returns SCI_ERR_INVALID_ARGUMENT
//     with a message naming sci_layout_new;
//   - n_pages is the number of whole pages, 0 on a block size mismatch;
//   - a page is reported hit exactly when it needs at least one key and
//     every key it needs (sci::Layout::KeysFor) is present (Index::Contains)
//     -- never a false hit, and on one thread never a false miss either;
//   - no hit for a key the harness never stored, or whose every medium it
//     removed (a model of plain sets, following the residency rule);
//   - total_hits, prefix_hits and fast_path agree with the hits array;
//   - the page store stays consistent (store_consistency.h).
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "family_sglang.h"
#include "handles.h"
#include "sglang/layout.h"
#include "sglang/page_hash.h"
#include "shared_cache_index.h"
#include "store_consistency.h"

namespace sci::fuzz {
namespace {

// The SGLang layout inside a handle sci_layout_new made.
const Layout& SGLangLayout(const sci_layout* layout) { return capi::SGLangLayoutOf(*layout->family); }

sci_str Str(const std::string& s) { return sci_str{s.data(), s.size()}; }

// The C spec and the storage its pointers point into.
struct SpecInput {
  sci_layout_spec spec{};
  std::string tag, prefix, tenant;
  std::deque<std::vector<std::string>> suffixes;
  std::deque<std::vector<sci_str>> suffix_views;
  std::vector<sci_pool> pools;
};

void ReadSpec(FuzzInput& in, SpecInput* s) {
  sci_layout_spec& spec = s->spec;
  spec.struct_size = sizeof spec;
  const uint8_t shape = in.Byte();
  // Zero bytes give a valid tp 1 layout of page size 1; 255 exercises page_size 0.
  const uint8_t page = in.Byte();
  spec.page_size = page == 255 ? 0 : 1u + page % 8;
  // Now and then a size far past the bounds, to hit the validation.
  spec.tp_size = (shape & 0xC0) == 0xC0 ? in.U32() : in.Byte() % 5;
  spec.pp_size = (shape & 0x30) == 0x30 ? in.U32() : in.Byte() % 4;
  spec.tp_lcm_size = in.Byte() % 9;
  spec.is_mla_model = (shape & 1) != 0;
  spec.is_eagle = (shape & 2) != 0;
  spec.should_split_heads = (shape & 4) != 0;
  s->tag = in.String(6);
  s->prefix = in.String(6);
  s->tenant = in.String(6);
  spec.extra_backend_tag = Str(s->tag);
  spec.key_prefix = Str(s->prefix);
  spec.tenant_id = Str(s->tenant);
  const size_t n_pools = in.Byte() % 4;
  for (size_t p = 0; p < n_pools; ++p) {
    const size_t n_suffixes = in.Byte() % 4;  // 0 is invalid: exercised
    std::vector<std::string>& names = s->suffixes.emplace_back();
    std::vector<sci_str>& views = s->suffix_views.emplace_back();
    for (size_t i = 0; i < n_suffixes; ++i) names.push_back(in.String(5));
    for (const std::string& name : names) views.push_back(Str(name));
    sci_pool pool{};
    pool.suffixes = views.data();
    pool.n_suffixes = views.size();
    pool.hit_policy = in.Byte() % 3;  // 2 is unknown: exercised
    pool.trailing_pages = in.Byte() % 6;
    s->pools.push_back(pool);
  }
  spec.pools = s->pools.empty() ? nullptr : s->pools.data();
  spec.n_pools = s->pools.size();
}

std::string TenantKey(std::string_view tenant, std::string_view key) {
  std::string joined(tenant.empty() ? std::string_view("default") : tenant);
  joined.push_back('\0');
  joined.append(key);
  return joined;
}

// The harness's own record of what it stored: (tenant, key) joined by a NUL,
// with the media holding it under the per-medium rule (empty: unknown, which
// any removal drops; index-semantics.md, "Residency").
class KeySet {
 public:
  explicit KeySet(bool per_medium) : per_medium_(per_medium) {}

  void Store(const std::string& tenant_key, const std::string& medium) {
    auto [it, added] = keys_.try_emplace(tenant_key);
    const bool known = !added && !it->second.empty();
    if (!per_medium_ || medium.empty()) {
      it->second.clear();
    } else if (known) {
      it->second.insert(medium);
    } else {
      it->second = {medium};
    }
  }
  void Remove(const std::string& tenant_key, const std::string& medium) {
    const auto it = keys_.find(tenant_key);
    if (it == keys_.end()) return;
    if (per_medium_ && !medium.empty() && !it->second.empty()) {
      std::set<std::string> left = it->second;
      left.erase(medium);
      if (!left.empty()) {
        it->second = std::move(left);
        return;
      }
    }
    keys_.erase(it);
  }
  // Tenants are told apart here by name; the index by an 8-bit tag, so a
  // clear may also take another tenant's keys: misses the queries never
  // ask about (they ask for the cleared tenant only).
  void ClearTenant(std::string_view tenant) {
    const std::string prefix = TenantKey(tenant, {});
    std::erase_if(keys_, [&](const auto& entry) { return entry.first.starts_with(prefix); });
  }
  void Clear() { keys_.clear(); }
  bool Has(const std::string& tenant_key) const { return keys_.contains(tenant_key); }

 private:
  const bool per_medium_;
  std::unordered_map<std::string, std::set<std::string>> keys_;
};

// Keeps one input's work bounded (a layout may need 4096 keys per page).
constexpr size_t kMaxKeysPerInput = 4096;

// One batch of events under construction; owns its strings.
class Batch {
 public:
  void Add(sci_event_kind kind, std::string tenant, std::string key, std::string group, std::string medium = {}) {
    strings_.push_back(std::move(tenant));
    const std::string& t = strings_.back();
    strings_.push_back(std::move(key));
    const std::string& k = strings_.back();
    strings_.push_back(std::move(group));
    const std::string& g = strings_.back();
    strings_.push_back(std::move(medium));
    const std::string& m = strings_.back();
    events_.push_back(sci_event{kind, Str(k), Str(g), Str(t), Str(m)});
  }
  const std::vector<sci_event>& events() const { return events_; }

 private:
  std::deque<std::string> strings_;
  std::vector<sci_event> events_;
};

struct Request {
  std::vector<uint32_t> tokens;
  std::vector<std::string> hashes;                // per whole page
  std::vector<std::vector<std::string>> keys;     // per page, as the layout derives them
  std::vector<std::string> groups;                // per page
};

void Query(sci_index* index, const sci_layout* layout, const Request& r, uint32_t block_size,
           const std::string& tenant, const KeySet& stored, bool refusals_possible) {
  const size_t expected_pages = block_size == SGLangLayout(layout).page_size() ? r.hashes.size() : 0;
  std::vector<uint8_t> hits(expected_pages + 1, 0xEE);
  sci_page_result result{};
  result.struct_size = sizeof result;
  const sci_status status = sci_index_check_pages(index, layout, r.tokens.data(), r.tokens.size(), block_size,
                                                  hits.data(), hits.size(), &result);
  SCI_FUZZ_CHECK(status == SCI_OK, "check_pages failed: %d %s", status, sci_last_error());
  SCI_FUZZ_CHECK(result.n_pages == expected_pages, "n_pages %zu, expected %zu", result.n_pages, expected_pages);
  SCI_FUZZ_CHECK(hits[expected_pages] == 0xEE, "wrote past n_pages");
  size_t total = 0, prefix = 0;
  bool leading = true;
  for (size_t page = 0; page < expected_pages; ++page) {
    SCI_FUZZ_CHECK(hits[page] <= 1, "hits[%zu] is %d", page, hits[page]);
    bool all_present = !r.keys[page].empty();
    bool all_stored = !r.keys[page].empty();
    for (const std::string& key : r.keys[page]) {
      all_present = all_present && index->impl.Contains(tenant, key);
      all_stored = all_stored && stored.Has(TenantKey(tenant, key));
    }
    SCI_FUZZ_CHECK(hits[page] == (all_present ? 1 : 0), "page %zu of %zu: hit %d, all %zu keys present %d", page,
                   expected_pages, hits[page], r.keys[page].size(), all_present);
    SCI_FUZZ_CHECK(!hits[page] || all_stored, "page %zu hit with a key that was never stored", page);
    if (!refusals_possible) {
      SCI_FUZZ_CHECK(hits[page] == (all_stored ? 1 : 0), "page %zu: hit %d, model says %d", page, hits[page],
                     all_stored);
    }
    total += hits[page];
    leading = leading && hits[page] == 1;
    prefix += leading ? 1 : 0;
  }
  SCI_FUZZ_CHECK(result.total_hits == total, "total_hits %zu, counted %zu", result.total_hits, total);
  SCI_FUZZ_CHECK(result.prefix_hits == prefix, "prefix_hits %zu, counted %zu", result.prefix_hits, prefix);
  SCI_FUZZ_CHECK(result.fast_path <= result.total_hits, "fast_path %zu > total_hits %zu", result.fast_path,
                 result.total_hits);
  ExpectTheStoreConsistent(index->impl);
}

void Run(FuzzInput& in) {
  const uint8_t capacity = in.Byte();
  sci_index_options options{};
  options.struct_size = sizeof options;
  options.max_entries = capacity < 16 ? 1 + capacity * 2u : 0;  // tiny now and then: refusals
  const bool per_medium = (capacity & 0x08) != 0;
  options.residency = per_medium ? SCI_RESIDENCY_PER_MEDIUM : SCI_RESIDENCY_OBJECT;
  sci_index* index = nullptr;
  SCI_FUZZ_CHECK(sci_index_new(&options, &index) == SCI_OK, "%s", sci_last_error());

  SpecInput spec;
  ReadSpec(in, &spec);
  sci_layout* layout = nullptr;
  const sci_status made = sci_layout_new(&spec.spec, &layout);
  if (made != SCI_OK) {
    SCI_FUZZ_CHECK(made == SCI_ERR_INVALID_ARGUMENT && layout == nullptr, "sci_layout_new: status %d", made);
    SCI_FUZZ_CHECK(std::strncmp(sci_last_error(), "sci_layout_new: ", 16) == 0, "message: %s", sci_last_error());
    sci_index_free(index);
    return;
  }
  const Layout& l = SGLangLayout(layout);

  Request r;
  const size_t n_tokens = in.Byte() % 40;
  for (size_t i = 0; i < n_tokens; ++i) r.tokens.push_back(in.Byte());
  r.hashes = PageHashesHex(r.tokens, l.page_size(), l.is_eagle());
  // Fewer pages when the layout needs many keys per page.
  const size_t keys_per_page = l.KeysFor(std::string(kPageHashHexLength, '0'), 0, 1).size();
  const size_t max_pages = kMaxKeysPerInput / (keys_per_page == 0 ? 1 : keys_per_page);
  if (r.hashes.size() > max_pages) {
    r.hashes.resize(max_pages);
    r.tokens.resize(max_pages * l.page_size() + (l.is_eagle() && max_pages > 0 ? 1 : 0));
  }
  const size_t n_pages = r.hashes.size();
  for (size_t page = 0; page < n_pages; ++page) {
    r.keys.push_back(l.KeysFor(r.hashes[page], page, n_pages));
    r.groups.push_back(l.GroupId(r.hashes[page]));
  }
  const std::string tenant = spec.tenant;
  const std::string model_tenant = tenant.empty() ? "default" : tenant;

  // What gets stored: per page a mode and a mask.
  KeySet stored(per_medium);
  Batch batch;
  for (size_t page = 0; page < n_pages; ++page) {
    const uint8_t mode = in.Byte();
    const bool labelled = (mode & 0x10) == 0;
    // Now and then labelled with the next page's group (a publisher bug).
    const std::string& label = (mode & 0x80) != 0 && n_pages > 1 ? r.groups[(page + 1) % n_pages] : r.groups[page];
    std::vector<std::string> keys;
    switch (mode % 4) {
      case 0: keys = r.keys[page]; break;
      case 1: {
        // The keys this page would need in a longer request: with trailing
        // pools, a different (smaller) level.
        keys = l.KeysFor(r.hashes[page], page, n_pages + 1 + (mode >> 5));
        break;
      }
      case 2: {
        const uint8_t mask = in.Byte();
        for (size_t k = 0; k < r.keys[page].size(); ++k) {
          if ((mask >> (k % 8)) & 1) keys.push_back(r.keys[page][k]);
        }
        break;
      }
      default: break;
    }
    // Now and then the right key under another tenant: must not count.
    const std::string store_tenant = (mode & 0x0C) == 0x0C ? model_tenant + "x" : tenant;
    // On "cpu", "disk", both (a copy offloaded), or no medium.
    static const std::vector<std::string> kMedia[4] = {{"cpu"}, {"disk"}, {"cpu", "disk"}, {""}};
    for (const std::string& key : keys) {
      for (const std::string& medium : kMedia[(mode >> 5) & 3]) {
        batch.Add(SCI_EVENT_STORED, store_tenant, key, labelled ? label : std::string(), medium);
        stored.Store(TenantKey(store_tenant, key), medium);
      }
    }
  }
  uint64_t sequence = 1;
  SCI_FUZZ_CHECK(sci_index_apply_events(index, sequence, batch.events().data(), batch.events().size()) == SCI_OK,
                 "%s", sci_last_error());

  const uint32_t block_size = in.Byte() < 240 ? l.page_size() : in.Byte() % 9;
  sci_stats stats{};
  stats.struct_size = sizeof stats;
  const size_t rounds = 1 + in.Byte() % 4;
  for (size_t round = 0; round < rounds; ++round) {
    SCI_FUZZ_CHECK(sci_index_stats(index, &stats) == SCI_OK, "%s", sci_last_error());
    Query(index, layout, r, block_size, tenant, stored, stats.capacity_refusals > 0);
    // Query twice: the second may take the fast path the first verified.
    Query(index, layout, r, block_size, tenant, stored, stats.capacity_refusals > 0);
    if (n_pages == 0) break;
    // Change something between rounds.
    Batch change;
    const size_t n_changes = in.Byte() % 4;
    for (size_t c = 0; c < n_changes; ++c) {
      const uint8_t what = in.Byte();
      const size_t page = in.Byte() % n_pages;
      if (r.keys[page].empty()) continue;
      const std::string& key = r.keys[page][in.Byte() % r.keys[page].size()];
      // The page's own group, none, or another page's (a mislabel).
      const std::string group = (what & 4) != 0   ? r.groups[page]
                                : (what & 8) != 0 ? r.groups[(page + 1 + what / 16) % n_pages]
                                                  : std::string();
      static const std::string kMedia[4] = {"cpu", "disk", "", "ssd"};
      const std::string& medium = kMedia[(what >> 4) & 3];
      if ((what & 3) == 0) {
        change.Add(SCI_EVENT_STORED, tenant, key, group, medium);
        stored.Store(TenantKey(tenant, key), medium);
      } else if ((what & 3) == 3 && (what & 0xC0) == 0xC0) {
        change.Add(SCI_EVENT_TENANT_CLEARED, tenant, {}, {});
        stored.ClearTenant(tenant);
      } else if ((what & 3) == 3 && (what & 0x80) != 0) {
        change.Add(SCI_EVENT_ALL_CLEARED, {}, {}, {});
        stored.Clear();
      } else {
        change.Add(SCI_EVENT_REMOVED, tenant, key, group, medium);
        stored.Remove(TenantKey(tenant, key), medium);
      }
    }
    ++sequence;
    SCI_FUZZ_CHECK(sci_index_apply_events(index, sequence, change.events().data(), change.events().size()) == SCI_OK,
                   "%s", sci_last_error());
  }
  sci_layout_free(layout);
  sci_index_free(index);
}

}  // namespace
}  // namespace sci::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sci::fuzz::FuzzInput in(data, size);
  sci::fuzz::Run(in);
  return 0;
}
