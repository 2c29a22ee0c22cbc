// Differential fuzzing of the whole index (issue #43: the safety net for the
// rewrite that will store pages instead of objects). Bytes are read as a
// stream of small decisions (fuzz_input.h) that drive a real index, made by
// sci_index_new as a host makes it, and a reference written for clarity in
// plain std::map / std::set following docs/index-semantics.md line by line
// (reference_index.h). Steps:
//   - batches of stored / removed events (labelled with their page's group,
//     none, or another page's; on cpu, disk, none or names up to and past
//     the index's 8 medium numbers), tenant-cleared, all-cleared and events
//     of a type nobody knows (with a key: a removal on every medium; without
//     one: a tenant clear), over keys that decompose (the SGLang layouts'
//     own keys, a vLLM "<prefix>@<digest>", a pool suffix, a digest two hex
//     digits early) and keys that do not (uppercase digests, 63 digits,
//     plain names, the input's bytes), under five tenant spellings (two of
//     one tenant, two sharing a tag);
//     applied either as production messages encoded by the publisher's own
//     encoder (sci_index_apply_message: the early-gap rule, event ids, the
//     publisher generation of each event's dp_rank) or through
//     sci_index_apply_events (plain rules); at the next sequence, a
//     duplicate, a gap, a restart at 0, 1 or 2, with event ids continuing,
//     restarting or absent;
//   - sci_index_clear; a lost connection (sci_index_note_reconnect);
//   - a resync as feed/resync.cpp drives the index: Conceal, LoadKeys of a
//     snapshot, buffered batches applied while concealed, Reveal, then the
//     cursor resumed or not, and the stores deferred or not (DeferStores,
//     later EndDeferral applying or dropping them).
// The residency rule (object or per-medium) and the capacity (the default,
// or a few dozen entries) come from the first bytes.
//
// After every step, checked against the reference:
//   - every key of the universe, under four tenants: sci_index_contains
//     equals the reference (while concealed: absent);
//   - the cursor (has_sequence, last_sequence), the key count, and the
//     counters the sequence rules move (duplicate batches, gaps, suspected
//     restarts, withheld stores);
//   - page queries through four SGLang layouts (sci_index_check_pages, twice:
//     the second may take the fast path its first verified): a page hits
//     exactly when every key sci::Layout::KeysFor gives it is present in the
//     reference, the prefix is the leading run of hits, sci_index_check_prefix
//     agrees, the page store stays consistent (store_consistency.h), and
//     sci_index_check_tiers reports the same
//     pages present, none at a faster tier than the reference's keys allow;
//   - an engine's event hash resolves (Index::DigestOfEventHash) to the one
//     digest present "@<digest>" keys of the tenant carry, and to
//     none when none does or two digests share the hash (after such a
//     sharing the index stays unresolved until every key carrying the hash
//     is gone: allowed, see EventHashes).
// Once the index has refused an entry for capacity it may rightly hold less
// than the reference (refused stores and groups, and the media a refused
// store would have added): from then on only "never more" is asserted --
// no key, page or count the reference lacks -- never equality.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "encode/mooncake_encoder.h"
#include "family_sglang.h"
#include "fuzz_check.h"
#include "fuzz_input.h"
#include "handles.h"
#include "reference_index.h"
#include "sglang/layout.h"
#include "sglang/page_hash.h"
#include "shared_cache_index.h"
#include "store_consistency.h"

namespace sci::fuzz {
namespace {

constexpr uint32_t kPageSize = 4;
constexpr std::array<uint32_t, 12> kTokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
constexpr size_t kPages = kTokens.size() / kPageSize;

// "" and "default" are one tenant; the others are apart, but the last
// shares tenant-a's tag (fingerprint.h): a clear of either holding more
// than TenantKeys::kListed keys would take the other's keys too (a miss
// the reference follows); holding fewer, as here, it takes its own only.
std::string TenantSharingTheTagOf(const std::string& tenant) {
  const uint32_t tag = TenantTag(TenantSeed(tenant));
  for (int i = 0;; ++i) {
    std::string other = "tenant-" + std::to_string(i);
    if (TenantTag(TenantSeed(other)) == tag) return other;
  }
}
const std::array<std::string, 5> kTenants = {"", "default", "tenant-a", "tenant-b", TenantSharingTheTagOf("tenant-a")};
// The spellings keys are looked up under ("default" only as "").
const std::array<std::string, 4> kLookupTenants = {kTenants[0], kTenants[2], kTenants[3], kTenants[4]};
// The default tier map numbers cpu and disk first; past eight names a
// medium is unknown to the index (nvme and after, once the others are seen).
const std::array<std::string, 11> kMedia = {"cpu", "disk", "", "ssd", "hbm", "m5", "m6", "m7", "m8", "nvme", "m10"};

// SCI_FUZZ_TRACE=1 in the environment prints every step (to read a finding).
bool Tracing() {
  static const bool on = std::getenv("SCI_FUZZ_TRACE") != nullptr;
  return on;
}
#define TRACE(...)                                       \
  do {                                                   \
    if (Tracing()) std::fprintf(stderr, __VA_ARGS__);    \
  } while (0)

sci_str Str(std::string_view s) { return sci_str{s.data(), s.size()}; }

struct QueryLayout {
  sci_layout* handle = nullptr;  // never freed: shared by every run
  std::string tenant;
  std::vector<std::string> hashes;
  std::vector<std::vector<std::string>> page_keys;
  std::vector<std::string> groups;
};

struct Universe {
  std::vector<QueryLayout> layouts;
  std::vector<std::string> keys;    // every key an event may name (layout keys first)
  std::vector<std::string> groups;  // every label an event may carry
  uint64_t event_hash = 0;          // the low 64 bits of page 0's digest, as an engine names it
};

// `pools`: the key prefix's two advertised pools, one on every page, one on
// the last page only (so the last page needs more keys than the others).
sci_layout* MakeLayout(uint32_t tp, std::string_view tenant, std::string_view tag, std::string_view prefix,
                       bool pools) {
  sci_layout_spec spec = SCI_LAYOUT_SPEC_INIT;
  spec.page_size = kPageSize;
  spec.tp_size = tp;
  spec.tenant_id = Str(tenant);
  spec.extra_backend_tag = Str(tag);
  spec.key_prefix = Str(prefix);
  static const std::array<sci_str, 2> kEveryPage = {Str("__k"), Str("__v")};
  static const std::array<sci_str, 1> kLastPage = {Str("__swa")};
  const std::array<sci_pool, 2> both = {sci_pool{kEveryPage.data(), kEveryPage.size(), SCI_HIT_ALL_PAGES, 0},
                                        sci_pool{kLastPage.data(), kLastPage.size(), SCI_HIT_TRAILING_PAGES, 1}};
  if (pools) {
    spec.pools = both.data();
    spec.n_pools = both.size();
  }
  sci_layout* layout = nullptr;
  SCI_FUZZ_CHECK(sci_layout_new(&spec, &layout) == SCI_OK, "%s", sci_last_error());
  return layout;
}

const Universe& TheUniverse() {
  static const Universe* const universe = [] {
    auto* u = new Universe;
    const auto add = [&](sci_layout* handle, std::string tenant) {
      QueryLayout& l = u->layouts.emplace_back();
      l.handle = handle;
      l.tenant = std::move(tenant);
    };
    add(MakeLayout(1, "", "", "", false), "");
    add(MakeLayout(2, "", "", "", false), "");  // 4 keys a page: a summary entry
    add(MakeLayout(1, "tenant-a", "tag", "", false), "tenant-a");
    add(MakeLayout(1, "", "", "px", true), "");  // a prefix and pools
    const std::vector<std::string> hashes = PageHashesHex(kTokens, kPageSize, false);
    for (QueryLayout& l : u->layouts) {
      const Layout& layout = capi::SGLangLayoutOf(*l.handle->family);
      l.hashes = hashes;
      for (size_t page = 0; page < kPages; ++page) {
        l.page_keys.push_back(layout.KeysFor(hashes[page], page, kPages));
        l.groups.push_back(layout.GroupId(hashes[page]));
        for (const std::string& key : l.page_keys.back()) {
          if (std::find(u->keys.begin(), u->keys.end(), key) == u->keys.end()) u->keys.push_back(key);
        }
        if (std::find(u->groups.begin(), u->groups.end(), l.groups.back()) == u->groups.end()) {
          u->groups.push_back(l.groups.back());
        }
      }
    }
    // Keys around the same digests that the layouts never ask for: some
    // decompose (a head and a tail), some do not.
    const std::string& h = hashes[0];
    std::string upper = h;
    for (char& c : upper) c = c >= 'a' ? static_cast<char>(c - 32) : c;
    for (const std::string& key : {"m@tp_rank:0@" + h, h + "__swa", "ab" + h + "_0_k", h + "_3_v", upper + "_0_k",
                                   h.substr(1) + "_0_k", h, std::string("object-0"), std::string("12345"),
                                   std::string("0x2a"), std::string("k")}) {
      u->keys.push_back(key);
    }
    u->groups.push_back("sglang-hicache:" + upper);
    // vLLM-style keys ending "@<digest>" (the separator sci_index_new gives
    // the index), for event-hash resolution: the same digest under another
    // rank, and a digest sharing its low 64 bits (an ambiguity).
    const std::string twin = std::string(48, 'f') + h.substr(48);
    for (const std::string& key : {"m@tp_rank:1@" + h, "m@tp_rank:0@" + twin}) u->keys.push_back(key);
    u->event_hash = std::stoull(h.substr(48), nullptr, 16);
    return u;
  }();
  return *universe;
}

// The publisher's side of the stream: the event id it numbers next.
struct Publisher {
  uint64_t next_event_id = 1;
};

// One step's events, as plain data the reference and both encodings read.
struct PlannedEvent {
  enum class Kind { kStored, kRemoved, kTenantCleared, kAllCleared, kUnknownWithKey, kUnknownWithoutKey };
  Kind kind = Kind::kStored;
  std::string key, group, tenant, medium;
};

void TraceEvents(const char* how, uint64_t sequence, const std::vector<PlannedEvent>& events) {
  if (!Tracing()) return;
  static const char* const kKinds[] = {"stored", "removed", "tenant-cleared", "all-cleared", "unknown+key",
                                       "unknown-key"};
  std::fprintf(stderr, "%s seq %llu:\n", how, static_cast<unsigned long long>(sequence));
  for (const PlannedEvent& e : events) {
    std::fprintf(stderr, "  %s '%s' tenant '%s' group '%s' medium '%s'\n", kKinds[static_cast<int>(e.kind)],
                 e.key.c_str(), e.tenant.c_str(), e.group.c_str(), e.medium.c_str());
  }
}

std::string PickKey(FuzzInput& in, const Universe& u, std::vector<std::string>& extra) {
  const uint8_t choice = in.Byte();
  if (choice < 240) return u.keys[choice % u.keys.size()];
  // Bytes of the input (an empty one is ignored and counted, as the index does).
  std::string key = in.String(12);
  extra.push_back(key);
  return key;
}

std::string PickLabel(FuzzInput& in, const Universe& u, const std::string& key) {
  const uint8_t choice = in.Byte() % 8;
  if (choice < 4) {
    // The key's own page's group, when it has one.
    for (const QueryLayout& l : u.layouts) {
      for (size_t page = 0; page < kPages; ++page) {
        for (const std::string& k : l.page_keys[page]) {
          if (k == key) return l.groups[page];
        }
      }
    }
    return "";
  }
  if (choice < 6) return "";
  return u.groups[in.Byte() % u.groups.size()];
}

std::vector<PlannedEvent> PlanEvents(FuzzInput& in, const Universe& u, bool production, std::vector<std::string>& extra) {
  std::vector<PlannedEvent> events(in.Byte() % 7);
  for (PlannedEvent& e : events) {
    const uint8_t kind = in.Byte() % 32;
    using K = PlannedEvent::Kind;
    e.kind = kind < 14 ? K::kStored
             : kind < 27 ? K::kRemoved
             : kind < 29 ? K::kTenantCleared
             : kind < 30 ? (production ? K::kUnknownWithKey : K::kAllCleared)
             : kind < 31 ? (production ? K::kUnknownWithoutKey : K::kAllCleared)
                         : K::kStored;
    e.tenant = kTenants[in.Byte() % kTenants.size()];
    if (e.kind == K::kStored || e.kind == K::kRemoved || e.kind == K::kUnknownWithKey) {
      e.key = PickKey(in, u, extra);
      e.group = PickLabel(in, u, e.key);
      e.medium = kMedia[in.Byte() % kMedia.size()];
    }
  }
  return events;
}

// What the reference reads of a planned event, as the index's decoder or C
// API would hand it over.
ReferenceIndex::Event ForReference(const PlannedEvent& e, PublisherGeneration generation) {
  using K = PlannedEvent::Kind;
  ReferenceIndex::Event r;
  r.tenant = e.tenant;
  switch (e.kind) {
    case K::kStored: r.kind = ReferenceIndex::Kind::kStored; break;
    case K::kRemoved: r.kind = ReferenceIndex::Kind::kRemoved; break;
    case K::kTenantCleared:
    case K::kUnknownWithoutKey: r.kind = ReferenceIndex::Kind::kTenantCleared; break;
    case K::kAllCleared: r.kind = ReferenceIndex::Kind::kAllCleared; break;
    case K::kUnknownWithKey:
      // docs/index-semantics.md: its key is dropped on every medium, so
      // neither its medium nor its generation reaches the rule. (An empty
      // key is no key: its tenant is cleared.)
      if (e.key.empty()) {
        r.kind = ReferenceIndex::Kind::kTenantCleared;
        return r;
      }
      r.kind = ReferenceIndex::Kind::kRemoved;
      r.key = e.key;
      r.group = e.group;
      return r;
  }
  r.key = e.key;
  r.group = e.group;
  r.medium = e.medium;
  r.generation = generation;
  return r;
}

// A production message: the publisher's encoder, its sequence frame, and
// event ids as the input says (continuing, restarted at 1, or none).
void ApplyProductionMessage(sci_index* index, uint64_t sequence, const std::vector<PlannedEvent>& planned,
                            bool second_generation, uint8_t ids_choice, Publisher& publisher,
                            ReferenceIndex& reference) {
  if (ids_choice == 1) publisher.next_event_id = 1;  // a restarted publisher
  std::vector<MooncakeEvent> events;
  std::vector<ReferenceIndex::Event> seen;
  for (const PlannedEvent& p : planned) {
    MooncakeEvent e;
    e.event_id = ids_choice == 2 ? 0 : publisher.next_event_id++;  // 0: unnumbered
    e.tenant_id = p.tenant;
    e.second_generation = second_generation;
    e.object_key = p.key;
    e.group_id = p.group;
    e.medium = p.medium;
    using K = PlannedEvent::Kind;
    e.stored = p.kind == K::kStored;
    e.cleared = p.kind == K::kTenantCleared;
    if (p.kind == K::kUnknownWithKey || p.kind == K::kUnknownWithoutKey) e.unknown_type = "evicted";
    if (p.kind == K::kUnknownWithoutKey) e.object_key = {};
    events.push_back(e);
    seen.push_back(ForReference(p, second_generation ? PublisherGeneration::kSecond : PublisherGeneration::kFirst));
  }
  ReferenceIndex::EventIds ids;
  ids.known = !events.empty() && ids_choice != 2;
  if (!events.empty()) {
    ids.first = events.front().event_id;
    ids.last = events.back().event_id;
  }
  std::string payload;
  EncodeMooncakePayload(1700000000000, events, &payload);
  const std::array<uint8_t, 8> sequence_frame = EncodeSequence(sequence);
  const std::array<sci_bytes, 3> frames = {sci_bytes{nullptr, 0}, sci_bytes{sequence_frame.data(), 8},
                                           sci_bytes{reinterpret_cast<const uint8_t*>(payload.data()), payload.size()}};
  const sci_status status = sci_index_apply_message(index, frames.data(), frames.size());
  SCI_FUZZ_CHECK(status == SCI_OK, "a message the publisher's encoder made was refused: %s", sci_last_error());
  TRACE("production %s ids %d (%llu..%llu) ", second_generation ? "2nd-gen" : "1st-gen", ids.known,
        static_cast<unsigned long long>(ids.first), static_cast<unsigned long long>(ids.last));
  TraceEvents("message", sequence, planned);
  reference.ApplyBatch(sequence, seen, /*production=*/true, ids);
}

void ApplyEvents(sci_index* index, uint64_t sequence, const std::vector<PlannedEvent>& planned,
                 ReferenceIndex& reference) {
  std::vector<sci_event> events;
  std::vector<ReferenceIndex::Event> seen;
  for (const PlannedEvent& p : planned) {
    using K = PlannedEvent::Kind;
    const sci_event_kind kind = p.kind == K::kStored          ? SCI_EVENT_STORED
                                : p.kind == K::kRemoved       ? SCI_EVENT_REMOVED
                                : p.kind == K::kAllCleared    ? SCI_EVENT_ALL_CLEARED
                                                              : SCI_EVENT_TENANT_CLEARED;
    events.push_back({kind, Str(p.key), Str(p.group), Str(p.tenant), Str(p.medium)});
    seen.push_back(ForReference(p, PublisherGeneration::kUnknown));
  }
  SCI_FUZZ_CHECK(sci_index_apply_events(index, sequence, events.data(), events.size()) == SCI_OK, "%s",
                 sci_last_error());
  TraceEvents("apply_events", sequence, planned);
  reference.ApplyBatch(sequence, seen, /*production=*/false, {});
}

// Whether the index has refused an entry for capacity (see the top).
bool Refused(const sci_index* index) {
  sci_stats stats = SCI_STATS_INIT;
  SCI_FUZZ_CHECK(sci_index_stats(index, &stats) == SCI_OK, "%s", sci_last_error());
  return stats.capacity_refusals != 0;
}

uint64_t PickSequence(FuzzInput& in, const ReferenceIndex& reference) {
  const uint8_t choice = in.Byte() % 16;
  const uint64_t last = reference.cursor().last_sequence;
  if (!reference.cursor().has_sequence) return choice < 8 ? 1 : choice % 4;  // 0..3 begins a history
  if (choice < 10) return last + 1;
  if (choice < 12) return last;                      // a duplicate
  if (choice < 14) return last + 2 + choice % 3;     // a gap
  return choice % 3;                                 // a restart (or a regression)
}

// ---- the checks ----

struct Checker {
  sci_index* index;
  const Universe& u;
  const std::vector<std::string>& extra;
  const ReferenceIndex& reference;
  bool exact;  // false once the index refused an entry (see the top)
  int step;

  bool Contains(const std::string& tenant, const std::string& key) const {
    bool present = false;
    SCI_FUZZ_CHECK(sci_index_contains(index, Str(tenant), Str(key), &present) == SCI_OK, "%s", sci_last_error());
    return present;
  }

  void Keys() const {
    for (const std::string& tenant : kLookupTenants) {
      for (const std::vector<std::string>* keys : {&u.keys, &extra}) {
        for (const std::string& key : *keys) {
          const bool in_index = Contains(tenant, key);
          const bool in_reference = reference.Visible(tenant, key);
          if (exact) {
            SCI_FUZZ_CHECK(in_index == in_reference, "step %d: key '%s' of tenant '%s': index %d, reference %d", step,
                           key.c_str(), tenant.c_str(), in_index, in_reference);
          } else {
            SCI_FUZZ_CHECK(!in_index || in_reference, "step %d: key '%s' of tenant '%s' present, reference lacks it",
                           step, key.c_str(), tenant.c_str());
          }
        }
      }
    }
  }

  void Counters() const {
    sci_stats stats = SCI_STATS_INIT;
    SCI_FUZZ_CHECK(sci_index_stats(index, &stats) == SCI_OK, "%s", sci_last_error());
    const ReferenceIndex::Cursor& c = reference.cursor();
    SCI_FUZZ_CHECK(stats.has_sequence == c.has_sequence && (!c.has_sequence || stats.last_sequence == c.last_sequence),
                   "step %d: cursor (%d, %llu), reference (%d, %llu)", step, static_cast<int>(stats.has_sequence),
                   static_cast<unsigned long long>(stats.last_sequence), static_cast<int>(c.has_sequence),
                   static_cast<unsigned long long>(c.last_sequence));
    const ReferenceIndex::Counts& n = reference.counts();
    SCI_FUZZ_CHECK(stats.duplicate_batches == n.duplicates, "step %d: %llu duplicates, reference %llu", step,
                   static_cast<unsigned long long>(stats.duplicate_batches),
                   static_cast<unsigned long long>(n.duplicates));
    SCI_FUZZ_CHECK(stats.sequence_gaps == n.gaps, "step %d: %llu gaps, reference %llu", step,
                   static_cast<unsigned long long>(stats.sequence_gaps), static_cast<unsigned long long>(n.gaps));
    SCI_FUZZ_CHECK(stats.restarts_suspected == n.restarts, "step %d: %llu restarts, reference %llu", step,
                   static_cast<unsigned long long>(stats.restarts_suspected),
                   static_cast<unsigned long long>(n.restarts));
    SCI_FUZZ_CHECK(stats.stores_withheld == n.stores_withheld, "step %d: %llu stores withheld, reference %llu", step,
                   static_cast<unsigned long long>(stats.stores_withheld),
                   static_cast<unsigned long long>(n.stores_withheld));
    // The key count is the tables' own (a concealed index holds what it
    // loaded; the reference's keys are the same, hidden or not).
    if (exact) {
      SCI_FUZZ_CHECK(stats.keys == reference.size(), "step %d: %llu keys, reference %zu", step,
                     static_cast<unsigned long long>(stats.keys), reference.size());
    } else {
      SCI_FUZZ_CHECK(stats.keys <= reference.size(), "step %d: %llu keys, reference %zu", step,
                     static_cast<unsigned long long>(stats.keys), reference.size());
    }
  }

  void Pages() const {
    for (size_t which = 0; which < u.layouts.size(); ++which) {
      const QueryLayout& l = u.layouts[which];
      for (int round = 0; round < 2; ++round) {  // the second may take the fast path the first verified
        std::array<uint8_t, kPages> hits{};
        sci_page_result result = SCI_PAGE_RESULT_INIT;
        SCI_FUZZ_CHECK(sci_index_check_pages(index, l.handle, kTokens.data(), kTokens.size(), kPageSize, hits.data(),
                                             hits.size(), &result) == SCI_OK,
                       "%s", sci_last_error());
        size_t leading = 0, total = 0;
        bool run = true;
        for (size_t page = 0; page < kPages; ++page) {
          // (A page that needs no key is never a hit.)
          bool in_index = !l.page_keys[page].empty(), in_reference = in_index;
          for (const std::string& key : l.page_keys[page]) {
            in_index = in_index && Contains(l.tenant, key);
            in_reference = in_reference && reference.Visible(l.tenant, key);
          }
          // One thread: the query answers exactly what the index holds...
          SCI_FUZZ_CHECK(hits[page] == (in_index ? 1 : 0), "step %d layout %zu page %zu: hit %d, its keys present %d", step,
                         which, page, hits[page], in_index);
          // ... and never a page the reference lacks.
          if (exact) {
            SCI_FUZZ_CHECK(hits[page] == (in_reference ? 1 : 0), "step %d layout %zu page %zu: hit %d, reference %d", step,
                           which, page, hits[page], in_reference);
          } else {
            SCI_FUZZ_CHECK(hits[page] == 0 || in_reference, "step %d layout %zu page %zu: a false hit", step, which, page);
          }
          total += hits[page];
          run = run && hits[page] == 1;
          leading += run ? 1 : 0;
        }
        if (round == 0) TRACE("  layout %zu: pages %d%d%d\n", which, hits[0], hits[1], hits[2]);
        SCI_FUZZ_CHECK(result.n_pages == kPages && result.total_hits == total && result.prefix_hits == leading,
                       "step %d: result (%zu, %zu, %zu), hits (%zu, %zu, %zu)", step, result.n_pages,
                       result.total_hits, result.prefix_hits, kPages, total, leading);
        ExpectTheStoreConsistent(index->impl);
        if (round == 1) {
          size_t prefix = 0;
          SCI_FUZZ_CHECK(sci_index_check_prefix(index, l.handle, kTokens.data(), kTokens.size(), kPageSize, &prefix) ==
                             SCI_OK,
                         "%s", sci_last_error());
          SCI_FUZZ_CHECK(prefix == leading, "step %d: prefix %zu, leading hits %zu", step, prefix, leading);
          Tiers(l, hits);
        }
      }
    }
  }

  // An engine's event hash resolves to the digest that present keys of the
  // asking tenant end with ("@<digest>"), and to none when no such key
  // is present or two digests share the hash (index-semantics.md, the
  // event-hash digest map). Concealed: nothing is asserted (a digest the
  // index resolves then only leads to keys that answer absent).
  void EventHashes() const {
    for (const std::string& tenant : kLookupTenants) {
      std::array<uint8_t, 32> digest{};
      const bool resolved = index->impl.DigestOfEventHash(TenantSeed(tenant), u.event_hash, &digest);
      const std::set<std::string> expected = reference.DigestsEndingKeys(tenant, u.event_hash);
      std::string hex;
      for (uint8_t byte : digest) hex += "0123456789abcdef"[byte >> 4], hex += "0123456789abcdef"[byte & 15];
      TRACE("  event hash, tenant '%s': resolved %d, %zu digests\n", tenant.c_str(), resolved, expected.size());
      if (resolved) {
        SCI_FUZZ_CHECK(expected.count(hex) > 0, "step %d tenant '%s': the event hash resolved to %s, no key has it", step,
                       tenant.c_str(), hex.c_str());
      }
      if (exact && !reference.concealed()) {
        // Unresolved with one digest left is allowed only after an
        // ambiguity that has not emptied (reference_index.h,
        // AmbiguousSinceEmpty; index-semantics.md).
        const bool excused = reference.AmbiguousSinceEmpty(tenant, u.event_hash);
        SCI_FUZZ_CHECK(resolved ? expected.size() == 1 : expected.size() != 1 || excused,
                       "step %d tenant '%s': resolved %d, %zu digests present", step, tenant.c_str(), resolved,
                       expected.size());
      }
    }
  }

  // A tier is a promise of speed: never faster than the reference's keys
  // (a key on cpu is at tier 0, any other key at 1). A page verified
  // through its group reads the group's tier, the slowest of every key
  // stored under it -- keys of other layouts included -- so a slower
  // answer is allowed, a faster one never.
  void Tiers(const QueryLayout& l, const std::array<uint8_t, kPages>& hits) const {
    std::array<uint8_t, kPages> tiers{};
    sci_tier_result result = SCI_TIER_RESULT_INIT;
    SCI_FUZZ_CHECK(sci_index_check_tiers(index, l.handle, kTokens.data(), kTokens.size(), kPageSize, nullptr,
                                         tiers.data(), tiers.size(), &result) == SCI_OK,
                   "%s", sci_last_error());
    for (size_t page = 0; page < kPages; ++page) {
      SCI_FUZZ_CHECK((tiers[page] != SCI_TIER_ABSENT) == (hits[page] == 1),
                     "step %d page %zu: tier %d but check_pages' hit %d", step, page, tiers[page], hits[page]);
      if (tiers[page] == SCI_TIER_ABSENT) continue;
      uint8_t slowest = 0;
      for (const std::string& key : l.page_keys[page]) slowest = std::max(slowest, reference.Tier(l.tenant, key));
      SCI_FUZZ_CHECK(tiers[page] >= slowest, "step %d page %zu: tier %d, the reference's keys are at %d", step, page,
                     tiers[page], slowest);
    }
  }
};

}  // namespace
}  // namespace sci::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sci::fuzz;
  using sci::PublisherGeneration;
  const Universe& u = TheUniverse();
  FuzzInput in(data, size);
  const uint8_t setup = in.Byte();
  const bool per_medium = (setup & 1) != 0;
  sci_index_options options = SCI_INDEX_OPTIONS_INIT;
  options.residency = per_medium ? SCI_RESIDENCY_PER_MEDIUM : SCI_RESIDENCY_OBJECT;
  // Mostly room for everything; now and then a few dozen entries (keys +
  // groups), so that refusals happen.
  if ((setup & 6) == 6) options.max_entries = 8 + in.Byte() % 48;
  TRACE("residency %s, max_entries %llu\n", per_medium ? "per-medium" : "object",
        static_cast<unsigned long long>(options.max_entries));
  sci_index* index = nullptr;
  SCI_FUZZ_CHECK(sci_index_new(&options, &index) == SCI_OK, "%s", sci_last_error());

  ReferenceIndex reference(per_medium ? sci::Residency::kPerMedium : sci::Residency::kObject);
  Publisher publisher;
  std::vector<std::string> extra;  // keys made of the input's bytes
  std::vector<std::string> snapshot_keys;
  bool exact = true;
  for (int step = 0; step < 64 && in.remaining() > 0; ++step) {
    const uint8_t op = in.Byte() % 16;
    TRACE("step %d:\n", step);
    if (op < 11) {
      const bool production = op < 7;
      const uint64_t sequence = PickSequence(in, reference);
      const std::vector<PlannedEvent> events = PlanEvents(in, u, production, extra);
      if (production) {
        const uint8_t shape = in.Byte();
        // ids: 0 continuing (mostly), 1 a restarted publisher's, 2 none.
        const uint8_t ids_choice = (shape >> 1) % 8 < 6 ? 0 : (shape >> 1) % 8 == 6 ? 1 : 2;
        ApplyProductionMessage(index, sequence, events, (shape & 1) != 0, ids_choice, publisher, reference);
      } else {
        ApplyEvents(index, sequence, events, reference);
      }
    } else if (op == 11) {
      TRACE("clear\n");
      sci_index_clear(index);
      reference.Clear();
    } else if (op == 12) {
      TRACE("reconnect\n");
      sci_index_note_reconnect(index);  // a lost connection
      reference.RequireEventContinuity();
    } else if (op == 13) {
      // A resync (feed/resync.cpp): conceal, load the snapshot (default
      // tenant, no groups, media unknown), replay what was buffered while
      // still concealed, reveal, then resume the cursor at the batch that
      // made the clear or leave it for the next batch to begin a run.
      const sci::Index::Cursor before = index->impl.cursor();
      index->impl.Conceal();
      reference.Conceal();
      snapshot_keys.clear();
      for (int n = in.Byte() % 12; n > 0; --n) {
        std::string key = PickKey(in, u, extra);
        if (!key.empty()) snapshot_keys.push_back(key);
      }
      std::vector<std::string_view> views(snapshot_keys.begin(), snapshot_keys.end());
      TRACE("conceal, load %zu keys:", views.size());
      for (std::string_view key : views) TRACE(" '%.*s'", static_cast<int>(key.size()), key.data());
      TRACE("\n");
      index->impl.LoadKeys(views);
      for (const std::string& key : snapshot_keys) reference.LoadKey(key);
      exact = exact && !Refused(index);
      Checker{index, u, extra, reference, exact, step}.Keys();
      for (int buffered = in.Byte() % 3; buffered > 0; --buffered) {
        // One read after the other: an argument list's order is the compiler's.
        const uint64_t sequence = PickSequence(in, reference);
        const std::vector<PlannedEvent> events = PlanEvents(in, u, true, extra);
        const bool second_generation = (in.Byte() & 1) != 0;
        ApplyProductionMessage(index, sequence, events, second_generation, 0, publisher, reference);
        exact = exact && !Refused(index);
        Checker{index, u, extra, reference, exact, step}.Keys();
      }
      index->impl.Reveal();
      reference.Reveal();
      const uint8_t after = in.Byte() % 4;
      if (after == 1 && reference.CanResume()) {
        TRACE("reveal, resume\n");
        index->impl.ResumeAt(before);
        reference.ResumeAt();
      } else if (after >= 2) {
        TRACE("reveal, defer stores\n");
        index->impl.DeferStores();
        reference.DeferStores();
      }
    } else if (op == 14) {
      // (Dropped instead where the order the index applies them in would
      // decide which medium gets the last number: reference_index.h.)
      const bool apply = in.Bool() && !reference.DeferralOrderMatters();
      TRACE("end deferral, %s\n", apply ? "apply" : "drop");
      index->impl.EndDeferral(apply);
      reference.EndDeferral(apply);
    } else {
      // Only the queries below: their verifications and adoption requests
      // stand until the next batch, which adopts first.
    }
    exact = exact && !Refused(index);
    const Checker check{index, u, extra, reference, exact, step};
    check.Keys();
    check.Counters();
    check.Pages();
    check.EventHashes();
  }
  sci_index_free(index);
  return 0;
}
