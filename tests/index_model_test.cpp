// Model-based randomized tests of the index: a tiny reference model written
// for clarity (plain sets, the rules of docs/index-semantics.md line by line) and
// random streams of batches with gaps, duplicates, restarts, stored/removed
// with and without groups (and with the wrong group), on several media
// (cpu, disk, none, and more names than the index numbers), several
// tenants, all-cleared and tenant-cleared events (and, as production
// messages, `cleared` and event types nobody knows that name no key),
// under the plain rules and the production format's (stores of a run's
// first batch withheld), and under both residency rules (object and
// per-medium: the model keeps each key's media).
//
//   - Index level: after every step the index agrees with the model, and no
//     verified group lacks a key the model does not have.
//   - Page level: the same kind of stream over the keys SGLang layouts derive
//     (sci::Layout gives the keys; the model stays plain sets), fed through
//     ApplyBatch and as encoded production messages through ApplyMessage,
//     with malformed messages interleaved (they must change nothing), index
//     clears and layout handles replaced by other specs. After every step
//     page queries under several layouts report exactly the pages whose keys
//     the model holds (never a hit the model lacks; exact where no capacity
//     refusal occurred).
//   - Concurrent: readers run page queries while the writer applies such a
//     stream; a reader must never see a hit for a page one of whose keys the
//     writer had not stored, or had removed, for the whole of the query.
// A failure names its seed; SCI_MODEL_TEST_SEEDS scales the runs down (the
// sanitizer builds) or up.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>
#include <msgpack.hpp>

#include "index/index.h"
#include "index/key_shape.h"
#include "sglang/layout.h"
#include "wire/message_apply.h"
#include "encode/mooncake_encoder.h"
#include "sglang/page_hash.h"
#include "sglang/page_query.h"

namespace sci {
namespace {

// ---- the reference model ----

struct Model {
  // (tenant, key) -> the group it was stored under ("" = none).
  std::map<std::pair<std::string, std::string>, std::string> keys;
  // Residency (index-semantics.md): under the per-medium rule, each present
  // key's media as bits of the numbers below (0: unknown, which any removal
  // drops). Medium names are numbered in order of first sight, 8 at most,
  // never taken back; a name beyond them is unknown. The tier map's media
  // (the default, cpu=0 and disk=1) are numbered first, as the index does.
  Residency residency = Residency::kObject;
  std::map<std::pair<std::string, std::string>, uint32_t> media;
  std::vector<std::string> medium_names = {"cpu", "disk"};
  uint64_t medium_removals_kept = 0, tenant_clears = 0;
  bool has_sequence = false;
  uint64_t last_sequence = 0;
  uint64_t gaps = 0, duplicates = 0, stores_withheld = 0;

  static std::string Tenant(std::string_view t) { return t.empty() ? "default" : std::string(t); }

  void Clear() {
    keys.clear();
    media.clear();
    has_sequence = false;
  }

  uint32_t MediumBit(std::string_view medium) {
    if (residency != Residency::kPerMedium || medium.empty()) return 0;
    for (size_t i = 0; i < medium_names.size(); ++i) {
      if (medium_names[i] == medium) return 1u << i;
    }
    if (medium_names.size() == 8) return 0;
    medium_names.emplace_back(medium);
    return 1u << (medium_names.size() - 1);
  }

  void ClearTenant(const std::string& tenant) {
    std::erase_if(keys, [&](const auto& entry) { return entry.first.first == tenant; });
    std::erase_if(media, [&](const auto& entry) { return entry.first.first == tenant; });
  }

  // A snapshot's key: no group, media unknown.
  void LoadKey(const std::string& tenant, const std::string& key) {
    keys[{tenant, key}] = "";
    media[{tenant, key}] = 0;
  }

  // Tiers (medium_tiers.h, the default map): a key on cpu is at tier 0;
  // on other media only, or on media unknown, at tier 1.
  uint8_t KeyTier(const std::string& tenant, const std::string& key) const {
    auto it = media.find({Tenant(tenant), key});
    return it != media.end() && (it->second & 1u) != 0 ? 0 : 1;
  }

  // `production`: the batch came as a Mooncake production-format message,
  // whose run-beginning batch (gap, restart, or first after a clear) applies
  // only its removals and all-cleared events unless its sequence is 1.
  void ApplyBatch(uint64_t s, const std::vector<Event>& events, bool production = false) {
    if (has_sequence && s == last_sequence) {
      ++duplicates;
      return;
    }
    const bool gap = has_sequence && s != last_sequence + 1;
    const bool withhold_stores = production && (gap || !has_sequence) && s != 1;
    if (gap) {
      ++gaps;
      Clear();
    }
    for (const Event& e : events) {
      if (withhold_stores && e.kind == EventKind::kStored && !e.object_key.empty()) {
        ++stores_withheld;
        continue;
      }
      if (e.kind == EventKind::kAllCleared) {
        Clear();
        continue;
      }
      if (e.kind == EventKind::kTenantCleared) {
        ClearTenant(Tenant(e.tenant_id));
        ++tenant_clears;
        continue;
      }
      if (e.kind != EventKind::kStored && e.kind != EventKind::kRemoved) continue;
      if (e.object_key.empty()) continue;
      const std::pair<std::string, std::string> k{Tenant(e.tenant_id), std::string(e.object_key)};
      const uint32_t bit = MediumBit(e.medium);
      const auto held = media.find(k);
      if (e.kind == EventKind::kStored) {
        // A known medium joins the key's known media; an unknown one (or a
        // key whose media were unknown) makes them just this store's.
        const bool adds = bit != 0 && held != media.end() && held->second != 0;
        media[k] = adds ? held->second | bit : bit;
        keys[k] = std::string(e.group_id);
      } else if (bit != 0 && held != media.end() && (held->second & ~bit) != 0) {
        held->second &= ~bit;  // still on another medium: nothing else changes
        ++medium_removals_kept;
      } else {
        keys.erase(k);
        media.erase(k);
      }
    }
    has_sequence = true;
    last_sequence = s;
  }

  bool Has(std::string_view tenant, std::string_view key) const {
    return keys.count({Tenant(tenant), std::string(key)}) > 0;
  }
  bool StoredUnder(std::string_view tenant, std::string_view key, std::string_view group) const {
    auto it = keys.find({Tenant(tenant), std::string(key)});
    return it != keys.end() && it->second == group;
  }
};

// ---- the random stream ----

constexpr int kGroups = 6;
constexpr int kKeysPerGroup = 3;
const std::vector<std::string> kTenants = {"", "default", "tenant-a", "tenant-b"};

std::string GroupName(int g) { return "sglang-hicache:g" + std::to_string(g); }
std::string KeyName(int g, int k) { return "g" + std::to_string(g) + "_" + std::to_string(k) + "_k"; }

// Mostly "cpu" and "disk"; now and then none, and names enough to use up
// the index's 8 medium numbers (past them a name counts as unknown).
template <typename Random>
std::string_view PickMedium(Random& random) {
  static const std::array<std::string_view, 11> kOthers = {"", "ssd", "nvme", "hbm", "m5", "m6", "m7",
                                                           "m8", "m9", "m10", "m11"};
  const int r = random.Pick(100);
  if (r < 40) return "cpu";
  if (r < 80) return "disk";
  if (r < 88) return "";
  return kOthers[static_cast<size_t>(random.Pick(static_cast<int>(kOthers.size())))];
}

struct Stream {
  explicit Stream(uint64_t seed) : rng(seed) {}
  std::mt19937_64 rng;
  std::vector<std::string> strings;  // backing storage for one batch's views

  int Pick(int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); }
  bool Chance(int percent) { return Pick(100) < percent; }

  uint64_t NextSequence(const Model& m) {
    if (!m.has_sequence) return Chance(10) ? 0 : static_cast<uint64_t>(Pick(1000));
    const int r = Pick(100);
    if (r < 80) return m.last_sequence + 1;
    if (r < 88) return m.last_sequence;                          // duplicate
    if (r < 95) return m.last_sequence + 2 + Pick(5);            // gap
    return static_cast<uint64_t>(Pick(3));                       // restart (or regression)
  }

  std::vector<Event> NextBatch() {
    strings.clear();
    const int n = Pick(6);
    strings.reserve(static_cast<size_t>(n) * 3);
    std::vector<Event> events;
    for (int i = 0; i < n; ++i) {
      Event e;
      const int r = Pick(100);
      e.kind = r < 55   ? EventKind::kStored
               : r < 94 ? EventKind::kRemoved
               : r < 95 ? EventKind::kAllCleared
               : r < 97 ? EventKind::kTenantCleared
                        : EventKind::kIgnored;
      const int g = Pick(kGroups);
      strings.push_back(KeyName(g, Pick(kKeysPerGroup)));
      e.object_key = Chance(3) ? std::string_view() : std::string_view(strings.back());
      strings.push_back(GroupName(g));
      // Stored events normally carry their group; removals often do not.
      const bool labelled = e.kind == EventKind::kStored ? !Chance(10) : Chance(50);
      if (labelled) e.group_id = strings.back();
      e.tenant_id = kTenants[static_cast<size_t>(Pick(static_cast<int>(kTenants.size())))];
      e.medium = PickMedium(*this);
      events.push_back(e);
    }
    return events;
  }
};

void CheckAgainstModel(const Index& index, const Model& model, bool exact, uint64_t seed, int step) {
  for (const std::string& tenant : kTenants) {
    for (int g = 0; g < kGroups; ++g) {
      bool all_present = true;
      for (int k = 0; k < kKeysPerGroup; ++k) {
        const bool in_model = model.Has(tenant, KeyName(g, k));
        const bool in_index = index.Contains(tenant, KeyName(g, k));
        // Present is not enough: a verified group's keys must all have been
        // stored under it, or a removal could miss it.
        all_present = all_present && model.StoredUnder(tenant, KeyName(g, k), GroupName(g));
        if (exact) {
          ASSERT_EQ(in_index, in_model) << "seed " << seed << " step " << step << " key " << KeyName(g, k)
                                        << " tenant '" << tenant << "'";
        } else {
          ASSERT_FALSE(in_index && !in_model) << "seed " << seed << " step " << step << " false key hit";
        }
      }
      (void)all_present;
    }
  }
  const Stats s = index.GetStats();
  ASSERT_EQ(s.has_sequence, model.has_sequence) << "seed " << seed << " step " << step;
  if (model.has_sequence) {
    ASSERT_EQ(s.last_sequence, model.last_sequence) << "seed " << seed;
  }
  ASSERT_EQ(s.sequence_gaps, model.gaps) << "seed " << seed << " step " << step;
  ASSERT_EQ(s.duplicate_batches, model.duplicates) << "seed " << seed << " step " << step;
  ASSERT_EQ(s.stores_withheld, model.stores_withheld) << "seed " << seed << " step " << step;
  ASSERT_EQ(s.tenant_clears, model.tenant_clears) << "seed " << seed << " step " << step;
  if (exact) {
    ASSERT_EQ(s.medium_removals_kept, model.medium_removals_kept) << "seed " << seed << " step " << step;
    ASSERT_EQ(s.keys, model.keys.size()) << "seed " << seed << " step " << step;
  }
}

// Odd seeds run on tables split into parts from their first store on
// (split_table.h), even seeds on tables that stay whole.
size_t SplitBytesFor(uint64_t seed) { return seed % 2 == 1 ? 1 : 0; }

void RunStream(uint64_t seed, int steps, uint64_t max_entries, Residency residency) {
  Index index(IndexOptions{.max_entries = max_entries, .residency = residency, .split_table_bytes = SplitBytesFor(seed)});
  const bool exact = max_entries >= 1000;
  Model model;
  model.residency = residency;
  Stream stream(seed);
  for (int step = 0; step < steps; ++step) {
    if (stream.Chance(2)) {
      index.Clear();
      model.Clear();
    } else {
      const uint64_t s = stream.NextSequence(model);
      const std::vector<Event> batch = stream.NextBatch();
      // Half the batches under the production format's rules.
      const bool production = stream.Chance(50);
      index.ApplyBatch(s, batch, production ? SequenceRules::kMooncakeProduction : SequenceRules::kPlain);
      model.ApplyBatch(s, batch, production);
    }
    CheckAgainstModel(index, model, exact, seed, step);
    // The store against its own invariants (Index::Inconsistency), every step.
    ASSERT_EQ(index.Inconsistency(), "") << "seed " << seed << " step " << step;
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// How many seeds to run: 200 by default (x 2500 steps = 500,000 batches,
// each followed by a full comparison and the store's consistency walk; the
// page-level test adds another million operations over SeedCount() / 8
// seeds); sanitizer runs, ten times slower, set SCI_MODEL_TEST_SEEDS lower.
uint64_t SeedCount() {
  const char* env = std::getenv("SCI_MODEL_TEST_SEEDS");
  return env != nullptr && std::atoi(env) > 0 ? static_cast<uint64_t>(std::atoi(env)) : 200;
}

// Every test below runs under both residency rules.
class IndexModel : public ::testing::TestWithParam<Residency> {};

std::string RuleName(const ::testing::TestParamInfo<Residency>& info) {
  return info.param == Residency::kPerMedium ? "PerMedium" : "Object";
}

// The model clears a tenant's keys alone; the index clears every key whose
// tenant shares the cleared one's 8-bit tag (a miss, never a false hit).
// The tenants here have distinct tags, so the two agree exactly.
TEST(IndexModelTenants, TheStreamsTenantsHaveDistinctTags) {
  std::set<uint32_t> tags;
  for (const char* tenant : {"default", "tenant-a", "tenant-b"}) tags.insert(TenantTag(TenantSeed(tenant)));
  EXPECT_EQ(tags.size(), 3u);
}

TEST_P(IndexModel, AgreesWithTheReferenceModelOnRandomStreams) {
  const uint64_t seeds = SeedCount();
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    RunStream(seed, 2500, IndexOptions::kDefaultMaxEntries, GetParam());
    if (HasFatalFailure()) return;
  }
}

TEST_P(IndexModel, NeverAFalseHitWhenCapacityRefusesEntries) {
  for (uint64_t seed = 1001; seed <= 1040; ++seed) {
    RunStream(seed, 2500, 5, GetParam());
    if (HasFatalFailure()) return;
  }
}

// ============================================================ page level ==

constexpr uint32_t kPageSize = 4;

// The layouts of the page-level streams. Chosen so they overlap: tp2's keys
// include tp1's under the same group ids (a verification by one must not
// serve the other), "mla-tag" names its groups with a tag, "pools" has a
// trailing pool (a page needs more keys near the end of a request), a key
// prefix and its own tenant.
std::vector<LayoutSpec> PageLayoutSpecs() {
  std::vector<LayoutSpec> specs(4);
  specs[0].page_size = kPageSize;
  specs[0].tp_size = 1;
  specs[1].page_size = kPageSize;
  specs[1].tp_size = 2;
  specs[2].page_size = kPageSize;
  specs[2].is_mla_model = true;
  specs[2].extra_backend_tag = "t";
  specs[3].page_size = kPageSize;
  specs[3].key_prefix = "p";
  specs[3].tenant_id = "tenant-a";
  specs[3].pools = {PoolSpec{{"__k", "__v"}, HitPolicy::kAllPages, 0},
                    PoolSpec{{"__swa"}, HitPolicy::kTrailingPages, 2}};
  return specs;
}

std::unique_ptr<const Layout> MakeLayout(const LayoutSpec& spec) {
  std::string error;
  std::unique_ptr<const Layout> layout = Layout::Create(spec, &error);
  if (layout == nullptr) ADD_FAILURE() << error;
  return layout;
}

// Requests sharing prefixes: R2 is a prefix of R0 (same hashes, but its last
// pages sit nearer the end, so trailing pools need more of their keys), R1
// shares R0's first three pages.
std::vector<std::vector<uint32_t>> PageRequests() {
  std::vector<uint32_t> r0(24), r1(24), r2(16);
  for (uint32_t i = 0; i < 24; ++i) r0[i] = i + 1;
  for (uint32_t i = 0; i < 24; ++i) r1[i] = i < 12 ? i + 1 : 1000 + i;
  for (uint32_t i = 0; i < 16; ++i) r2[i] = i + 1;
  return {r0, r1, r2};
}

// Every key any (layout, request, page) needs, numbered, with the group id a
// well-behaved publisher labels it with.
struct PageKey {
  std::string tenant;  // as the model writes it ("default" for empty)
  std::string key;
  std::string group;
};

// The pages of one request under one layout: their hashes and, per page,
// the ids of the keys it needs.
struct LayoutPages {
  std::vector<std::string> hashes;
  std::vector<std::vector<size_t>> key_ids;
};

class PageUniverse {
 public:
  PageUniverse() : specs_(PageLayoutSpecs()), requests_(PageRequests()) {
    for (const std::vector<uint32_t>& tokens : requests_) hashes_.push_back(PageHashesHex(tokens, kPageSize, false));
    pages_.resize(specs_.size());
    for (size_t l = 0; l < specs_.size(); ++l) {
      const std::unique_ptr<const Layout> layout = MakeLayout(specs_[l]);
      const std::string tenant = Model::Tenant(specs_[l].tenant_id);
      for (size_t r = 0; r < requests_.size(); ++r) {
        LayoutPages& pages = pages_[l].emplace_back();
        pages.hashes = hashes_[r];
        const size_t n = hashes_[r].size();
        for (size_t page = 0; page < n; ++page) {
          std::vector<size_t>& ids = pages.key_ids.emplace_back();
          for (const std::string& key : layout->KeysFor(hashes_[r][page], page, n)) {
            ids.push_back(Intern(tenant, key, layout->GroupId(hashes_[r][page])));
          }
        }
      }
    }
  }

  const std::vector<LayoutSpec>& specs() const { return specs_; }
  const std::vector<std::vector<uint32_t>>& requests() const { return requests_; }
  const std::vector<PageKey>& keys() const { return keys_; }
  const LayoutPages& Pages(size_t layout, size_t request) const { return pages_[layout][request]; }

 private:
  size_t Intern(const std::string& tenant, const std::string& key, const std::string& group) {
    auto [it, inserted] = ids_.try_emplace({tenant, key}, keys_.size());
    if (inserted) keys_.push_back(PageKey{tenant, key, group});
    return it->second;
  }

  std::vector<LayoutSpec> specs_;
  std::vector<std::vector<uint32_t>> requests_;
  std::vector<std::vector<std::string>> hashes_;
  std::vector<std::vector<LayoutPages>> pages_;  // [layout][request]
  std::vector<PageKey> keys_;
  std::map<std::pair<std::string, std::string>, size_t> ids_;
};

const PageUniverse& Universe() {
  static const PageUniverse* const universe = new PageUniverse;
  return *universe;
}

// One batch of the page-level stream. Its events point into the universe's
// strings (or at literals), which outlive it.
struct PageBatch {
  uint64_t sequence = 0;
  std::vector<Event> events;
  bool encodable = true;  // only stored / removed events with a key and `cleared` (the production format)
};

class PageStream {
 public:
  explicit PageStream(uint64_t seed) : rng_(seed) {}

  int Pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  size_t PickIndex(size_t n) { return static_cast<size_t>(rng_() % n); }
  bool Chance(int percent) { return Pick(100) < percent; }

  uint64_t NextSequence(const Model& m) {
    if (!m.has_sequence) return static_cast<uint64_t>(Pick(50));
    const int r = Pick(100);
    if (r < 85) return m.last_sequence + 1;
    if (r < 91) return m.last_sequence;
    if (r < 96) return m.last_sequence + 2 + static_cast<uint64_t>(Pick(3));
    return static_cast<uint64_t>(Pick(3));
  }

  // Stores lean ahead of removals so that pages fill up and hits happen.
  PageBatch NextBatch(const Model& m) {
    const std::vector<PageKey>& keys = Universe().keys();
    PageBatch batch;
    batch.sequence = NextSequence(m);
    const int n = 1 + Pick(6);
    for (int i = 0; i < n; ++i) {
      const PageKey& k = keys[PickIndex(keys.size())];
      const PageKey& other = keys[PickIndex(keys.size())];
      Event e;
      const int r = Pick(1000);
      e.kind = r < 620   ? EventKind::kStored
               : r < 978 ? EventKind::kRemoved
               : r < 985 ? EventKind::kAllCleared
               : r < 992 ? EventKind::kTenantCleared
                         : EventKind::kIgnored;
      if (e.kind == EventKind::kTenantCleared) {  // the production `cleared`: encodable
        e.tenant_id = k.tenant;
        batch.events.push_back(e);
        continue;
      }
      if (e.kind == EventKind::kAllCleared || e.kind == EventKind::kIgnored) {
        batch.encodable = false;
        batch.events.push_back(e);
        continue;
      }
      e.object_key = k.key;
      e.tenant_id = k.tenant;
      e.medium = PickMedium(*this);
      // Labels: mostly the key's own page group; removals often none; now
      // and then the group of some other page (a publisher bug), and a
      // label that names no page at all.
      const int label = Pick(100);
      if (e.kind == EventKind::kStored) {
        e.group_id = label < 85 ? std::string_view(k.group) : label < 95 ? std::string_view() : other.group;
      } else {
        e.group_id = label < 45   ? std::string_view(k.group)
                     : label < 88 ? std::string_view()
                     : label < 96 ? std::string_view(other.group)
                                  : std::string_view("g0");
      }
      batch.events.push_back(e);
    }
    return batch;
  }

 private:
  std::mt19937_64 rng_;
};

// The batch in the production wire format: [empty topic, sequence, payload].
struct EncodedMessage {
  std::string topic;
  std::array<uint8_t, 8> sequence{};
  std::string payload;
  std::vector<std::span<const uint8_t>> frames;

  static std::span<const uint8_t> Bytes(const std::string& s) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  }
};

void Encode(const PageBatch& batch, EncodedMessage* m) {
  std::vector<MooncakeEvent> events;
  for (const Event& e : batch.events) {
    MooncakeEvent out;
    out.stored = e.kind == EventKind::kStored;
    out.cleared = e.kind == EventKind::kTenantCleared;
    out.object_key = e.object_key;
    out.group_id = e.group_id;
    out.tenant_id = e.tenant_id;
    out.medium = e.medium;
    // The per-medium events of the model are the second generation's (a
    // first-generation removal drops its whole key: residency_generation_test).
    out.second_generation = true;
    events.push_back(out);
  }
  m->sequence = EncodeSequence(batch.sequence);
  EncodeMooncakePayload(1700000000000, events, &m->payload);
}

// A production message whose one event has a type the decoder does not
// know and names no key: the index must read it as a clear of its tenant
// (index-semantics.md: a miss is the only safe reading).
void EncodeUnknownKeyless(uint64_t sequence, std::string_view tenant, EncodedMessage* m) {
  struct Sink {
    std::string* out;
    void write(const char* data, size_t size) { out->append(data, size); }
  };
  Sink sink{&m->payload};
  msgpack::packer<Sink> packer(sink);
  const auto str = [&](std::string_view s) {
    packer.pack_str(static_cast<uint32_t>(s.size()));
    packer.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
  };
  packer.pack_array(3);
  packer.pack_uint64(1700000000000);
  packer.pack_array(1);
  packer.pack_map(3);
  str("event_type"), str("compacted");
  str("type"), str("TierCompacted");
  str("tenant_id"), str(tenant);
  packer.pack_uint64(0);
  m->sequence = EncodeSequence(sequence);
  m->frames = {EncodedMessage::Bytes(m->topic), m->sequence, EncodedMessage::Bytes(m->payload)};
}

// One way or another, not a message any decoder may accept.
void Corrupt(PageStream& stream, EncodedMessage* m) {
  m->frames.clear();
  const std::span<const uint8_t> topic = EncodedMessage::Bytes(m->topic);
  const std::span<const uint8_t> payload = EncodedMessage::Bytes(m->payload);
  switch (stream.Pick(5)) {
    case 0:  // a strict prefix of a msgpack value is never a whole one
      m->frames = {topic, m->sequence, payload.first(stream.PickIndex(payload.size()))};
      break;
    case 1: m->frames = {topic, m->sequence}; break;
    case 2: m->frames = {topic, std::span<const uint8_t>(m->sequence).first(7), payload}; break;
    case 3: m->frames = {topic, m->sequence, payload, payload}; break;
    default: {
      static constexpr uint8_t kEmptyMap[] = {0x80};  // a map where the payload array belongs
      m->frames = {topic, m->sequence, kEmptyMap};
      break;
    }
  }
}

struct PageRunStats {
  uint64_t batches = 0;
  uint64_t messages = 0;
  uint64_t malformed = 0;
  uint64_t queries = 0;
  uint64_t page_hits = 0;
  uint64_t layout_changes = 0;
  uint64_t snapshot_loads = 0;
  uint64_t unknown_keyless = 0;
  uint64_t tier_pages = 0;       // present pages a tier query answered
  uint64_t tier_pages_fast = 0;  // ... at tier 0
  uint64_t operations() const {
    return batches + messages + malformed + unknown_keyless + queries + layout_changes + snapshot_loads;
  }
};

// Asks `layout` (built from spec `spec`) about one request and compares every
// page with the model.
void QueryAndCompare(Index& index, const Layout& layout, size_t spec, size_t request, bool by_tokens,
                     Model& model, bool exact, const std::string& where, PageRunStats& run) {
  const PageUniverse& u = Universe();
  const LayoutPages& pages = u.Pages(spec, request);
  std::vector<uint8_t> hits(pages.hashes.size());
  std::vector<uint8_t> tiers;
  PageQueryResult result;
  // Half the queries by tokens ask for tiers (the same pages, read the same way).
  const bool by_tiers = by_tokens && (request + run.queries) % 2 == 0;
  if (by_tiers) {
    tiers.resize(pages.hashes.size());
    TierAnswer answer;
    result = CheckTiers(index, layout, u.requests()[request], kPageSize, tiers, &answer);
    for (size_t page = 0; page < tiers.size(); ++page) hits[page] = tiers[page] != MediumTiers::kAbsent ? 1 : 0;
    ASSERT_EQ(answer.n_tiers, 2) << where;
    ASSERT_EQ(answer.prefix_pages[1], result.prefix_hits) << where;
    ASSERT_LE(answer.prefix_pages[0], answer.prefix_pages[1]) << where;
    ASSERT_EQ(answer.pages_at[0] + answer.pages_at[1], result.total_hits) << where;
    // In tokens (1.4): SGLang loads whole pages, never the request's last token.
    const size_t n_tokens = u.requests()[request].size();
    const size_t loadable = n_tokens == 0 ? 0 : (n_tokens - 1) / kPageSize;
    for (size_t t = 0; t < 2; ++t) {
      ASSERT_EQ(answer.prefix_tokens[t], std::min(answer.prefix_pages[t], loadable) * kPageSize) << where;
    }
    ASSERT_EQ(answer.prefix_tokens[2], 0u) << where << ": a tier past n_tiers";
  } else if (by_tokens) {
    result = CheckPages(index, layout, u.requests()[request], kPageSize, hits);
  } else {
    result = CheckPageHashes(
        index, layout, pages.hashes.size(), [&](size_t page) -> std::string_view { return pages.hashes[page]; },
        hits);
  }
  ++run.queries;
  run.page_hits += result.total_hits;
  ASSERT_EQ(result.n_pages, pages.hashes.size()) << where;
  size_t model_run = 0;  // the model's leading run of present pages
  bool in_run = true;
  for (size_t page = 0; page < pages.hashes.size(); ++page) {
    bool in_model = !pages.key_ids[page].empty();
    for (size_t id : pages.key_ids[page]) {
      const PageKey& k = u.keys()[id];
      in_model = in_model && model.Has(k.tenant, k.key);
    }
    in_run = in_run && in_model;
    model_run += in_run ? 1 : 0;
    if (exact) {
      ASSERT_EQ(hits[page] == 1, in_model) << where << " layout " << spec << " request " << request << " page "
                                           << page << (by_tokens ? " (tokens)" : " (hashes)");
      if (by_tiers && in_model) {
        // The page's own tier: the slowest of the keys the layout needs
        // (one entry holds them all, with their media).
        uint8_t page_tier = 0;
        for (size_t id : pages.key_ids[page]) {
          page_tier = std::max(page_tier, model.KeyTier(u.keys()[id].tenant, u.keys()[id].key));
        }
        ASSERT_EQ(tiers[page], page_tier) << where << " page " << page;
        ++run.tier_pages;
        run.tier_pages_fast += tiers[page] == 0 ? 1 : 0;
      }
    } else {
      ASSERT_FALSE(hits[page] == 1 && !in_model)
          << where << " false hit: layout " << spec << " request " << request << " page " << page;
    }
  }
  // The usable prefix, in pages and in tokens (1.4: whole pages load).
  if (exact) {
    ASSERT_EQ(result.prefix_hits, model_run) << where;
  } else {
    ASSERT_LE(result.prefix_hits, model_run) << where << " a prefix longer than the model's";
  }
  // By hashes the request's length is not known: as if it ended with its last page.
  const size_t n_tokens = by_tokens ? u.requests()[request].size() : pages.hashes.size() * kPageSize;
  const size_t loadable = n_tokens == 0 ? 0 : (n_tokens - 1) / kPageSize;
  ASSERT_EQ(result.prefix_tokens, std::min(result.prefix_hits, loadable) * kPageSize) << where;
}

void CheckKeysAgainstModel(const Index& index, const Model& model, bool exact, const std::string& where) {
  for (const PageKey& k : Universe().keys()) {
    const bool in_index = index.Contains(k.tenant, k.key);
    const bool in_model = model.Has(k.tenant, k.key);
    if (exact) {
      ASSERT_EQ(in_index, in_model) << where << " key " << k.key << " tenant " << k.tenant;
    } else {
      ASSERT_FALSE(in_index && !in_model) << where << " key " << k.key << " present but not in the model";
    }
  }
  const Stats s = index.GetStats();
  ASSERT_EQ(s.has_sequence, model.has_sequence) << where;
  if (model.has_sequence) {
    ASSERT_EQ(s.last_sequence, model.last_sequence) << where;
  }
  ASSERT_EQ(s.sequence_gaps, model.gaps) << where;
  ASSERT_EQ(s.duplicate_batches, model.duplicates) << where;
  ASSERT_EQ(s.stores_withheld, model.stores_withheld) << where;
  ASSERT_EQ(s.tenant_clears, model.tenant_clears) << where;
  if (exact) {
    ASSERT_EQ(s.medium_removals_kept, model.medium_removals_kept) << where;
    ASSERT_EQ(s.keys, model.keys.size()) << where;
    uint64_t in_memory = 0;
    for (const auto& [key, group] : model.keys) in_memory += model.KeyTier(key.first, key.second) == 0 ? 1 : 0;
    ASSERT_EQ(s.keys_tier0, in_memory) << where;
    ASSERT_EQ(s.keys_tier1, model.keys.size() - in_memory) << where;
    ASSERT_EQ(s.keys_tier2 + s.keys_tier3, 0u) << where;
    // Page entries (the groups row since 1.4): one per present page and
    // slot bank, so at least one per (tenant, digest) the model's keys
    // carry, and never more than its keys.
    std::set<std::pair<uint64_t, PageDigest>> pages;
    for (const auto& [key, group] : model.keys) {
      const KeyShape shape = ShapeOf(key.second);
      if (shape.decomposes) pages.emplace(TenantSeed(key.first), shape.digest);
    }
    ASSERT_GE(s.groups, pages.size()) << where;
    ASSERT_LE(s.groups, model.keys.size()) << where;
    ASSERT_EQ(index.Inconsistency(), "") << where;
  }
}

// Two layout slots the queries use; a layout change rebuilds one from a
// random spec (maybe the same spec again: a config refresh).
struct ActiveLayouts {
  std::array<size_t, 2> spec{0, 1};
  std::array<std::unique_ptr<const Layout>, 2> layout;
};

// Loads, as a snapshot does (no group), the default-tenant keys of up to
// four pages of a random request, into the index and the model;
// `announce(id)` is called for each key before it is loaded.
template <typename Announce>
void LoadSnapshotPages(PageStream& stream, Index& index, Model& model, Announce announce) {
  const PageUniverse& u = Universe();
  const LayoutPages& pages = u.Pages(stream.PickIndex(u.specs().size()), stream.PickIndex(u.requests().size()));
  const size_t first = stream.PickIndex(pages.key_ids.size());
  std::vector<std::string_view> keys;
  for (size_t page = first; page < std::min(first + 4, pages.key_ids.size()); ++page) {
    for (size_t id : pages.key_ids[page]) {
      const PageKey& k = u.keys()[id];
      if (k.tenant != "default") continue;
      announce(id);
      keys.push_back(k.key);
      model.LoadKey(k.tenant, k.key);
    }
  }
  index.LoadKeys(keys);
}

void RunPageStream(uint64_t seed, int steps, uint64_t max_entries, Residency residency, PageRunStats& run) {
  Index index(SGLangIndexOptions(
      IndexOptions{.max_entries = max_entries, .residency = residency, .split_table_bytes = SplitBytesFor(seed)}));
  Model model;
  model.residency = residency;
  PageStream stream(seed);
  const PageUniverse& u = Universe();
  ActiveLayouts active;
  for (size_t slot = 0; slot < 2; ++slot) active.layout[slot] = MakeLayout(u.specs()[active.spec[slot]]);
  DecodedMessage scratch;
  for (int step = 0; step < steps; ++step) {
    const std::string where = "seed " + std::to_string(seed) + " step " + std::to_string(step);
    const int what = stream.Pick(100);
    if (what < 2) {
      index.Clear();
      model.Clear();
    } else if (what < 5) {
      const size_t slot = stream.PickIndex(2);
      active.spec[slot] = stream.PickIndex(u.specs().size());
      active.layout[slot] = MakeLayout(u.specs()[active.spec[slot]]);
      ++run.layout_changes;
    } else if (what < 7) {
      // A snapshot's pages (keys under no group).
      LoadSnapshotPages(stream, index, model, [](size_t) {});
      ++run.snapshot_loads;
    } else if (what < 12) {
      // A malformed message: counted, and nothing else changes.
      EncodedMessage m;
      PageBatch batch = stream.NextBatch(model);
      batch.events.erase(std::remove_if(batch.events.begin(), batch.events.end(),
                                        [](const Event& e) { return e.object_key.empty(); }),
                         batch.events.end());
      Encode(batch, &m);
      Corrupt(stream, &m);
      const uint64_t malformed = index.GetStats().malformed_messages;
      ASSERT_FALSE(ApplyMessage(index, m.frames, scratch, nullptr)) << where;
      ASSERT_EQ(index.GetStats().malformed_messages, malformed + 1) << where;
      ++run.malformed;
    } else if (what < 13) {
      // An event type nobody knows, naming no key: its tenant is cleared.
      const uint64_t sequence = stream.NextSequence(model);
      const std::string& tenant = u.keys()[stream.PickIndex(u.keys().size())].tenant;
      EncodedMessage m;
      EncodeUnknownKeyless(sequence, tenant, &m);
      ASSERT_TRUE(ApplyMessage(index, m.frames, scratch, nullptr)) << where;
      const Event cleared{EventKind::kTenantCleared, {}, {}, tenant, {}};
      model.ApplyBatch(sequence, std::vector<Event>{cleared}, /*production=*/true);
      ++run.unknown_keyless;
    } else {
      const PageBatch batch = stream.NextBatch(model);
      if (batch.encodable && stream.Chance(30)) {
        EncodedMessage m;
        Encode(batch, &m);
        m.frames = {EncodedMessage::Bytes(m.topic), m.sequence, EncodedMessage::Bytes(m.payload)};
        ASSERT_TRUE(ApplyMessage(index, m.frames, scratch, nullptr)) << where;
        model.ApplyBatch(batch.sequence, batch.events, /*production=*/true);
        ++run.messages;
      } else {
        index.ApplyBatch(batch.sequence, batch.events);
        model.ApplyBatch(batch.sequence, batch.events);
        ++run.batches;
      }
    }
    const bool exact = index.GetStats().capacity_refusals == 0;
    // Two queries per step, so a verification made by the first meets the
    // next step's events before the fast path answers again.
    for (int q = 0; q < 2; ++q) {
      const size_t slot = stream.PickIndex(2);
      QueryAndCompare(index, *active.layout[slot], active.spec[slot], stream.PickIndex(u.requests().size()),
                      stream.Chance(50), model, exact, where, run);
      if (::testing::Test::HasFatalFailure()) return;
    }
    CheckKeysAgainstModel(index, model, exact, where);
    if (::testing::Test::HasFatalFailure()) return;
  }
  EXPECT_EQ(index.GetStats().groups_adopted, 0u) << "nothing to adopt since 1.4";
}

TEST_P(IndexModel, PageQueriesAgreeWithTheModelUnderSeveralLayouts) {
  PageRunStats run;
  const uint64_t seeds = SeedCount() / 8 + 1;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    RunPageStream(seed, 13000, IndexOptions::kDefaultMaxEntries, GetParam(), run);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(run.page_hits, run.queries / 10) << "the stream should fill pages often enough to hit";
  EXPECT_GT(run.malformed, 0u);
  EXPECT_GT(run.unknown_keyless, 0u);
  EXPECT_GT(run.tier_pages, 0u) << "tier queries should find present pages";
  if (GetParam() == Residency::kPerMedium) {
    EXPECT_GT(run.tier_pages_fast, 0u) << "some present pages should be all on cpu";
    EXPECT_LT(run.tier_pages_fast, run.tier_pages) << "some present pages should have a key off cpu";
  } else {
    EXPECT_EQ(run.tier_pages_fast, 0u) << "the object rule keeps no media: every page at the slowest tier";
  }
  std::printf("tiers: %llu present pages answered, %llu at tier 0\n", static_cast<unsigned long long>(run.tier_pages),
              static_cast<unsigned long long>(run.tier_pages_fast));
  std::printf("page model: %llu operations (%llu batches, %llu messages, %llu malformed, %llu queries, "
              "%llu layout changes, %llu snapshot loads), %llu page hits\n",
              static_cast<unsigned long long>(run.operations()), static_cast<unsigned long long>(run.batches),
              static_cast<unsigned long long>(run.messages), static_cast<unsigned long long>(run.malformed),
              static_cast<unsigned long long>(run.queries), static_cast<unsigned long long>(run.layout_changes),
              static_cast<unsigned long long>(run.snapshot_loads), static_cast<unsigned long long>(run.page_hits));
}

TEST_P(IndexModel, PageQueriesNeverHitFalselyWhenCapacityRefusesEntries) {
  PageRunStats run;
  const uint64_t seeds = SeedCount() / 10 + 1;
  for (uint64_t seed = 2001; seed < 2001 + seeds; ++seed) {
    RunPageStream(seed, 2000, 12, GetParam(), run);
    if (HasFatalFailure()) return;
  }
}

// The fuzzer's first finding (tests/fuzz/regressions/apply_message_fuzzer/):
// a removal labelled with another page's group left the key's own page
// verified, and the fast path answered hit for a page missing a key.
TEST(IndexModelCases, RemovalLabelledWithAnotherPagesGroupEndsTheKeysPageVerification) {
  const std::unique_ptr<const Layout> layout = MakeLayout(PageLayoutSpecs()[0]);
  const std::vector<uint32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
  for (const std::string_view wrong_label : {std::string_view("other page"), std::string_view("g0")}) {
    Index index;
    std::vector<std::string> keys[2];
    std::string groups[2];
    std::vector<Event> stored;
    for (size_t page = 0; page < 2; ++page) {
      keys[page] = layout->KeysFor(hashes[page], page, 2);
      groups[page] = layout->GroupId(hashes[page]);
    }
    for (size_t page = 0; page < 2; ++page) {
      for (const std::string& key : keys[page]) stored.push_back(Event{EventKind::kStored, key, groups[page], {}, {}});
    }
    index.ApplyBatch(1, stored);
    std::vector<uint8_t> hits(2);
    ASSERT_EQ(CheckPages(index, *layout, tokens, kPageSize, hits).total_hits, 2u);
    ASSERT_EQ(CheckPages(index, *layout, tokens, kPageSize, hits).fast_path, 2u);

    const std::string_view label = wrong_label == "g0" ? wrong_label : std::string_view(groups[1]);
    const Event removal{EventKind::kRemoved, keys[0][1], label, {}, {}};
    index.ApplyBatch(2, std::span(&removal, 1));
    const PageQueryResult after = CheckPages(index, *layout, tokens, kPageSize, hits);
    EXPECT_EQ(hits[0], 0) << "label " << label;
    EXPECT_EQ(hits[1], 1) << "label " << label;  // its keys are all there
    EXPECT_EQ(after.total_hits, 1u) << "label " << label;
  }
}

// ============================================================ concurrent ==

// Per universe key, a counter that is odd while the key may be in the index:
// the writer makes it odd before applying a batch that stores the key, and
// even again only after a batch has been applied that leaves the key absent
// (announce before store, publish after remove). A key whose counter was
// even and unchanged across a whole query was absent for all of it.
class KeyWitness {
 public:
  explicit KeyWitness(size_t n) : counters_(n) {}

  void AnnounceStore(size_t id) {
    if (counters_[id].load(std::memory_order_relaxed) % 2 == 0) counters_[id].fetch_add(1, std::memory_order_seq_cst);
  }
  void PublishAbsent(size_t id) {
    if (counters_[id].load(std::memory_order_relaxed) % 2 == 1) counters_[id].fetch_add(1, std::memory_order_seq_cst);
  }
  uint64_t Read(size_t id) const { return counters_[id].load(std::memory_order_seq_cst); }

 private:
  std::vector<std::atomic<uint64_t>> counters_;
};

TEST_P(IndexModel, ConcurrentReadersNeverSeeAHitTheWriterHasNotStored) {
  const PageUniverse& u = Universe();
  std::map<std::pair<std::string, std::string>, size_t> id_of;
  for (size_t id = 0; id < u.keys().size(); ++id) id_of[{u.keys()[id].tenant, u.keys()[id].key}] = id;
  std::vector<std::unique_ptr<const Layout>> layouts;
  for (const LayoutSpec& spec : u.specs()) layouts.push_back(MakeLayout(spec));
  // A second handle of the first spec: layouts deriving the same keys share verifications.
  layouts.push_back(MakeLayout(u.specs()[0]));

  const uint64_t seeds = SeedCount() / 100 + 1;
  long total_queries = 0, total_hits = 0;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    Index index(SGLangIndexOptions(IndexOptions{.residency = GetParam(), .split_table_bytes = SplitBytesFor(seed)}));
    KeyWitness witness(u.keys().size());
    std::atomic<bool> done{false};
    std::atomic<long> violations{0}, queries{0}, hits_seen{0};
    std::vector<std::thread> readers;
    for (int r = 0; r < 2; ++r) {
      readers.emplace_back([&, r] {
        std::mt19937_64 rng(seed * 7919 + static_cast<uint64_t>(r));
        std::vector<uint8_t> hits;
        std::vector<uint64_t> before;
        while (!done.load(std::memory_order_acquire)) {
          const size_t l = rng() % layouts.size();
          const size_t spec = l < u.specs().size() ? l : 0;
          const size_t request = rng() % u.requests().size();
          const LayoutPages& pages = u.Pages(spec, request);
          before.clear();
          for (const auto& ids : pages.key_ids) {
            for (size_t id : ids) before.push_back(witness.Read(id));
          }
          hits.assign(pages.hashes.size(), 0);
          if (rng() % 2 == 0) {
            CheckPages(index, *layouts[l], u.requests()[request], kPageSize, hits);
          } else {
            CheckPageHashes(
                index, *layouts[l], pages.hashes.size(),
                [&](size_t page) -> std::string_view { return pages.hashes[page]; }, hits);
          }
          size_t at = 0;
          for (size_t page = 0; page < pages.hashes.size(); ++page) {
            bool possible = true;
            for (size_t id : pages.key_ids[page]) {
              const uint64_t b = before[at++];
              const uint64_t a = witness.Read(id);
              possible = possible && (b % 2 == 1 || a % 2 == 1 || a != b);
            }
            if (hits[page] == 1) {
              hits_seen.fetch_add(1, std::memory_order_relaxed);
              if (!possible) violations.fetch_add(1, std::memory_order_relaxed);
            }
          }
          queries.fetch_add(1, std::memory_order_release);
        }
      });
    }

    Model model;
    model.residency = GetParam();
    PageStream stream(seed + 5000);
    DecodedMessage scratch;
    long seen_queries = 0;
    for (int step = 0; step < 3000; ++step) {
      // Keep the readers in step with the writer (bounded wait on a condition).
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (queries.load(std::memory_order_acquire) <= seen_queries && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
      seen_queries = queries.load(std::memory_order_acquire);

      if (stream.Chance(2)) {
        index.Clear();
        model.Clear();
      } else if (stream.Chance(5)) {
        // A snapshot's pages (keys under no group), straight into page entries.
        LoadSnapshotPages(stream, index, model, [&witness](size_t id) { witness.AnnounceStore(id); });
      } else {
        const PageBatch batch = stream.NextBatch(model);
        for (const Event& e : batch.events) {
          if (e.kind == EventKind::kStored) witness.AnnounceStore(id_of.at({std::string(e.tenant_id), std::string(e.object_key)}));
        }
        if (batch.encodable && stream.Chance(30)) {
          EncodedMessage m;
          Encode(batch, &m);
          m.frames = {EncodedMessage::Bytes(m.topic), m.sequence, EncodedMessage::Bytes(m.payload)};
          ASSERT_TRUE(ApplyMessage(index, m.frames, scratch, nullptr));
          model.ApplyBatch(batch.sequence, batch.events, /*production=*/true);
        } else {
          index.ApplyBatch(batch.sequence, batch.events);
          model.ApplyBatch(batch.sequence, batch.events);
        }
      }
      for (size_t id = 0; id < u.keys().size(); ++id) {
        if (!model.Has(u.keys()[id].tenant, u.keys()[id].key)) witness.PublishAbsent(id);
      }
    }
    done.store(true, std::memory_order_release);
    for (std::thread& t : readers) t.join();
    ASSERT_EQ(violations.load(), 0) << "seed " << seed;
    EXPECT_GT(hits_seen.load(), 0) << "seed " << seed << ": the readers never overlapped a present page";
    total_queries += queries.load();
    total_hits += hits_seen.load();
  }
  std::printf("concurrent model: %llu seeds x 3000 steps, %ld reader queries, %ld page hits checked\n",
              static_cast<unsigned long long>(seeds), total_queries, total_hits);
}

INSTANTIATE_TEST_SUITE_P(BothRules, IndexModel, ::testing::Values(Residency::kObject, Residency::kPerMedium),
                         RuleName);

}  // namespace
}  // namespace sci
