// Fuzzes sci_index_apply_message: bytes -> one multipart message (see
// multipart_input.h) -> applied to an index that already holds two verified
// SGLang pages and a few loose keys, at sequence 4.
//
// Invariants, besides "never crash" (the sanitizers watch memory and UB):
//   - the status is SCI_OK or SCI_ERR_DECODE, nothing else;
//   - SCI_ERR_DECODE changes nothing: every counter but malformed_messages
//     (which grows by one), the presence of every key the fixture knows, each
//     group's state (existence, generation, verification), the cursor;
//   - SCI_OK moves the cursor to the message's sequence and counts exactly
//     one batch (applied or duplicate); a duplicate changes no key or group;
//   - a production-format batch that begins a run (any sequence but 4, 5
//     and 1 here) applies no stored event: they are counted in
//     stores_withheld, and no key is present afterwards; other batches
//     withhold nothing;
//   - SCI_OK leaves exactly the fixture's keys present that a plain model
//     of the rules says (gap, duplicate, early-gap withholding, stored,
//     removed, all-cleared, tenant-cleared by name), under the
//     residency rule bit 3 of byte 0 picks (the frame count uses bits 0-2):
//     the object rule, or the per-medium rule, whose media are numbered in
//     order of first sight, 8 at most;
//   - afterwards the page query reports a page as hit exactly when all of its
//     keys are present (never a false hit, and the query stays exact), and a
//     page store is consistent (store_consistency.h).
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_check.h"
#include "family_sglang.h"
#include "handles.h"
#include "index/index.h"
#include "index/stat_list.h"
#include "sglang/layout.h"
#include "multipart_input.h"
#include "sglang/page_hash.h"
#include "shared_cache_index.h"
#include "store_consistency.h"
#include "wire/wire_decoder.h"

namespace sci::fuzz {
namespace {

// The SGLang layout inside a handle sci_layout_new made.
const Layout& SGLangLayout(const sci_layout* layout) { return capi::SGLangLayoutOf(*layout->family); }

constexpr uint64_t kPreloadSequence = 4;
// The golden "basic" capture's request: tokens 1..8, page size 4, tp 1, so
// its messages name the fixture's keys and groups.
constexpr std::array<uint32_t, 8> kTokens = {1, 2, 3, 4, 5, 6, 7, 8};
constexpr uint32_t kPageSize = 4;

sci_str Str(std::string_view s) { return sci_str{s.data(), s.size()}; }

struct TenantKey {
  std::string tenant;
  std::string key;
};

struct Fixture {
  sci_layout* layout = nullptr;  // never freed: shared by every run
  std::vector<std::string> hashes;
  std::vector<std::string> group_ids;
  std::vector<std::vector<std::string>> page_keys;
  std::vector<TenantKey> loose_keys;  // stored besides the pages
  std::vector<TenantKey> probe_keys;  // every key whose presence is compared
};

const Fixture& TheFixture() {
  static const Fixture* const fixture = [] {
    auto* f = new Fixture;
    sci_layout_spec spec{};
    spec.struct_size = sizeof spec;
    spec.page_size = kPageSize;
    spec.tp_size = 1;
    SCI_FUZZ_CHECK(sci_layout_new(&spec, &f->layout) == SCI_OK, "%s", sci_last_error());
    f->hashes = PageHashesHex(kTokens, kPageSize, false);
    const std::vector<std::string>& hashes = f->hashes;
    for (size_t page = 0; page < hashes.size(); ++page) {
      f->group_ids.push_back(SGLangLayout(f->layout).GroupId(hashes[page]));
      f->page_keys.push_back(SGLangLayout(f->layout).KeysFor(hashes[page], page, hashes.size()));
      for (const std::string& key : f->page_keys.back()) f->probe_keys.push_back({"default", key});
    }
    f->loose_keys = {{"tenant-a", "12345"}, {"default", "0x2a"}, {"default", "key-0_0_k"}};
    for (const TenantKey& k : f->loose_keys) f->probe_keys.push_back(k);
    // Same keys elsewhere: a message must not confuse tenants.
    f->probe_keys.push_back({"default", "12345"});
    f->probe_keys.push_back({"tenant-a", "0x2a"});
    return f;
  }();
  return *fixture;
}

// Two stored pages with their groups verified by a query, and loose keys.
sci_index* PreloadedIndex(const Fixture& f, uint32_t residency) {
  sci_index* index = nullptr;
  sci_index_options options = SCI_INDEX_OPTIONS_INIT;
  options.residency = residency;
  SCI_FUZZ_CHECK(sci_index_new(&options, &index) == SCI_OK, "%s", sci_last_error());
  std::vector<sci_event> events;
  for (size_t page = 0; page < f.page_keys.size(); ++page) {
    for (const std::string& key : f.page_keys[page]) {
      events.push_back({SCI_EVENT_STORED, Str(key), Str(f.group_ids[page]), Str("default"), Str("cpu")});
    }
  }
  for (const TenantKey& k : f.loose_keys) events.push_back({SCI_EVENT_STORED, Str(k.key), {}, Str(k.tenant), {}});
  SCI_FUZZ_CHECK(sci_index_apply_events(index, kPreloadSequence, events.data(), events.size()) == SCI_OK, "%s",
                 sci_last_error());
  std::array<uint8_t, kTokens.size() / kPageSize> hits{};
  sci_page_result result{};
  result.struct_size = sizeof result;
  SCI_FUZZ_CHECK(sci_index_check_pages(index, f.layout, kTokens.data(), kTokens.size(), kPageSize, hits.data(),
                                       hits.size(), &result) == SCI_OK,
                 "%s", sci_last_error());
  SCI_FUZZ_CHECK(result.total_hits == hits.size(), "preloaded pages must hit, got %zu", result.total_hits);
  return index;
}

struct Snapshot {
  sci_stats stats{};
  std::vector<bool> present;
};

Snapshot Take(const sci_index* index, const Fixture& f) {
  Snapshot s;
  s.stats.struct_size = sizeof s.stats;
  SCI_FUZZ_CHECK(sci_index_stats(index, &s.stats) == SCI_OK, "%s", sci_last_error());
  for (const TenantKey& k : f.probe_keys) s.present.push_back(index->impl.Contains(k.tenant, k.key));
  return s;
}

// Every counter of the list (which the C thunk checks against sci_stats at
// compile time), so that a counter added later is compared here too.
void ExpectUnchangedExceptMalformed(const sci_stats& before, const sci_stats& after) {
#define SCI_SAME(name, type, kind, keeper, help)                                                              \
  if (std::string_view(#name) != "malformed_messages") {                                                    \
    SCI_FUZZ_CHECK(before.name == after.name, "a malformed message changed " #name ": %llu -> %llu",          \
                   static_cast<unsigned long long>(before.name), static_cast<unsigned long long>(after.name)); \
  }
  SCI_STAT_LIST(SCI_SAME)
  SCI_FUZZ_CHECK(after.malformed_messages == before.malformed_messages + 1, "malformed_messages %llu -> %llu",
                 static_cast<unsigned long long>(before.malformed_messages),
                 static_cast<unsigned long long>(after.malformed_messages));
}

// The query is exact on one thread: a page hits iff all of its keys are present.
void ExpectPagesAnsweredByTheirKeys(sci_index* index, const Fixture& f) {
  std::array<uint8_t, kTokens.size() / kPageSize> hits{};
  sci_page_result result{};
  result.struct_size = sizeof result;
  SCI_FUZZ_CHECK(sci_index_check_pages(index, f.layout, kTokens.data(), kTokens.size(), kPageSize, hits.data(),
                                       hits.size(), &result) == SCI_OK,
                 "%s", sci_last_error());
  for (size_t page = 0; page < hits.size(); ++page) {
    bool all_present = true;
    for (const std::string& key : f.page_keys[page]) all_present = all_present && index->impl.Contains("default", key);
    SCI_FUZZ_CHECK(hits[page] == (all_present ? 1 : 0), "page %zu: hit %d but all keys present is %d", page,
                   hits[page], all_present);
  }
  ExpectTheStoreConsistent(index->impl);
}

// The early gap rule (docs/index-semantics.md): a production-format batch
// that begins a run applies no stored event unless its sequence is 1. The
// fixture is at sequence 4, so any other sequence than 4 (duplicate) and 5
// begins one, after a clear: no key may be present afterwards.
void ExpectEarlyGapRule(std::span<const std::span<const uint8_t>> frames, uint64_t sequence, const Snapshot& before,
                        const Snapshot& after) {
  DecodedMessage decoded;
  SCI_FUZZ_CHECK(DecodeMessage(frames, &decoded, nullptr), "accepted but does not decode");
  const bool begins_run = sequence != kPreloadSequence && sequence != kPreloadSequence + 1;
  if (decoded.format != WireFormat::kMooncake || !begins_run || sequence == 1) {
    SCI_FUZZ_CHECK(after.stats.stores_withheld == before.stats.stores_withheld,
                   "stores withheld from a batch the rule does not cover");
    return;
  }
  uint64_t stores = 0;
  for (const Event& e : decoded.events) stores += e.kind == EventKind::kStored && !e.object_key.empty() ? 1 : 0;
  SCI_FUZZ_CHECK(after.stats.stores_withheld == before.stats.stores_withheld + stores,
                 "%llu stored events, %llu withheld", static_cast<unsigned long long>(stores),
                 static_cast<unsigned long long>(after.stats.stores_withheld - before.stats.stores_withheld));
  SCI_FUZZ_CHECK(after.stats.keys == 0, "%llu keys present after a run's first batch",
                 static_cast<unsigned long long>(after.stats.keys));
}

// The fixture's probe keys as the rules of docs/index-semantics.md make
// them, applied to a decoded batch: presence and, under the per-medium
// rule, media bits (0: unknown). Written plainly, apart from the index.
class PresenceModel {
 public:
  PresenceModel(const Fixture& f, const Snapshot& before, bool per_medium) : f_(f), per_medium_(per_medium) {
    // The preload stored the pages' keys on "cpu" (number 0) and the loose
    // keys on no medium.
    if (per_medium_) names_.push_back("cpu");
    for (size_t i = 0; i < f.probe_keys.size(); ++i) {
      const bool page_key = i < f.probe_keys.size() - f.loose_keys.size() - 2;
      keys_.push_back({before.present[i], per_medium_ && page_key ? 1u : 0u});
    }
  }

  void Apply(uint64_t sequence, const DecodedMessage& message) {
    if (sequence == kPreloadSequence) return;  // a duplicate
    const bool gap = sequence != kPreloadSequence + 1;
    if (gap) ClearIf([](size_t) { return true; });
    const bool withhold = gap && message.format == WireFormat::kMooncake && sequence != 1;
    for (const Event& e : message.events) {
      if (e.kind == EventKind::kAllCleared) {
        ClearIf([](size_t) { return true; });
      } else if (e.kind == EventKind::kTenantCleared) {
        // The tenant's own keys go, by name (I54): one message holds at
        // most 64 KiB, so no tenant here passes the listed bounds (1,024
        // keys, 128 KiB of names) that would make the index walk its tag.
        // A tenant sharing its tag keeps its keys.
        const uint64_t seed = TenantSeed(e.tenant_id);
        ClearIf([&](size_t i) { return TenantSeed(f_.probe_keys[i].tenant) == seed; });
      } else if (e.kind == EventKind::kStored || e.kind == EventKind::kRemoved) {
        if (e.object_key.empty() || e.object_key.size() > kMaxObjectKeyBytes) continue;
        if (withhold && e.kind == EventKind::kStored) continue;
        // A first-generation master's medium proves nothing (it evicts
        // memory without an event): its stores leave the media unknown,
        // and its name is not numbered.
        const uint32_t bit = e.generation == PublisherGeneration::kFirst ? 0 : Bit(e.medium);
        for (size_t i = 0; i < keys_.size(); ++i) {
          if (f_.probe_keys[i].key != e.object_key ||
              TenantSeed(f_.probe_keys[i].tenant) != TenantSeed(e.tenant_id)) {
            continue;
          }
          Key& k = keys_[i];
          if (e.kind == EventKind::kStored) {
            k.media = bit != 0 && k.present && k.media != 0 ? k.media | bit : bit;
            k.present = true;
          } else if (k.present && bit != 0 && e.generation != PublisherGeneration::kFirst && k.media != 0 &&
                     (k.media & ~bit) != 0) {
            // (A first-generation removal -- the event's dp_rank nil --
            // means no replica is left: the whole key goes.)
            k.media &= ~bit;
          } else {
            k.present = false;
          }
        }
      }
    }
  }

  bool Present(size_t i) const { return keys_[i].present; }

 private:
  struct Key {
    bool present;
    uint32_t media;
  };

  uint32_t Bit(std::string_view medium) {
    if (!per_medium_ || medium.empty()) return 0;
    for (size_t i = 0; i < names_.size(); ++i) {
      if (names_[i] == medium) return 1u << i;
    }
    if (names_.size() == 8) return 0;
    names_.emplace_back(medium);
    return 1u << (names_.size() - 1);
  }

  template <typename Which>
  void ClearIf(Which which) {
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (which(i)) keys_[i] = {false, 0};
    }
  }

  const Fixture& f_;
  const bool per_medium_;
  std::vector<std::string> names_;
  std::vector<Key> keys_;
};

void ExpectPresenceAsModelled(std::span<const std::span<const uint8_t>> frames, uint64_t sequence,
                              const Fixture& f, const Snapshot& before, const Snapshot& after, bool per_medium) {
  DecodedMessage decoded;
  SCI_FUZZ_CHECK(DecodeMessage(frames, &decoded, nullptr), "accepted but does not decode");
  PresenceModel model(f, before, per_medium);
  model.Apply(sequence, decoded);
  for (size_t i = 0; i < f.probe_keys.size(); ++i) {
    SCI_FUZZ_CHECK(after.present[i] == model.Present(i), "%s rule: key '%s' of '%s' present %d, the model says %d",
                   per_medium ? "per-medium" : "object", f.probe_keys[i].key.c_str(), f.probe_keys[i].tenant.c_str(),
                   static_cast<int>(after.present[i]), static_cast<int>(model.Present(i)));
  }
}

}  // namespace
}  // namespace sci::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sci::fuzz;
  const Fixture& f = TheFixture();
  // Bit 3 of byte 0 (the frame count takes bits 0-2) picks the rule.
  const bool per_medium = size > 0 && (data[0] & 0x08) != 0;
  sci_index* index = PreloadedIndex(f, per_medium ? SCI_RESIDENCY_PER_MEDIUM : SCI_RESIDENCY_OBJECT);
  const std::vector<std::span<const uint8_t>> frames = ParseFrames(data, size);
  std::vector<sci_bytes> c_frames;
  for (const auto& frame : frames) {
    // An empty frame may carry a NULL pointer: exercise that too.
    c_frames.push_back(sci_bytes{frame.empty() ? nullptr : frame.data(), frame.size()});
  }

  const Snapshot before = Take(index, f);
  const sci_status status = sci_index_apply_message(index, c_frames.data(), c_frames.size());
  const Snapshot after = Take(index, f);

  SCI_FUZZ_CHECK(status == SCI_OK || status == SCI_ERR_DECODE, "status %d: %s", status, sci_last_error());
  if (status == SCI_ERR_DECODE) {
    SCI_FUZZ_CHECK(std::strlen(sci_last_error()) > 0, "a decode error without a message");
    ExpectUnchangedExceptMalformed(before.stats, after.stats);
    SCI_FUZZ_CHECK(before.present == after.present, "a malformed message changed which keys are present");
  } else {
    SCI_FUZZ_CHECK(frames.size() == 3 && frames[1].size() == 8, "accepted %zu frames", frames.size());
    uint64_t sequence = 0;
    for (uint8_t byte : frames[1]) sequence = (sequence << 8) | byte;
    SCI_FUZZ_CHECK(after.stats.has_sequence && after.stats.last_sequence == sequence,
                   "cursor at %llu after applying batch %llu",
                   static_cast<unsigned long long>(after.stats.last_sequence),
                   static_cast<unsigned long long>(sequence));
    SCI_FUZZ_CHECK(after.stats.malformed_messages == before.stats.malformed_messages, "accepted but counted malformed");
    const uint64_t batches = (after.stats.batches_applied - before.stats.batches_applied) +
                             (after.stats.duplicate_batches - before.stats.duplicate_batches);
    SCI_FUZZ_CHECK(batches == 1, "one message counted as %llu batches", static_cast<unsigned long long>(batches));
    if (sequence == kPreloadSequence) {
      SCI_FUZZ_CHECK(after.stats.duplicate_batches == before.stats.duplicate_batches + 1, "duplicate not counted");
      SCI_FUZZ_CHECK(before.present == after.present, "a duplicate batch changed which keys are present");
    } else if (sequence != kPreloadSequence + 1) {
      SCI_FUZZ_CHECK(after.stats.sequence_gaps == before.stats.sequence_gaps + 1, "gap not counted");
    }
    ExpectEarlyGapRule(frames, sequence, before, after);
    ExpectPresenceAsModelled(frames, sequence, f, before, after, per_medium);
  }
  ExpectPagesAnsweredByTheirKeys(index, f);
  sci_index_free(index);
  return 0;
}
