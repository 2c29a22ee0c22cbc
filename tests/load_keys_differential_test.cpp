// Index::LoadKeys names keys sixteen ahead of their stores (I56). This
// checks it against the same keys loaded one call per key (each named just
// before its store, as before the name-ahead): every counter, the store's
// consistency, every key's presence in two tenants and the event-hash
// digests agree after the load, after a tenant clear and after removals.
// Random batches, in random chunks: repeats, new slots, slots past the
// 4,096 slot numbers, keys that do not decompose, uppercase digests,
// digest-ended keys (separator "@"), max_entries reached mid-batch, keys
// already stored in the default and another tenant, both residency rules.
// (From the outside review of the name-ahead, which found the second
// naming of keys past the last slot number wasteful.)
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "index/index.h"
#include "index/slot_names.h"

namespace sci {
namespace {

std::string Hex(std::mt19937_64& rng, bool upper = false) {
  static const char* lo = "0123456789abcdef";
  static const char* up = "0123456789ABCDEF";
  std::string s;
  for (int i = 0; i < 64; ++i) s += (upper ? up : lo)[rng() % 16];
  return s;
}

std::string Diff(const Stats& a, const Stats& b) {
  std::string out;
#define SCI_CMP(name, type, kind, keeper, help) \
  if (a.name != b.name) out += std::string(#name) + ": " + std::to_string(a.name) + " vs " + std::to_string(b.name) + "; ";
  SCI_STAT_LIST(SCI_CMP)
#undef SCI_CMP
  return out;
}

struct World {
  std::vector<std::string> digests;
  std::vector<std::pair<std::string, std::string>> slots;  // prefix, suffix
  std::vector<std::string> keys;                           // the universe
};

void Compare(const Index& test, const Index& ref, const World& w, const std::string& where) {
  ASSERT_EQ(test.Inconsistency(), "") << where;
  ASSERT_EQ(ref.Inconsistency(), "") << where;
  ASSERT_EQ(Diff(test.GetStats(), ref.GetStats()), "") << where;
  for (const std::string& k : w.keys) {
    for (std::string_view t : {std::string_view(), std::string_view("t")}) {
      ASSERT_EQ(test.Contains(t, k), ref.Contains(t, k)) << where << " key " << k << " tenant " << t;
    }
  }
  for (const std::string& d : w.digests) {
    EventHashDigests::Digest dig;
    EventHashDigests::DigestOfKey("@" + d, "@", &dig);
    const uint64_t h = EventHashDigests::EventHashOf(dig);
    std::array<uint8_t, 32> a{}, b{};
    const bool fa = test.DigestOfEventHash(h, &a), fb = ref.DigestOfEventHash(h, &b);
    ASSERT_EQ(fa, fb) << where << " digest " << d;
    if (fa) ASSERT_EQ(a, b) << where;
  }
}

TEST(LoadKeys, NamedAheadAgreesWithNamedJustBeforeTheStore) {
  // SCI_LOAD_KEYS_SEEDS=400 for a longer run (the review's: 37 s).
  const char* env = std::getenv("SCI_LOAD_KEYS_SEEDS");
  const int seeds = env != nullptr ? std::atoi(env) : 60;
  for (int seed = 0; seed < seeds; ++seed) {
    std::mt19937_64 rng(seed);
    World w;
    for (int i = 0; i < 6; ++i) w.digests.push_back(Hex(rng));
    const int prefill_choices[] = {0, 0, 4085, 4094, 4096};
    const int prefill = prefill_choices[rng() % 5];
    // Slots the batch uses: a few known, a few new.
    w.slots = {{"", "_0_k"}, {"", "_1_v"}, {"x_", ""}, {"m@", ""}, {"q", "@"}};
    for (int i = 0; i < 12; ++i) w.slots.push_back({"n" + std::to_string(i) + "_", "_s"});
    for (const auto& d : w.digests) {
      for (const auto& [p, s] : w.slots) w.keys.push_back(p + d + s);
      w.keys.push_back("plain_" + d.substr(0, 8));
      w.keys.push_back("u_" + Hex(rng, true));
      w.keys.push_back("z@" + d);  // digest-ended, prefix "z@" (decomposes)
    }
    IndexOptions o;
    o.digest_key_separator = "@";
    o.residency = rng() % 2 ? Residency::kPerMedium : Residency::kObject;
    const uint64_t caps[] = {IndexOptions::kDefaultMaxEntries, 5, 20, 40};
    o.max_entries = caps[rng() % 4];
    Index test(o), ref(o);
    // Numbers taken by slots no key of the batch uses; keys removed again.
    std::string filler = Hex(rng);
    std::vector<std::string> fk;
    for (int j = 0; j < prefill; ++j) fk.push_back("f" + std::to_string(j) + "_" + filler);
    for (Index* ix : {&test, &ref}) {
      uint64_t seq = 1;
      for (size_t j = 0; j < fk.size(); j += 1) {
        std::vector<Event> ev = {Event{EventKind::kStored, fk[j], {}, {}, "cpu"},
                                 Event{EventKind::kRemoved, fk[j], {}, {}, "cpu"}};
        ix->ApplyBatch(seq++, ev);
      }
    }
    // Some prior state (same on both): a few universe keys stored in either tenant.
    {
      std::mt19937_64 r2(seed * 7 + 1);
      std::vector<Event> ev;
      for (int i = 0; i < 6; ++i) {
        const std::string& k = w.keys[r2() % w.keys.size()];
        ev.push_back(Event{EventKind::kStored, k, {}, (r2() % 2) ? std::string_view("t") : std::string_view(),
                           (r2() % 2) ? "cpu" : "disk"});
      }
      test.ApplyBatch(100000, ev);
      ref.ApplyBatch(100000, ev);
    }
    // The batch: draws from a small window of the universe (many repeats).
    const size_t n = 1 + rng() % 120;
    std::vector<std::string_view> batch;
    for (size_t i = 0; i < n; ++i) batch.push_back(w.keys[rng() % w.keys.size()]);
    // Test: in random chunks (4,096 a call in production; here smaller).
    for (size_t i = 0; i < batch.size();) {
      const size_t len = std::min<size_t>(batch.size() - i, 1 + rng() % 80);
      test.LoadKeys(std::span(batch).subspan(i, len));
      i += len;
    }
    for (const auto& k : batch) ref.LoadKeys(std::span(&k, 1));
    const std::string where = "seed " + std::to_string(seed) + " prefill " + std::to_string(prefill) +
                              " cap " + std::to_string(o.max_entries);
    Compare(test, ref, w, where + " after load");
    if (HasFatalFailure()) return;
    // A default-tenant clear (tenant records), then every key removed.
    for (Index* ix : {&test, &ref}) {
      std::vector<Event> ev = {Event{EventKind::kTenantCleared, {}, {}, {}, {}}};
      ix->ApplyBatch(100001, ev);
    }
    Compare(test, ref, w, where + " after tenant clear");
    if (HasFatalFailure()) return;
    for (Index* ix : {&test, &ref}) {
      std::vector<Event> ev;
      for (const auto& k : w.keys) ev.push_back(Event{EventKind::kRemoved, k, {}, "t", ""});
      ix->ApplyBatch(100002, ev);
    }
    Compare(test, ref, w, where + " after removals");
    if (HasFatalFailure()) return;
    ASSERT_EQ(test.GetStats().keys, 0u) << where;
  }
}

}  // namespace
}  // namespace sci
