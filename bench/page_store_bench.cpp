// The page store (src/index/page_store.h; issue 43's first slice), measured
// against what 1.3 keeps: one fingerprint per object.
//
//   page_store/memory/<tp>/objects:<n>   RSS delta per object of an
//       ObjectStore holding n objects of SGLang pages (tp8: 16 objects a
//       page; tp1: 2), and the peak during its growth (VmHWM), as
//       memory_bench measures the index.
//   page_store/memory/index/tp8/objects:<n>   the same objects applied to
//       1.3's Index (keys, their groups, the page summary), same run.
//   page_store/lookup/tp8/pages:1m/{page_entry,per_object}   whether each of
//       a stream of random pages (not the last one's neighbours: a router's
//       fresh prompts over a pool of 1M pages, 16M objects) is whole: one
//       page entry against the page's 16 objects in a per-object table of
//       the same keys. Fingerprints are made beforehand (the query's hashing
//       is the same work either way: one per page against a page's head and
//       16 combined parts); eight pages are prefetched, then read, as the
//       page query does. The ratio is the target's.
//   page_store/store/tp8/objects:10m/{page_store,per_object}   objects
//       stored a second, into the store and into a per-object table.
//   page_store/absent/pages:1m/load:0.75/{fresh,churn:10x/renewed,churn:10x/never_renewed}
//       lookups of pages nobody stored in a page table of 1M entries,
//       fresh, and after ten times its size of erase-then-insert pairs,
//       renewed when worn (as the index does) or never (I57).
//   page_store/tenant_clear/tp8/objects:10m/kept:1pct/then_one_store
//       a tenant holding 99% of 10M objects cleared, then one store: the
//       table shrinks at that store's renewal (I57); its memory before and
//       after, and what the store took.
//   page_store/contains/tp8/objects:{1m,100m}   ObjectStore::Contains of
//       random present keys (a whole call: shape, slot, page key, lookup).
//   page_store/floor:random_line/{overlapped,dependent}/tp8/objects:{1m,100m}
//       the machine's floor under it: random lines read in the same loop
//       from a buffer the size of that store's tables (random_line_floor.h),
//       no index; each read free to overlap the next, or waiting for it. The
//       ratio of the two floors is what the machine charges a random
//       lookup for the larger table (bench/README.md, "Page store").
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench_support.h"
#include "random_line_floor.h"
#include "index/fingerprint_table.h"
#include "index/key_entry.h"
#include "index/object_store.h"
#include "index/split_table.h"
#include "query_fixture.h"
#include "sglang/layout.h"

namespace sci::bench {
namespace {

std::string ObjectKey(const std::string& hash, uint64_t slot) {
  return hash + "_" + std::to_string(slot / 2) + (slot % 2 == 0 ? "_k" : "_v");
}

void BM_ObjectStoreMemory(benchmark::State& state, uint64_t objects_per_page, uint64_t n) {
  Resident r;
  double allocated = 0;
  for (auto _ : state) {
    r = MeasureResident(
        n,
        [&] {
          auto store = std::make_unique<ObjectStore>();
          const uint64_t seed = TenantSeed("");
          for (uint64_t page = 0; page < n / objects_per_page; ++page) {
            const std::string hash = ForeignPageHash(page, 7);
            for (uint64_t slot = 0; slot < objects_per_page; ++slot) store->Store(seed, ObjectKey(hash, slot), 0);
          }
          return store;
        },
        [&](const ObjectStore& store) {
          if (store.objects() != n / objects_per_page * objects_per_page) state.SkipWithError("objects missing");
          allocated = static_cast<double>(store.allocated_bytes()) / static_cast<double>(n);
        });
  }
  state.counters["bytes_per_object"] = r.bytes_per_item;
  state.counters["peak_bytes_per_object"] = r.peak_bytes_per_item;
  state.counters["table_bytes_per_object"] = allocated;
  state.counters["objects"] = static_cast<double>(n);
}

void BM_IndexMemory(benchmark::State& state, uint64_t n) {
  Resident r;
  for (auto _ : state) {
    r = MeasureResident(
        n,
        [&] {
          auto index = std::make_unique<Index>(SGLangIndexOptions(IndexOptions{.max_entries = 2 * n + 1}));
          uint64_t sequence = 1;
          ApplyForeignPages(*index, 0, n, /*stored=*/true, /*salt=*/7, &sequence);
          return index;
        },
        [&](const Index& index) {
          if (index.GetStats().keys != n) state.SkipWithError("the index does not hold every key");
        });
  }
  state.counters["bytes_per_object"] = r.bytes_per_item;
  state.counters["peak_bytes_per_object"] = r.peak_bytes_per_item;
  state.counters["objects"] = static_cast<double>(n);
}

#define MEMORY(name, per_page, n)                                                   \
  BENCHMARK_CAPTURE(BM_ObjectStoreMemory, name, per_page, n)                      \
      ->Name("page_store/memory/" #name)->Iterations(1)->Unit(benchmark::kMillisecond)
MEMORY(tp8/objects:10k, 16, 10'000);
MEMORY(tp8/objects:10m, 16, 10'000'000);
MEMORY(tp8/objects:30m, 16, 30'000'000);
MEMORY(tp8/objects:100m, 16, 100'000'000);
MEMORY(tp1/objects:10m, 2, 10'000'000);
MEMORY(tp1/objects:30m, 2, 30'000'000);
BENCHMARK_CAPTURE(BM_IndexMemory, tp8_10k, 10'000)
    ->Name("page_store/memory/index/tp8/objects:10k")->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_IndexMemory, tp8_10m, 10'000'000)
    ->Name("page_store/memory/index/tp8/objects:10m")->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_IndexMemory, tp8_30m, 30'000'000)
    ->Name("page_store/memory/index/tp8/objects:30m")->Iterations(1)->Unit(benchmark::kMillisecond);

// ---- lookups: one page entry against 16 objects ----

struct LookupFixture {
  static constexpr uint64_t kObjectsPerPage = 16;
  explicit LookupFixture(uint64_t pages) {
    const uint64_t seed = TenantSeed("");
    page_keys.resize(pages);
    digests.resize(pages);
    object_keys.resize(pages * kObjectsPerPage);
    for (uint64_t page = 0; page < pages; ++page) {
      const std::string hash = ForeignPageHash(page, 11);
      for (uint64_t slot = 0; slot < kObjectsPerPage; ++slot) {
        const std::string key = ObjectKey(hash, slot);
        store.Store(seed, key, 0);
        const Fingerprint whole = FingerprintOf(seed, key);
        object_keys[page * kObjectsPerPage + slot] = whole;
        per_object.insert_absent(PackedFingerprint(whole), KeyEntry{});
      }
      digests[page] = ShapeOf(ObjectKey(hash, 0)).digest;
      page_keys[page] = PageStore::PageKey(seed, digests[page], 0);
    }
    std::vector<SlotName> slots;
    for (uint64_t slot = 0; slot < kObjectsPerPage; ++slot) {
      const std::string any = ObjectKey(ForeignPageHash(0, 11), slot);
      const KeyShape shape = ShapeOf(any);
      required |= SlotNames::BitOf(store.slot_names().Find(SlotId(shape.prefix, shape.suffix), shape.prefix, shape.suffix));
      slots.push_back(SlotName{std::string(shape.prefix), std::string(shape.suffix)});
    }
    plan = store.ResolvePlan(slots);
    order.resize(pages);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937_64(5));
  }
  ObjectStore store;
  FingerprintTable<KeyEntry, 3> per_object;
  std::vector<Fingerprint> page_keys;
  std::vector<PageDigest> digests;
  std::vector<Fingerprint> object_keys;
  uint64_t required = 0;
  SlotPlan plan;
  std::vector<uint64_t> order;
};

LookupFixture& Lookups() {
  static LookupFixture* fixture = new LookupFixture(1'000'000);
  return *fixture;
}

constexpr size_t kAhead = 8;  // pages prefetched, then read

// Every page looked up is stored: each must have answered whole.
void ReportPages(benchmark::State& state, size_t whole) {
  if (whole != state.iterations() * kAhead) state.SkipWithError("a stored page did not answer whole");
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * kAhead));
  state.counters["ns_per_page"] = benchmark::Counter(static_cast<double>(state.iterations() * kAhead),
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_PageEntry(benchmark::State& state) {
  LookupFixture& f = Lookups();
  size_t next = 0, whole = 0;
  for (auto _ : state) {
    const size_t start = next;
    for (size_t i = 0; i < kAhead; ++i) f.store.pages().Prefetch(f.page_keys[f.order[(start + i) % f.order.size()]]);
    for (size_t i = 0; i < kAhead; ++i) {
      const uint64_t slots = f.store.pages().Slots(f.page_keys[f.order[(start + i) % f.order.size()]]);
      whole += (slots & f.required) == f.required;
    }
    next = (start + kAhead) % f.order.size();
  }
  ReportPages(state, whole);
}

void BM_PerObject(benchmark::State& state) {
  LookupFixture& f = Lookups();
  size_t next = 0, whole = 0;
  for (auto _ : state) {
    const size_t start = next;
    for (size_t i = 0; i < kAhead; ++i) {
      const uint64_t page = f.order[(start + i) % f.order.size()];
      for (uint64_t s = 0; s < LookupFixture::kObjectsPerPage; ++s) {
        f.per_object.prefetch(PackedFingerprint(f.object_keys[page * LookupFixture::kObjectsPerPage + s]));
      }
    }
    for (size_t i = 0; i < kAhead; ++i) {
      const uint64_t page = f.order[(start + i) % f.order.size()];
      bool all = true;
      for (uint64_t s = 0; s < LookupFixture::kObjectsPerPage && all; ++s) {
        all = f.per_object.contains(PackedFingerprint(f.object_keys[page * LookupFixture::kObjectsPerPage + s]));
      }
      whole += all;
    }
    next = (start + kAhead) % f.order.size();
  }
  ReportPages(state, whole);
}

// What a page query will do: from the page's digest (the layout's hash of
// its tokens) through a plan resolved once, the page's fingerprint made
// (keyed XXH3-128) and its entry read, not prefetched.
void BM_PagePlan(benchmark::State& state) {
  LookupFixture& f = Lookups();
  const uint64_t seed = TenantSeed("");
  size_t next = 0, whole = 0;
  for (auto _ : state) {
    const size_t start = next;
    for (size_t i = 0; i < kAhead; ++i) {
      whole += f.store.PageHas(seed, f.digests[f.order[(start + i) % f.order.size()]], f.plan);
    }
    next = (start + kAhead) % f.order.size();
  }
  ReportPages(state, whole);
}

BENCHMARK(BM_PageEntry)->Name("page_store/lookup/tp8/pages:1m/page_entry");
BENCHMARK(BM_PagePlan)->Name("page_store/lookup/tp8/pages:1m/plan_from_digest");
BENCHMARK(BM_PerObject)->Name("page_store/lookup/tp8/pages:1m/per_object");

// ---- absent pages, fresh and after churn (I57) ----

// A page table of 1M random entries reserved at load 0.75, then `churn`
// times its size of erase-then-insert pairs (a pool at its size), renewing
// it whenever worn if `renew` (as ObjectStore::MakeRoom does), or never.
struct AbsentFixture {
  AbsentFixture(double churn, bool renew) {
    constexpr size_t kPages = 1'000'000;
    std::mt19937_64 rng(17);
    table = table.Reserved(kPages);
    std::vector<PackedFingerprint> keys;
    for (size_t i = 0; i < kPages; ++i) {
      keys.emplace_back(Fingerprint{rng(), rng()});
      table.insert_absent(keys.back(), PageEntry{});
    }
    for (size_t step = 0; step < static_cast<size_t>(churn * kPages); ++step) {
      const size_t victim = rng() % keys.size();
      table.erase(table.find(keys[victim]));
      keys[victim] = PackedFingerprint(Fingerprint{rng(), rng()});
      if (renew && table.worn()) table = table.Renewed();
      table.insert_absent(keys[victim], PageEntry{});
    }
    for (size_t i = 0; i < kPages; ++i) absent.emplace_back(Fingerprint{rng(), rng()});
  }
  PageStore::Table::Part table;
  std::vector<PackedFingerprint> absent;
};

// Lookups of pages nobody stored, eight prefetched then read, as a page
// query does; buckets_read: lines a lookup reads on average.
void BM_AbsentPages(benchmark::State& state, double churn, bool renew) {
  static AbsentFixture* fixtures[3] = {};
  AbsentFixture*& fixture = fixtures[churn == 0 ? 0 : renew ? 1 : 2];
  if (fixture == nullptr) fixture = new AbsentFixture(churn, renew);
  const AbsentFixture& f = *fixture;
  size_t next = 0, found = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < kAhead; ++i) f.table.prefetch(f.absent[(next + i) % f.absent.size()]);
    for (size_t i = 0; i < kAhead; ++i) found += f.table.find(f.absent[(next + i) % f.absent.size()]) != nullptr;
    next = (next + kAhead) % f.absent.size();
  }
  if (found != 0) state.SkipWithError("a page nobody stored was found");
  size_t read = 0;
  for (size_t i = 0; i < 100'000; ++i) read += f.table.buckets_read(f.absent[i]);
  state.counters["buckets_read"] = static_cast<double>(read) / 100'000;
  state.counters["load"] = static_cast<double>(f.table.size()) / static_cast<double>(2 * f.table.bucket_count());
  state.counters["ns_per_page"] = benchmark::Counter(static_cast<double>(state.iterations() * kAhead),
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK_CAPTURE(BM_AbsentPages, fresh, 0.0, true)->Name("page_store/absent/pages:1m/load:0.75/fresh");
BENCHMARK_CAPTURE(BM_AbsentPages, renewed, 10.0, true)->Name("page_store/absent/pages:1m/load:0.75/churn:10x/renewed");
BENCHMARK_CAPTURE(BM_AbsentPages, worn, 10.0, false)->Name("page_store/absent/pages:1m/load:0.75/churn:10x/never_renewed");

// ---- a split table against one table (split_table.h, I58) ----

// 16M random page entries (about 650 MB of page table: past the 512 MiB at
// which a table splits) kept in one table, or in a table split into 64
// parts from its second growth on, each part grown alone as it filled (the
// parts of a pool that grew past the threshold, about 10 MiB each).
struct SplitFixture {
  static constexpr size_t kPages = 16'000'000;
  explicit SplitFixture(bool split) : table(split ? 1 : ~size_t{0}) {
    struct NoLock {
      void Lock() {}
      void Unlock() {}
    } lock;
    TableRenewals renewals;
    std::mt19937_64 rng(23);
    keys.reserve(kPages);
    for (size_t i = 0; i < kPages; ++i) {
      keys.emplace_back(Fingerprint{rng(), rng()});
      table.MakeRoom(&keys.back(), lock, &renewals);
      table.insert_absent(keys.back(), PageEntry{1, 0, 0});
    }
    std::shuffle(keys.begin(), keys.end(), rng);
    for (size_t i = 0; i < 1'000'000; ++i) absent.emplace_back(Fingerprint{rng(), rng()});
  }
  PageStore::Table table;
  std::vector<PackedFingerprint> keys;    // present, in random order
  std::vector<PackedFingerprint> absent;
};

// Lookups of present (or absent) pages at random, eight prefetched then
// read, as a page query does: DRAM-bound either way; what the split adds
// is reading the part's header, and 10 MiB parts instead of one array.
void BM_SplitLookup(benchmark::State& state, bool split, bool present) {
  static SplitFixture* fixtures[2] = {};
  SplitFixture*& fixture = fixtures[split ? 1 : 0];
  if (fixture == nullptr) fixture = new SplitFixture(split);
  const SplitFixture& f = *fixture;
  const std::vector<PackedFingerprint>& keys = present ? f.keys : f.absent;
  size_t next = 0, found = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < kAhead; ++i) f.table.prefetch(keys[(next + i) % keys.size()]);
    for (size_t i = 0; i < kAhead; ++i) found += f.table.find(keys[(next + i) % keys.size()]) != nullptr;
    next = (next + kAhead) % keys.size();
  }
  if (found != (present ? state.iterations() * kAhead : 0)) state.SkipWithError("a wrong answer");
  state.counters["split"] = f.table.split() ? 1 : 0;
  state.counters["table_MB"] = static_cast<double>(f.table.allocated_bytes()) / 1e6;
  state.counters["ns_per_page"] = benchmark::Counter(static_cast<double>(state.iterations() * kAhead),
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK_CAPTURE(BM_SplitLookup, one_present, false, true)->Name("page_store/split/pages:16m/one_table/present");
BENCHMARK_CAPTURE(BM_SplitLookup, split_present, true, true)->Name("page_store/split/pages:16m/64_parts/present");
BENCHMARK_CAPTURE(BM_SplitLookup, one_absent, false, false)->Name("page_store/split/pages:16m/one_table/absent");
BENCHMARK_CAPTURE(BM_SplitLookup, split_absent, true, false)->Name("page_store/split/pages:16m/64_parts/absent");

// ---- writes: objects stored a second ----

void BM_StoreRate(benchmark::State& state, bool per_object, uint64_t n) {
  double rate = 0;
  for (auto _ : state) {
    state.PauseTiming();
    // The keys first (not timed): the rate is the store's, not snprintf's.
    std::vector<std::string> keys;
    keys.reserve(n);
    for (uint64_t page = 0; page < n / 16; ++page) {
      const std::string hash = ForeignPageHash(page, 3);
      for (uint64_t slot = 0; slot < 16; ++slot) keys.push_back(ObjectKey(hash, slot));
    }
    auto store = std::make_unique<ObjectStore>();
    auto table = std::make_unique<FingerprintTable<KeyEntry, 3>>();
    const uint64_t seed = TenantSeed("");
    state.ResumeTiming();
    const auto start = std::chrono::steady_clock::now();
    if (per_object) {
      for (const std::string& key : keys) table->insert_absent(PackedFingerprint(FingerprintOf(seed, key)), KeyEntry{});
    } else {
      for (const std::string& key : keys) store->Store(seed, key, 0);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rate = static_cast<double>(keys.size()) / seconds;
    state.PauseTiming();
    store.reset();
    table.reset();
    keys.clear();
    state.ResumeTiming();
  }
  state.counters["objects_per_s"] = rate;
}
BENCHMARK_CAPTURE(BM_StoreRate, page_store, false, 10'000'000)
    ->Name("page_store/store/tp8/objects:10m/page_store")->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_StoreRate, per_object, true, 10'000'000)
    ->Name("page_store/store/tp8/objects:10m/per_object")->Iterations(1)->Unit(benchmark::kMillisecond);

// ---- random Contains at 1M and 100M objects ----

struct ContainsFixture {
  explicit ContainsFixture(uint64_t n) {
    const uint64_t seed = TenantSeed("");
    for (uint64_t page = 0; page < n / 16; ++page) {
      const std::string hash = ForeignPageHash(page, 9);
      for (uint64_t slot = 0; slot < 16; ++slot) store.Store(seed, ObjectKey(hash, slot), 0);
    }
    std::mt19937_64 rng(3);
    for (int i = 0; i < 1 << 20; ++i) {
      sample.push_back(ObjectKey(ForeignPageHash(rng() % (n / 16), 9), rng() % 16));
    }
  }
  ObjectStore store;
  std::vector<std::string> sample;  // present keys, random pages
};

// A lock for MakeRoom with no readers to keep out.
struct NoReaders {
  void Lock() {}
  void Unlock() {}
};

void BM_TenantClearThenOneStore(benchmark::State& state) {
  constexpr uint64_t kObjects = 10'000'000, kKept = kObjects / 100;
  const uint64_t cleared = TenantSeed("cleared"), kept = TenantSeed("");
  double before_mb = 0, after_mb = 0, store_ms = 0;
  for (auto _ : state) {
    ObjectStore store;
    NoReaders lock;
    const auto store_page = [&](uint64_t seed, uint64_t page) {
      const std::string hash = ForeignPageHash(page, 13);
      for (uint64_t slot = 0; slot < 16; ++slot) {
        const std::string key = ObjectKey(hash, slot);
        const ObjectStore::Place place = store.Locate(seed, key);
        store.MakeRoom(place, lock);
        store.Store(seed, key, place, 0);
      }
    };
    for (uint64_t page = 0; page < (kObjects - kKept) / 16; ++page) store_page(cleared, page);
    for (uint64_t page = 0; page < kKept / 16; ++page) store_page(kept, kObjects + page);
    before_mb = static_cast<double>(store.allocated_bytes()) / 1e6;
    store.ClearTenant(cleared);
    const uint64_t renewals = store.renewals();
    const auto start = std::chrono::steady_clock::now();
    store_page(kept, 2 * kObjects);
    store_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    after_mb = static_cast<double>(store.allocated_bytes()) / 1e6;
    if (store.renewals() != renewals + 1 || store.objects() != kKept + 16) state.SkipWithError("not shrunk once");
  }
  state.counters["MB_before_clear"] = before_mb;
  state.counters["MB_after_one_store"] = after_mb;
  state.counters["that_store_ms"] = store_ms;
}
BENCHMARK(BM_TenantClearThenOneStore)
    ->Name("page_store/tenant_clear/tp8/objects:10m/kept:1pct/then_one_store")
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// The one ContainsFixture alive, of `n` objects (the last asked for).
ContainsFixture& ContainsFixtureOf(uint64_t n) {
  static std::unique_ptr<ContainsFixture> fixture;
  static uint64_t fixture_n = 0;
  if (fixture_n != n) {
    fixture.reset();
    fixture = std::make_unique<ContainsFixture>(n);
    fixture_n = n;
  }
  return *fixture;
}

void BM_Contains(benchmark::State& state, uint64_t n) {
  ContainsFixture* const fixture = &ContainsFixtureOf(n);
  const uint64_t seed = TenantSeed("");
  size_t i = 0, hits = 0;
  for (auto _ : state) {
    hits += fixture->store.Contains(seed, fixture->sample[i]);
    i = (i + 1) & ((1 << 20) - 1);
  }
  if (hits != static_cast<size_t>(state.iterations())) state.SkipWithError("a stored key missed");
}
// Reads random lines of a buffer the size of ContainsFixture(n)'s tables,
// one an iteration, in BM_Contains' loop, overlapped or dependent
// (random_line_floor.h, ReadLine).
void BM_RandomLineFloor(benchmark::State& state, uint64_t n, bool dependent) {
  static std::unique_ptr<TableSizedBuffer> buffer;
  static uint64_t buffer_n = 0;
  if (buffer_n != n) {
    buffer.reset();
    buffer = std::make_unique<TableSizedBuffer>(ContainsFixtureOf(n).store.allocated_bytes());
    buffer_n = n;
  }
  const std::vector<size_t> offsets = RandomLineOffsets(*buffer, 1 << 20);
  size_t i = 0;
  uint64_t sum = 0;
  uint8_t last = 1;
  for (auto _ : state) {
    last = ReadLine(*buffer, offsets[i], last, dependent);
    sum += last;
    i = (i + 1) & ((1 << 20) - 1);
  }
  benchmark::DoNotOptimize(sum);
  state.counters["buffer_MB"] = static_cast<double>(buffer->lines()) * 64 / 1e6;
}
// Each floor right after its Contains row: one fixture of each size.
BENCHMARK_CAPTURE(BM_Contains, m1, 1'000'000)->Name("page_store/contains/tp8/objects:1m");
BENCHMARK_CAPTURE(BM_RandomLineFloor, m1o, 1'000'000, false)->Name("page_store/floor:random_line/overlapped/tp8/objects:1m");
BENCHMARK_CAPTURE(BM_RandomLineFloor, m1d, 1'000'000, true)->Name("page_store/floor:random_line/dependent/tp8/objects:1m");
BENCHMARK_CAPTURE(BM_Contains, m100, 100'000'000)->Name("page_store/contains/tp8/objects:100m");
BENCHMARK_CAPTURE(BM_RandomLineFloor, m100o, 100'000'000, false)->Name("page_store/floor:random_line/overlapped/tp8/objects:100m");
BENCHMARK_CAPTURE(BM_RandomLineFloor, m100d, 100'000'000, true)->Name("page_store/floor:random_line/dependent/tp8/objects:100m");

}  // namespace
}  // namespace sci::bench
