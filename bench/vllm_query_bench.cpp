// vLLM chunk queries (performance.md, "vLLM", added 1.2): CheckPrefix and
// CheckBlocks of 2048-token prompts against 1M vLLM keys, side by side with
// the hashing of the same blocks alone.
//
//   vllm/hash-alone/<shape>
//   vllm/prefix/<shape>/fresh-cold/<hit|miss>/<rotation|evict8m|dram512m>/paired_with_hashing
//   vllm/blocks/<shape>/fresh-cold/<hit|miss>/<rotation|evict8m|dram512m>/paired_with_hashing
//   vllm/exact-path/<shape>/<prefix|blocks>/<rotation|evict8m|dram512m>
//   vllm/<prefix|blocks>/<shape>/repeated/paired_with_hashing
//   vllm/<prefix|blocks>/qwen/fresh-cold-salted/<hit|miss>/rotation/paired_with_hashing
//
// Shapes (both sha256, PYTHONHASHSEED 0, hash_block_size 16, router block
// 16, TP 2, so each chunk needs 2 objects):
//   qwen:   Qwen3-8B (8 KV heads, TP 2: f = 1), one full-attention group of
//           block 16; prefixes prod@Qwen3-8B@tp_rank:{0,1}@pcp0@dcp0@pp_rank:0@group:0.
//   hybrid: group 0 full attention block 16, group 1 Mamba (align) block 64
//           (alignment 64), model Hybrid-M, TP 2 (a Mamba group's f is 1).
// Prompts: 2048 tokens of a 151936-token vocabulary (Qwen's: 1-, 2- and
// 4-byte pickle ints alike), no extras: 128 hash blocks. The router credits
// at most (2048 - 1) / 16 = 127 blocks, so a prefix query of a stored prompt
// hashes 127 blocks (qwen answers 127 blocks; hybrid 124, the largest
// multiple of 64 tokens under 2048, its Mamba chunk keyed by block 123); a
// block query hashes all 128.
//
// The index: per shape, kPrompts stored prompts (every chunk of every group
// stored: one stored event per object key, no group_id, in 64-event
// batches through Index::ApplyBatch) plus foreign chunks of the same
// prefixes with random digests, 1M keys in all (half per shape).
//
// fresh-cold: each iteration takes the next of kPrompts distinct prompts
// (hit: stored ones; miss: prompts nobody stored), and
//   - first times the hashing of the blocks the query will hash, alone
//     (HashBlock in a loop: pickle encoding and SHA-256, nothing else);
//   - then clears the thread's digest memo (the query has never seen the
//     prompt; the hashing alone above is no memo entry) and times the query.
// Cache treatment before each of the two timed calls: rotation = nothing
// (47 other prompts, their tokens, memo entries and table lines, ran since
// this one was last touched); evict8m = an 8 MiB sweep (the core's private
// caches and TLBs emptied; the tables stay in this guest's 260 MiB L3);
// dram512m = a 512 MiB sweep, larger than the L3 (tables and code from
// DRAM). Sweeps are outside the timed spans. The answer is checked (prefix
// length, blocks hashed as the memo counts them) or the row reports an error.
// Counters: medians of the per-call times (hashing_us, query_us) and of the
// per-call ratios (query_over_hashing: the target is <= 1.3).
//
// exact-path: the same cold treatment, the query by digests
// (ChainSource::Digests, precomputed) so nothing is hashed: per_key_ns =
// median call time / object keys looked up (target <= 40 ns).
//
// fresh-cold-salted: fresh-cold (rotation) with a cache_salt on every
// request (the qwen prompts are also stored under it): the memo's domain of
// a request with extras (vllm/memo_domain.h) is on this path.
//
// repeated: kRepeatedPrompts prompts, each queried twice before the loop so
// the memo holds their blocks (a prompt is memoised on its second sight),
// queried in turn: memo warm; paired with hashing the same blocks. The memo
// is direct-mapped, so a few blocks whose slots collide are hashed again
// (rehashed_share).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "cache_eviction.h"
#include "index/index.h"
#include "query/digest.h"
#include "query/digest_memo.h"
#include "vllm/block_hash.h"
#include "vllm/chunk_query.h"
#include "vllm/layout.h"
#include "workloads.h"

namespace sci::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kTokens = 2048;
constexpr uint32_t kBlock = 16;
constexpr size_t kHashBlocks = kTokens / kBlock;  // 128
constexpr size_t kPrompts = 48;
constexpr size_t kRepeatedPrompts = 4;
constexpr uint32_t kVocabulary = 151936;
// fresh-cold-salted's cache_salt.
constexpr std::string_view kSalt = "tenant-7f3a9c1e";

vllm::RequestExtras Salted() {
  vllm::RequestExtras extras;
  extras.has_salt = true;
  extras.cache_salt = kSalt;
  return extras;
}

uint64_t ForeignKeys() {
  // SCI_VLLM_BENCH_KEYS=10000: the smoke run's index.
  if (const char* keys = std::getenv("SCI_VLLM_BENCH_KEYS")) return std::strtoull(keys, nullptr, 10);
  return 1'000'000;
}

enum class Shape { kQwen, kHybrid };
const char* ShapeName(Shape shape) { return shape == Shape::kQwen ? "qwen" : "hybrid"; }

vllm::GroupSpec Group(vllm::GroupKind kind, uint32_t block_size, const std::string& model, int group) {
  vllm::GroupSpec spec;
  spec.group_id = static_cast<uint32_t>(group);
  spec.kind = kind;
  spec.block_size = block_size;
  spec.hash_block_size = kBlock;
  for (int tp = 0; tp < 2; ++tp) {
    spec.key_prefixes.push_back("prod@" + model + "@tp_rank:" + std::to_string(tp) + "@pcp0@dcp0@pp_rank:0@group:" +
                                std::to_string(group));
  }
  return spec;
}

std::unique_ptr<const vllm::Layout> MakeLayout(Shape shape) {
  vllm::LayoutSpec spec;
  spec.algorithm = vllm::HashAlgorithm::kSha256;
  spec.main_event_block_size = kBlock;
  if (shape == Shape::kQwen) {
    spec.groups = {Group(vllm::GroupKind::kFullAttention, 16, "Qwen3-8B", 0)};
  } else {
    spec.groups = {Group(vllm::GroupKind::kFullAttention, 16, "Hybrid-M", 0),
                   Group(vllm::GroupKind::kMamba, 64, "Hybrid-M", 1)};
  }
  std::string error;
  std::unique_ptr<const vllm::Layout> layout = vllm::Layout::Create(spec, &error);
  if (layout == nullptr) throw std::logic_error("vLLM layout: " + error);
  return layout;
}

std::vector<uint32_t> Tokens(uint64_t seed) {
  std::vector<uint32_t> tokens(kTokens);
  for (size_t j = 0; j < tokens.size(); ++j) {
    tokens[j] = static_cast<uint32_t>(SplitMix64(seed * 0x9E3779B97F4A7C15ull + j) % kVocabulary);
  }
  return tokens;
}

std::string Hex(const vllm::BlockDigest& digest) {
  std::string hex(kPageHashHexLength, '\0');
  ToHex(digest, hex.data());
  return hex;
}

// The hashing of a prompt's first `blocks` blocks alone: what the query
// cannot avoid on a prompt it has never seen.
vllm::BlockDigest HashAlone(const vllm::Layout& layout, std::span<const uint32_t> tokens, size_t blocks,
                            const vllm::RequestExtras& extras = {}) {
  vllm::BlockDigest parent = layout.none_hash();
  for (size_t i = 0; i < blocks; ++i) {
    parent = vllm::HashBlock(layout.algorithm(), parent, tokens.subspan(i * kBlock, kBlock), extras, i);
  }
  return parent;
}

struct ShapeData {
  std::unique_ptr<const vllm::Layout> layout;
  std::vector<std::vector<uint32_t>> stored, unrelated;
  std::vector<std::vector<uint8_t>> digests;  // per stored prompt, 32 bytes per hash block
};

class Fixture {
 public:
  static Fixture& Get() {
    static Fixture fixture;
    return fixture;
  }
  Index& index() { return *index_; }
  ShapeData& shape(Shape s) { return shapes_[s == Shape::kQwen ? 0 : 1]; }

  void Evict(Eviction eviction) { evictor_.Evict(eviction); }

 private:
  Fixture() {
    const uint64_t foreign = ForeignKeys();
    std::fprintf(stderr, "building the vLLM index (%llu foreign keys, %zu prompts per shape)...\n",
                 static_cast<unsigned long long>(foreign), kPrompts);
    index_ = std::make_unique<Index>(vllm::VllmIndexOptions(IndexOptions{.max_entries = uint64_t{4} << 20}));
    std::vector<std::string> keys;
    for (Shape s : {Shape::kQwen, Shape::kHybrid}) {
      ShapeData& data = shape(s);
      data.layout = MakeLayout(s);
      const uint64_t base = s == Shape::kQwen ? 11'000'000 : 12'000'000;
      for (size_t i = 0; i < kPrompts; ++i) {
        data.stored.push_back(Tokens(base + i));
        data.unrelated.push_back(Tokens(base + 500'000 + i));
        const std::vector<vllm::BlockDigest> chain =
            vllm::HashChain(data.layout->algorithm(), "0", data.stored.back(), kBlock);
        std::vector<uint8_t> flat;
        for (const vllm::BlockDigest& d : chain) flat.insert(flat.end(), d.begin(), d.end());
        data.digests.push_back(std::move(flat));
        for (size_t g = 0; g < data.layout->groups().size(); ++g) {
          const size_t per_chunk = data.layout->groups()[g].block_size / kBlock;
          for (size_t end = per_chunk; end <= chain.size(); end += per_chunk) {
            for (std::string& key : data.layout->KeysFor(g, Hex(chain[end - 1]))) keys.push_back(std::move(key));
          }
        }
        if (s == Shape::kQwen) {  // and salted (fresh-cold-salted)
          for (const vllm::BlockDigest& d :
               vllm::HashChain(data.layout->algorithm(), "0", data.stored.back(), kBlock, Salted())) {
            for (std::string& key : data.layout->KeysFor(0, Hex(d))) keys.push_back(std::move(key));
          }
        }
      }
      // Foreign chunks: random digests under the same prefixes (in the
      // hybrid, one Mamba chunk for every 4 full-attention ones).
      uint64_t added = 0, n = 0;
      while (added < foreign / 2) {
        vllm::BlockDigest digest;
        for (size_t w = 0; w < 4; ++w) {
          const uint64_t x = SplitMix64((base + 777) * 0x9E3779B97F4A7C15ull + 4 * n + w);
          std::memcpy(digest.data() + 8 * w, &x, 8);
        }
        const size_t g = (s == Shape::kHybrid && n % 5 == 4) ? 1 : 0;
        for (std::string& key : data.layout->KeysFor(g, Hex(digest))) {
          keys.push_back(std::move(key));
          ++added;
        }
        ++n;
      }
    }
    // Stored in a shuffled order, as a pool's keys arrive over time. Filled
    // one shape after the other, the shape stored first looked up 10 ns a
    // key faster than the other (either way round): a table places a key in
    // its home bucket unless that was full when it came, and keys stored
    // into an emptier table sit displaced less often (0.6% against 7% for
    // keys stored after half of them, in a test of the table alone).
    for (size_t i = keys.size(); i > 1; --i) std::swap(keys[i - 1], keys[SplitMix64(i) % i]);
    std::vector<Event> batch;
    for (size_t first = 0; first < keys.size(); first += 64) {
      batch.clear();
      for (size_t k = first; k < std::min(keys.size(), first + 64); ++k) {
        batch.push_back(Event{EventKind::kStored, keys[k], {}, {}, "cpu"});
      }
      index_->ApplyBatch(sequence_++, batch);
    }
    std::fprintf(stderr, "vLLM index: %zu keys\n", keys.size());
  }

  std::unique_ptr<Index> index_;
  ShapeData shapes_[2];
  uint64_t sequence_ = 1;
  CacheEvictor evictor_;
};

// What a query row asks.
enum class Query { kPrefix, kBlocks };
const char* QueryName(Query q) { return q == Query::kPrefix ? "prefix" : "blocks"; }

// Blocks the query hashes, its expected answer (prefix blocks, or block
// hits), and object keys it looks up (exact path).
struct Expected {
  size_t hashed = 0;
  size_t answer = 0;
  size_t keys = 0;
};

Expected ExpectedFor(Shape shape, Query query, bool hit) {
  if (query == Query::kBlocks) return Expected{kHashBlocks, hit ? kHashBlocks : 0, 2 * kHashBlocks};
  if (!hit) return Expected{1, 0, 2};
  // 127 full-attention chunks (2 keys each); the hybrid's Mamba chunk at 1984 tokens too.
  return shape == Shape::kQwen ? Expected{127, 127, 254} : Expected{127, 124, 256};
}

vllm::ChainSource SourceOf(std::span<const uint32_t> tokens, const std::vector<uint8_t>* digests,
                           const vllm::RequestExtras& extras = {}) {
  if (digests != nullptr) return vllm::ChainSource::Digests(digests->data(), kHashBlocks, kTokens);
  return vllm::ChainSource::Tokens(tokens, extras);
}

// One query; its answer (prefix_hits, or total_hits of the blocks).
size_t RunQuery(Fixture& fixture, const vllm::Layout& layout, Query query, const vllm::ChainSource& source,
                std::vector<uint8_t>& hits) {
  if (query == Query::kPrefix) return vllm::CheckPrefix(fixture.index(), layout, source, kBlock).prefix_hits;
  return vllm::CheckBlocks(fixture.index(), layout, source, kBlock, hits).total_hits;
}

void BM_HashAlone(benchmark::State& state, Shape shape) {
  Fixture& fixture = Fixture::Get();
  ShapeData& data = fixture.shape(shape);
  size_t next = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(HashAlone(*data.layout, data.stored[next++ % kPrompts], kHashBlocks));
  }
  state.counters["per_prompt_us"] =
      benchmark::Counter(1e-6, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["per_block_ns"] = benchmark::Counter(
      1e-9 * kHashBlocks, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["blocks"] = static_cast<double>(kHashBlocks);
}

// Fresh cold prompts, paired with hashing the same blocks alone.
void BM_FreshCold(benchmark::State& state, Shape shape, Query query, bool hit, Eviction evict, bool salted) {
  const vllm::RequestExtras extras = salted ? Salted() : vllm::RequestExtras{};
  Fixture& fixture = Fixture::Get();
  ShapeData& data = fixture.shape(shape);
  const Expected expected = ExpectedFor(shape, query, hit);
  PageDigestMemo& memo = *PageDigestMemo::ForThisThread();
  std::vector<uint8_t> hits(kHashBlocks);
  std::vector<double> hashing, queried, ratios;
  bool right = true;
  size_t next = 0;
  for (auto _ : state) {
    const std::vector<uint32_t>& tokens = (hit ? data.stored : data.unrelated)[next++ % kPrompts];
    // The same treatment before both timed calls: the memo's clear (512 KiB
    // written: it takes the tokens out of the core's own caches) and then
    // the eviction.
    memo.Clear();
    fixture.Evict(evict);
    const auto t0 = Clock::now();
    benchmark::DoNotOptimize(HashAlone(*data.layout, tokens, expected.hashed, extras));
    const auto t1 = Clock::now();
    memo.Clear();
    fixture.Evict(evict);
    const uint64_t hashed_before = memo.pages_hashed();
    const auto t2 = Clock::now();
    const size_t answer = RunQuery(fixture, *data.layout, query, SourceOf(tokens, nullptr, extras), hits);
    const auto t3 = Clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t3 - t2).count());
    right &= answer == expected.answer && memo.pages_hashed() - hashed_before == expected.hashed;
    hashing.push_back(Micros(t1 - t0));
    queried.push_back(Micros(t3 - t2));
    ratios.push_back(queried.back() / hashing.back());
  }
  if (!right) {
    state.SkipWithError("unexpected answer or blocks hashed: the workload is not what its name says");
    return;
  }
  state.counters["hashing_us"] = Median(hashing);
  state.counters["query_us"] = Median(queried);
  state.counters["query_over_hashing"] = Median(ratios);
  state.counters["hashed_blocks"] = static_cast<double>(expected.hashed);
  state.counters["hash_block_ns"] = Median(hashing) * 1000 / static_cast<double>(expected.hashed);
}

// The lookups alone: the query by digests, cold, per object key looked up.
void BM_ExactPath(benchmark::State& state, Shape shape, Query query, Eviction evict) {
  Fixture& fixture = Fixture::Get();
  ShapeData& data = fixture.shape(shape);
  const Expected expected = ExpectedFor(shape, query, true);
  std::vector<uint8_t> hits(kHashBlocks);
  std::vector<double> queried;
  bool right = true;
  size_t next = 0;
  for (auto _ : state) {
    const size_t i = next++ % kPrompts;
    fixture.Evict(evict);
    const auto t0 = Clock::now();
    const size_t answer = RunQuery(fixture, *data.layout, query, SourceOf({}, &data.digests[i]), hits);
    const auto t1 = Clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    right &= answer == expected.answer;
    queried.push_back(Micros(t1 - t0));
  }
  if (!right) {
    state.SkipWithError("unexpected answer: the workload is not what its name says");
    return;
  }
  state.counters["query_us"] = Median(queried);
  state.counters["keys"] = static_cast<double>(expected.keys);
  state.counters["per_key_ns"] = Median(queried) * 1000 / static_cast<double>(expected.keys);
}

// The same prompts again: every block from the thread's memo.
void BM_Repeated(benchmark::State& state, Shape shape, Query query) {
  Fixture& fixture = Fixture::Get();
  ShapeData& data = fixture.shape(shape);
  const Expected expected = ExpectedFor(shape, query, true);
  PageDigestMemo& memo = *PageDigestMemo::ForThisThread();
  std::vector<uint8_t> hits(kHashBlocks);
  memo.Clear();
  for (int sight = 0; sight < 2; ++sight) {
    for (size_t i = 0; i < kRepeatedPrompts; ++i) {
      RunQuery(fixture, *data.layout, query, SourceOf(data.stored[i], nullptr), hits);
    }
  }
  std::vector<double> hashing, queried, ratios;
  bool right = true;
  uint64_t rehashed = 0;
  size_t next = 0;
  for (auto _ : state) {
    const std::vector<uint32_t>& tokens = data.stored[next++ % kRepeatedPrompts];
    const auto t0 = Clock::now();
    benchmark::DoNotOptimize(HashAlone(*data.layout, tokens, expected.hashed));
    const auto t1 = Clock::now();
    const uint64_t hashed_before = memo.pages_hashed();
    const size_t answer = RunQuery(fixture, *data.layout, query, SourceOf(tokens, nullptr), hits);
    const auto t2 = Clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t2 - t1).count());
    right &= answer == expected.answer;
    rehashed += memo.pages_hashed() - hashed_before;
    hashing.push_back(Micros(t1 - t0));
    queried.push_back(Micros(t2 - t1));
    ratios.push_back(queried.back() / hashing.back());
  }
  if (!right) {
    state.SkipWithError("unexpected answer: the workload is not what its name says");
    return;
  }
  state.counters["hashing_us"] = Median(hashing);
  state.counters["query_us"] = Median(queried);
  state.counters["query_over_hashing"] = Median(ratios);
  // The memo is direct-mapped: a block whose slot another block of these
  // prompts took is hashed again (a few in a thousand).
  state.counters["rehashed_share"] =
      static_cast<double>(rehashed) / static_cast<double>(state.iterations() * expected.hashed);
}

const bool kRegistered = [] {
  for (Shape shape : {Shape::kQwen, Shape::kHybrid}) {
    const std::string s = ShapeName(shape);
    benchmark::RegisterBenchmark(("vllm/hash-alone/" + s).c_str(), BM_HashAlone, shape)
        ->Unit(benchmark::kMicrosecond);
  }
  for (Eviction evict : {Eviction::kNone, Eviction::kPrivateCaches, Eviction::kDram}) {
    const std::string cold = EvictionName(evict);
    for (Query query : {Query::kPrefix, Query::kBlocks}) {
      for (Shape shape : {Shape::kQwen, Shape::kHybrid}) {
        for (bool hit : {true, false}) {
          benchmark::RegisterBenchmark((std::string("vllm/") + QueryName(query) + "/" + ShapeName(shape) +
                                        "/fresh-cold/" + (hit ? "hit" : "miss") + "/" + cold + "/paired_with_hashing")
                                           .c_str(),
                                       BM_FreshCold, shape, query, hit, evict, false)
              ->Iterations(kPrompts)
              ->UseManualTime()
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
    for (Shape shape : {Shape::kQwen, Shape::kHybrid}) {
      for (Query query : {Query::kPrefix, Query::kBlocks}) {
        benchmark::RegisterBenchmark(
            (std::string("vllm/exact-path/") + ShapeName(shape) + "/" + QueryName(query) + "/" + cold).c_str(),
            BM_ExactPath, shape, query, evict)
            ->Iterations(kPrompts)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  for (Query query : {Query::kPrefix, Query::kBlocks}) {
    for (bool hit : {true, false}) {
      benchmark::RegisterBenchmark((std::string("vllm/") + QueryName(query) + "/qwen/fresh-cold-salted/" +
                                    (hit ? "hit" : "miss") + "/rotation/paired_with_hashing")
                                       .c_str(),
                                   BM_FreshCold, Shape::kQwen, query, hit, Eviction::kNone, true)
          ->Iterations(kPrompts)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  for (Query query : {Query::kPrefix, Query::kBlocks}) {
    for (Shape shape : {Shape::kQwen, Shape::kHybrid}) {
      benchmark::RegisterBenchmark((std::string("vllm/") + QueryName(query) + "/" + ShapeName(shape) +
                                    "/repeated/paired_with_hashing")
                                       .c_str(),
                                   BM_Repeated, shape, query)
          ->Iterations(4 * kRepeatedPrompts)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  return true;
}();

}  // namespace
}  // namespace sci::bench
