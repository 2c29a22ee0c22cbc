// Model-based randomized test of the index: a tiny reference model written
// for clarity (plain sets, the rules of index-semantics.md line by line) and
// random streams of batches with gaps, duplicates, restarts, stored/removed
// with and without groups, several tenants and all-cleared events. After
// every step the index must agree with the model, and no verified group may
// lack a key the model does not have.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "index.h"

namespace sci {
namespace {

// ---- the reference model ----

struct Model {
  std::set<std::pair<std::string, std::string>> keys;  // (tenant, key)
  std::set<std::pair<std::string, std::string>> groups;
  bool has_sequence = false;
  uint64_t last_sequence = 0;
  uint64_t gaps = 0, duplicates = 0;

  static std::string Tenant(std::string_view t) { return t.empty() ? "default" : std::string(t); }

  void Clear() {
    keys.clear();
    groups.clear();
    has_sequence = false;
  }

  void ApplyBatch(uint64_t s, const std::vector<Event>& events) {
    if (has_sequence && s == last_sequence) {
      ++duplicates;
      return;
    }
    if (has_sequence && s != last_sequence + 1) {
      ++gaps;
      Clear();
    }
    for (const Event& e : events) {
      if (e.kind == EventKind::kAllCleared) {
        Clear();
        continue;
      }
      if (e.kind != EventKind::kStored && e.kind != EventKind::kRemoved) continue;
      if (e.object_key.empty()) continue;
      const std::string t = Tenant(e.tenant_id);
      if (e.kind == EventKind::kStored) {
        keys.emplace(t, std::string(e.object_key));
        if (!e.group_id.empty()) groups.emplace(t, std::string(e.group_id));
      } else {
        keys.erase({t, std::string(e.object_key)});
        if (!e.group_id.empty()) groups.erase({t, std::string(e.group_id)});
      }
    }
    has_sequence = true;
    last_sequence = s;
  }

  bool Has(std::string_view tenant, std::string_view key) const {
    return keys.count({Tenant(tenant), std::string(key)}) > 0;
  }
};

// ---- the random stream ----

constexpr int kGroups = 6;
constexpr int kKeysPerGroup = 3;
const std::vector<std::string> kTenants = {"", "default", "tenant-a", "tenant-b"};

std::string GroupName(int g) { return "sglang-hicache:g" + std::to_string(g); }
std::string KeyName(int g, int k) { return "g" + std::to_string(g) + "_" + std::to_string(k) + "_k"; }

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
      e.kind = r < 55 ? EventKind::kStored : r < 95 ? EventKind::kRemoved : r < 97 ? EventKind::kAllCleared
                                                                                    : EventKind::kIgnored;
      const int g = Pick(kGroups);
      strings.push_back(KeyName(g, Pick(kKeysPerGroup)));
      e.object_key = Chance(3) ? std::string_view() : std::string_view(strings.back());
      strings.push_back(GroupName(g));
      // Stored events normally carry their group; removals often do not.
      const bool labelled = e.kind == EventKind::kStored ? !Chance(10) : Chance(50);
      if (labelled) e.group_id = strings.back();
      e.tenant_id = kTenants[static_cast<size_t>(Pick(static_cast<int>(kTenants.size())))];
      e.medium = Chance(50) ? "cpu" : "disk";
      events.push_back(e);
    }
    return events;
  }
};

// What a page query does for one group: probe, check its keys, mark.
void TryVerify(Index& index, int g, std::string_view tenant, LayoutId layout) {
  const uint64_t seed = TenantSeed(tenant);
  const Fingerprint group = FingerprintOf(seed, GroupName(g));
  const GroupProbe probe = index.ProbeGroup(group, layout);
  if (probe.verified || !probe.exists) return;
  for (int k = 0; k < kKeysPerGroup; ++k) {
    if (!index.ContainsKey(FingerprintOf(seed, KeyName(g, k)))) return;
  }
  index.MarkVerified(group, probe, layout);
}

void CheckAgainstModel(const Index& index, const Model& model, bool exact, uint64_t seed, int step) {
  for (const std::string& tenant : kTenants) {
    for (int g = 0; g < kGroups; ++g) {
      bool all_present = true;
      for (int k = 0; k < kKeysPerGroup; ++k) {
        const bool in_model = model.Has(tenant, KeyName(g, k));
        const bool in_index = index.Contains(tenant, KeyName(g, k));
        all_present = all_present && in_model;
        if (exact) {
          ASSERT_EQ(in_index, in_model) << "seed " << seed << " step " << step << " key " << KeyName(g, k)
                                        << " tenant '" << tenant << "'";
        } else {
          ASSERT_FALSE(in_index && !in_model) << "seed " << seed << " step " << step << " false key hit";
        }
      }
      // The fast path may answer only for a group whose keys are all there.
      const Fingerprint group = FingerprintOf(TenantSeed(tenant), GroupName(g));
      for (LayoutId layout : {LayoutId{1}, LayoutId{2}}) {
        if (index.ProbeGroup(group, layout).verified) {
          ASSERT_TRUE(all_present) << "seed " << seed << " step " << step << " group " << g << " tenant '"
                                   << tenant << "' verified with a key missing";
        }
      }
    }
  }
  const Stats s = index.GetStats();
  ASSERT_EQ(s.has_sequence, model.has_sequence) << "seed " << seed << " step " << step;
  if (model.has_sequence) ASSERT_EQ(s.last_sequence, model.last_sequence) << "seed " << seed;
  ASSERT_EQ(s.sequence_gaps, model.gaps) << "seed " << seed << " step " << step;
  ASSERT_EQ(s.duplicate_batches, model.duplicates) << "seed " << seed << " step " << step;
  if (exact) {
    ASSERT_EQ(s.keys, model.keys.size()) << "seed " << seed << " step " << step;
    ASSERT_EQ(s.groups, model.groups.size()) << "seed " << seed << " step " << step;
  }
}

void RunStream(uint64_t seed, int steps, uint64_t max_entries) {
  Index index(IndexOptions{.max_entries = max_entries});
  const bool exact = max_entries >= 1000;
  Model model;
  Stream stream(seed);
  for (int step = 0; step < steps; ++step) {
    if (stream.Chance(2)) {
      index.Clear();
      model.Clear();
    } else {
      const uint64_t s = stream.NextSequence(model);
      const std::vector<Event> batch = stream.NextBatch();
      index.ApplyBatch(s, batch);
      model.ApplyBatch(s, batch);
    }
    // Queries under two layouts, so verifications made by one are offered to the other.
    for (int q = 0; q < 3; ++q) {
      TryVerify(index, stream.Pick(kGroups), kTenants[static_cast<size_t>(stream.Pick(4))],
                static_cast<LayoutId>(1 + stream.Pick(2)));
    }
    CheckAgainstModel(index, model, exact, seed, step);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// How many seeds to run: 400 by default (x 2500 steps = 1,000,000 batches,
// each followed by three verification attempts and a full comparison);
// sanitizer runs, ten times slower, set SCI_MODEL_TEST_SEEDS lower.
uint64_t SeedCount() {
  const char* env = std::getenv("SCI_MODEL_TEST_SEEDS");
  return env != nullptr && std::atoi(env) > 0 ? static_cast<uint64_t>(std::atoi(env)) : 400;
}

TEST(IndexModel, AgreesWithTheReferenceModelOnRandomStreams) {
  const uint64_t seeds = SeedCount();
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    RunStream(seed, 2500, IndexOptions::kDefaultMaxEntries);
    if (HasFatalFailure()) return;
  }
}

TEST(IndexModel, NeverAFalseHitWhenCapacityRefusesEntries) {
  for (uint64_t seed = 1001; seed <= 1040; ++seed) {
    RunStream(seed, 2500, 5);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace sci
