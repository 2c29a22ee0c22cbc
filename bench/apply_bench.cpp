// The writer's side: production-format messages decoded and applied, in
// events per second on one core (performance.md: >= 1 million/s).
//
//   ingest/decode/batch:64                   DecodeMessage alone
//   ingest/apply/batch:64/keys:<size>        Index::ApplyBatch of decoded events alone
//   ingest/decode_apply/batch:64/keys:<size> ApplyMessage: both, as the subscriber does
//
// Messages are what the Mooncake master sends for SGLang pages: 64 events a
// message, object keys "<64 hex>_<rank>_k|v" and group ids
// "sglang-hicache:<64 hex>" (tp8: 16 objects per page), every field of the
// production map (event id, type, tenant, medium, backend, block index,
// timestamps, seq_hashes), encoded by EncodeMooncakePayload. The stream
// stores 512 batches of new pages, then removes them, and so on, over an
// index that already holds `size` keys of other pages: steady churn at
// that size. Sequence frames are consecutive, so no batch is a gap.
//
//   tenant_clear/keys:<size>/by_name     a tenant sharing the default tenant's
//                                        tag stores one key and is cleared
//   tenant_clear/keys:<size>/tag_walk    a tenant of another tag stores
//                                        TenantKeys::kListed + 1 keys and is
//                                        cleared: a walk of the store by tag
//
// Time per clear, its stores included, beside `size` keys of the default
// tenant. Until 1.4 every clear whose tag held a key walked the store, so
// the tag_walk row is also what the by_name case cost then.
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "index/fingerprint.h"
#include "index/tenant_keys.h"
#include "sglang/layout.h"
#include "wire/message_apply.h"
#include "encode/mooncake_encoder.h"
#include "production_stream.h"
#include "query_fixture.h"
#include "wire/wire_decoder.h"

namespace sci::bench {
namespace {

constexpr size_t kBatch = kStreamBatch;
constexpr size_t kChunks = kStreamChunks;

// An index of `size` foreign keys, plus where the stream stands on it.
struct Target {
  std::unique_ptr<Index> index;
  uint64_t sequence = 1;
  size_t next_message = 0;

  static Target& ForSize(uint64_t size) {
    static std::map<uint64_t, Target> targets;
    Target& t = targets[size];
    if (t.index == nullptr) {
      t.index = std::make_unique<Index>(SGLangIndexOptions());
      ApplyForeignPages(*t.index, 0, size, /*stored=*/true, /*salt=*/size, &t.sequence);
    }
    return t;
  }
};

void ReportEvents(benchmark::State& state) {
  const double events = static_cast<double>(state.iterations()) * kBatch;
  state.SetItemsProcessed(static_cast<int64_t>(events));
  state.counters["events_per_s"] = benchmark::Counter(events, benchmark::Counter::kIsRate);
  state.counters["payload_bytes_per_event"] =
      static_cast<double>(ProductionStream::Get().payload_bytes) / static_cast<double>(2 * kChunks * kBatch);
}

void BM_Decode(benchmark::State& state) {
  const ProductionStream& stream = ProductionStream::Get();
  MessageFrames frames;
  DecodedMessage scratch;
  std::string error;
  size_t at = 0;
  uint64_t sequence = 1;
  bool ok = true;
  for (auto _ : state) {
    ok &= DecodeMessage(frames.Of(sequence++, stream.payloads[at]), &scratch, &error);
    benchmark::DoNotOptimize(scratch.events.data());
    if (++at == stream.payloads.size()) at = 0;
  }
  if (!ok || scratch.events.size() != kBatch) state.SkipWithError(("decode failed: " + error).c_str());
  ReportEvents(state);
}

void BM_Apply(benchmark::State& state, uint64_t size) {
  const ProductionStream& stream = ProductionStream::Get();
  // Decoded once up front: the events are views into the payloads.
  static const std::vector<std::vector<Event>>* const decoded = [&stream] {
    auto* all = new std::vector<std::vector<Event>>();
    MessageFrames frames;
    DecodedMessage scratch;
    for (const std::string& payload : stream.payloads) {
      if (!DecodeMessage(frames.Of(1, payload), &scratch, nullptr)) throw std::logic_error("undecodable payload");
      all->push_back(scratch.events);
    }
    return all;
  }();
  Target& target = Target::ForSize(size);
  const uint64_t events_before = target.index->GetStats().events_applied;
  for (auto _ : state) {
    target.index->ApplyBatch(target.sequence++, (*decoded)[target.next_message]);
    if (++target.next_message == decoded->size()) target.next_message = 0;
  }
  if (target.index->GetStats().events_applied - events_before != state.iterations() * kBatch) {
    state.SkipWithError("not every event was applied");
  }
  ReportEvents(state);
  state.counters["keys"] = static_cast<double>(target.index->GetStats().keys);
}

void BM_DecodeApply(benchmark::State& state, uint64_t size) {
  const ProductionStream& stream = ProductionStream::Get();
  Target& target = Target::ForSize(size);
  MessageFrames frames;
  DecodedMessage scratch;
  std::string error;
  const Stats before = target.index->GetStats();
  bool ok = true;
  for (auto _ : state) {
    ok &= ApplyMessage(*target.index, frames.Of(target.sequence++, stream.payloads[target.next_message]), scratch,
                       &error);
    if (++target.next_message == stream.payloads.size()) target.next_message = 0;
  }
  const Stats after = target.index->GetStats();
  if (!ok || after.events_applied - before.events_applied != state.iterations() * kBatch ||
      after.sequence_gaps != before.sequence_gaps) {
    state.SkipWithError(("not every event was applied in order: " + error).c_str());
  }
  ReportEvents(state);
  state.counters["keys"] = static_cast<double>(after.keys);
}

// `n` page keys of `tenant`, numbered from `first`.
std::vector<Event> TenantStores(const std::string& tenant, size_t n, uint64_t first) {
  static std::vector<std::string> keys;  // the events view them
  keys.clear();
  keys.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    std::string hex(64, 'e');
    const uint64_t page = first + i;
    for (int d = 0; d < 16; ++d) hex[63 - d] = "0123456789abcdef"[(page >> (4 * d)) & 15];
    keys.push_back(hex + "_0_k");
  }
  std::vector<Event> events;
  for (const std::string& key : keys) events.push_back(Event{EventKind::kStored, key, {}, tenant, "cpu"});
  return events;
}

void BM_TenantClear(benchmark::State& state, uint64_t size, bool by_name) {
  static std::map<uint64_t, std::pair<std::unique_ptr<Index>, uint64_t>> indexes;
  auto& [index, sequence] = indexes[size];
  if (index == nullptr) {
    sequence = 1;
    index = std::make_unique<Index>(SGLangIndexOptions());
    ApplyForeignPages(*index, 0, size, /*stored=*/true, /*salt=*/size ^ 0x7E, &sequence);
  }
  // A tenant of the default tenant's tag (by name: it holds one key), or of
  // another tag (a walk: it holds more than kListed).
  const uint32_t default_tag = TenantTag(TenantSeed("default"));
  std::string tenant;
  for (int n = 0; tenant.empty(); ++n) {
    const std::string name = "bench-tenant-" + std::to_string(n);
    if ((TenantTag(TenantSeed(name)) == default_tag) == by_name) tenant = name;
  }
  const size_t n = by_name ? 1 : TenantKeys::kListed + 1;
  const std::vector<Event> stores = TenantStores(tenant, n, 1);
  const std::vector<Event> clear = {Event{EventKind::kTenantCleared, {}, {}, tenant, {}}};
  const uint64_t keys_before = index->GetStats().keys;
  for (auto _ : state) {
    index->ApplyBatch(sequence++, stores);
    index->ApplyBatch(sequence++, clear);
  }
  if (index->GetStats().keys != keys_before) state.SkipWithError("the clear did not leave the other keys as they were");
  state.counters["keys"] = static_cast<double>(keys_before);
  state.counters["keys_stored_per_clear"] = static_cast<double>(n);
}

BENCHMARK(BM_Decode)->Name("ingest/decode/batch:64");
BENCHMARK_CAPTURE(BM_Apply, 10k, 10'000)->Name("ingest/apply/batch:64/keys:10k");
BENCHMARK_CAPTURE(BM_Apply, 1m, 1'000'000)->Name("ingest/apply/batch:64/keys:1m");
BENCHMARK_CAPTURE(BM_DecodeApply, 10k, 10'000)->Name("ingest/decode_apply/batch:64/keys:10k");
BENCHMARK_CAPTURE(BM_DecodeApply, 1m, 1'000'000)->Name("ingest/decode_apply/batch:64/keys:1m");
BENCHMARK_CAPTURE(BM_TenantClear, 10k_by_name, 10'000, true)->Name("tenant_clear/keys:10k/by_name");
BENCHMARK_CAPTURE(BM_TenantClear, 10k_tag_walk, 10'000, false)->Name("tenant_clear/keys:10k/tag_walk");
BENCHMARK_CAPTURE(BM_TenantClear, 1m_by_name, 1'000'000, true)->Name("tenant_clear/keys:1m/by_name");
BENCHMARK_CAPTURE(BM_TenantClear, 1m_tag_walk, 1'000'000, false)->Name("tenant_clear/keys:1m/tag_walk");

}  // namespace
}  // namespace sci::bench
