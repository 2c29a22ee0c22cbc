// The allocation sweep through the C API (issue #34 §2), in the manner of
// SQLite's malloc tests: each scenario -- making an index, layouts from a
// spec and from both families' JSON, applying events, SGLang and vLLM
// queries, the Prometheus text -- runs once for every N, with the N-th
// allocation it makes failed, until it completes with none failed. After
// each run:
//   - the call returned SCI_OK or SCI_ERR_NO_MEMORY, nothing else, and
//     SCI_ERR_NO_MEMORY only when an allocation failed;
//   - an object it returned works, and on failure none was returned;
//   - a query that answered answers exactly what an unfailed call answers
//     (no false hit, and no lost hit either);
//   - an apply that failed left the index empty (the header's promise),
//     and one that succeeded left it as an unfailed apply does.
// Each run is on a fresh thread, so that thread-local scratch and digest
// memos start empty and their growth is swept too. (The write path's own
// sweep is write_path_allocation_failure_test; the subscriber's,
// subscriber_allocation_failure_test; sci_index_apply_message's,
// message_apply_allocation_failure_test.)
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "shared_cache_index.h"

#include "replaced_operator_new.h"

namespace {
thread_local bool g_armed = false;
thread_local long g_fail_at = 0;
thread_local long g_allocations = 0;
thread_local bool g_failed = false;
bool g_persistent = false;  // every allocation from the N-th on fails (memory stays short)
}  // namespace

void* sci_test::AllocateForTest(std::size_t size, std::size_t alignment) {
  if (g_armed && (++g_allocations == g_fail_at || (g_persistent && g_allocations > g_fail_at))) {
    g_failed = true;
    return nullptr;
  }
  return HeapAllocate(size, alignment);
}

namespace {

sci_str S(const std::string& s) { return sci_str{s.data(), s.size()}; }

// The check value of docs/sglang-hicache.md: tokens 1..10, page size 4.
const std::string kHash0 = "cf97adeedb59e05bfd73a2b4c2a8885708c4f4f70c84c64b27120e72ab733b72";
const std::string kHash1 = "4ebfa8a1f3c341517621838c6e1b9aa350307e3f00b3cbd1a07ef740f54396d6";
const std::vector<uint32_t> kTokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};

constexpr const char* kSglangConfig =
    R"({"page_size": 4, "tp_size": 1, "pools": [{"suffixes": ["__a", "__b"]}, )"
    R"({"suffixes": ["__swa"], "hit_policy": "trailing_pages", "trailing_pages": 1}]})";
constexpr const char* kVllmDescriptor = R"({"vllm_mooncake_store": {"schema_version": 1,
 "hash": {"algorithm": "sha256", "seed_policy": "pythonhashseed-0"},
 "main_event_block_size": 4, "coordinator": {"lcm_block_size": 8},
 "groups": [{"group_id": 0, "kind": "full_attention", "block_size": 4, "hash_block_size": 4,
             "key_prefixes": ["p@M@tp_rank:0@group:0", "p@M@tp_rank:1@group:0"]},
            {"group_id": 1, "kind": "mamba", "block_size": 8, "hash_block_size": 4, "mamba_cache_mode": "align",
             "key_prefixes": ["p@M@tp_rank:0@group:1"]}]}})";

struct Outcome {
  sci_status status = SCI_OK;
  bool failed = false;  // the armed allocation was reached
};

// Runs `call` on a fresh thread with its `fail_at`-th allocation failed.
Outcome RunArmed(long fail_at, const std::function<sci_status()>& call) {
  Outcome outcome;
  std::thread([&] {
    g_allocations = 0;
    g_failed = false;
    g_fail_at = fail_at;
    g_armed = true;
    outcome.status = call();
    g_armed = false;
    outcome.failed = g_failed;
  }).join();
  return outcome;
}

// Sweeps `call` (N = 1, 2, ... until a run fails nothing); `check` sees
// every outcome. Returns the number of allocation sites reached.
long Sweep(const char* scenario, const std::function<sci_status()>& call,
           const std::function<void(const Outcome&)>& check = {}) {
  long sites = 0;
  for (long n = 1; n < 100000; ++n) {
    SCOPED_TRACE(std::string(scenario) + ": allocation " + std::to_string(n) + " failed");
    const Outcome outcome = RunArmed(n, call);
    if (outcome.failed) {
      ++sites;
      EXPECT_TRUE(outcome.status == SCI_OK || outcome.status == SCI_ERR_NO_MEMORY)
          << "status " << outcome.status << ": " << sci_last_error();
    } else {
      EXPECT_EQ(outcome.status, SCI_OK) << sci_last_error();
    }
    if (check) check(outcome);
    if (!outcome.failed || ::testing::Test::HasFailure()) break;
  }
  std::printf("%s: %ld allocation sites, %s\n", scenario, sites,
              g_persistent ? "each failed with every later one" : "each failed once");
  return sites;
}

sci_stats StatsOf(const sci_index* index) {
  sci_stats stats{};
  stats.struct_size = sizeof stats;
  EXPECT_EQ(sci_index_stats(index, &stats), SCI_OK);
  return stats;
}

sci_layout_spec Spec(uint32_t page_size, uint32_t tp_size, uint32_t pp_size) {
  sci_layout_spec spec;
  std::memset(&spec, 0, sizeof spec);
  spec.struct_size = sizeof spec;
  spec.page_size = page_size;
  spec.tp_size = tp_size;
  spec.pp_size = pp_size;
  return spec;
}

sci_layout* SglangLayout() {
  const sci_layout_spec spec = Spec(4, 1, 1);
  sci_layout* layout = nullptr;
  EXPECT_EQ(sci_layout_new(&spec, &layout), SCI_OK) << sci_last_error();
  return layout;
}

// Page 0 of kTokens stored whole under its group, page 1 missing its v.
sci_index* PopulatedIndex() {
  sci_index* index = nullptr;
  EXPECT_EQ(sci_index_new(nullptr, &index), SCI_OK);
  const std::string g0 = "sglang-hicache:" + kHash0, g1 = "sglang-hicache:" + kHash1;
  const std::string keys[] = {kHash0 + "_0_k", kHash0 + "_0_v", kHash1 + "_0_k"};
  const sci_event events[] = {{SCI_EVENT_STORED, S(keys[0]), S(g0), {}, {}},
                              {SCI_EVENT_STORED, S(keys[1]), S(g0), {}, {}},
                              {SCI_EVENT_STORED, S(keys[2]), S(g1), {}, {}}};
  EXPECT_EQ(sci_index_apply_events(index, 1, events, 3), SCI_OK) << sci_last_error();
  return index;
}

sci_page_result PageResult() {
  sci_page_result r;
  std::memset(&r, 0, sizeof r);
  r.struct_size = sizeof r;
  return r;
}

TEST(CapiAllocationSweep, MakingAnIndexAndLayouts) {
  long total = 0;
  total += Sweep("sci_index_new", [] {
    sci_index* index = reinterpret_cast<sci_index*>(1);
    const sci_status status = sci_index_new(nullptr, &index);
    g_armed = false;
    if (status != SCI_OK) EXPECT_EQ(index, nullptr);
    sci_index_free(status == SCI_OK ? index : nullptr);
    return status;
  });
  total += Sweep("sci_index_new (per-medium, a three-tier map)", [] {
    sci_index_options options;
    std::memset(&options, 0, sizeof options);
    options.struct_size = sizeof options;
    options.residency = SCI_RESIDENCY_PER_MEDIUM;
    options.medium_tiers = sci_str{"hbm=0,cpu=1,disk=2", 18};
    sci_index* index = reinterpret_cast<sci_index*>(1);
    const sci_status status = sci_index_new(&options, &index);
    g_armed = false;
    if (status != SCI_OK) EXPECT_EQ(index, nullptr);
    sci_index_free(status == SCI_OK ? index : nullptr);
    return status;
  });
  const auto layout_call = [](const std::function<sci_status(sci_layout**)>& make) {
    return [make] {
      sci_layout* layout = reinterpret_cast<sci_layout*>(1);
      const sci_status status = make(&layout);
      g_armed = false;
      if (status != SCI_OK) {
        EXPECT_EQ(layout, nullptr);
      } else {
        EXPECT_NE(sci_layout_block_size(layout), 0u);
        sci_layout_free(layout);
      }
      return status;
    };
  };
  total += Sweep("sci_layout_new", layout_call([](sci_layout** out) {
                   sci_layout_spec spec = Spec(64, 8, 2);
                   spec.extra_backend_tag = sci_str{"tag", 3};
                   return sci_layout_new(&spec, out);
                 }));
  total += Sweep("sci_layout_new_json (SGLang, pools)", layout_call([](sci_layout** out) {
                   return sci_layout_new_json(sci_str{kSglangConfig, std::strlen(kSglangConfig)}, out);
                 }));
  total += Sweep("sci_layout_new_json (vLLM hybrid)", layout_call([](sci_layout** out) {
                   return sci_layout_new_json(sci_str{kVllmDescriptor, std::strlen(kVllmDescriptor)}, out);
                 }));
  EXPECT_GE(total, 9);
}

// A failed apply clears the index (the header: SCI_ERR_NO_MEMORY means
// "the index is cleared"); a completed one leaves what an unfailed one does.
TEST(CapiAllocationSweep, ApplyingEventsClearsOrCompletes) {
  const std::string g1 = "sglang-hicache:" + kHash1;
  const std::string v1 = kHash1 + "_0_v", v0 = kHash0 + "_0_v";
  // Many stores, so that the tables grow under the armed thread.
  std::vector<std::string> keys;
  for (int i = 0; i < 200; ++i) keys.push_back("bulk-" + std::to_string(i));
  std::vector<sci_event> events = {{SCI_EVENT_STORED, S(v1), S(g1), {}, {}},
                                   {SCI_EVENT_REMOVED, S(v0), {}, {}, {}}};
  for (const std::string& key : keys) events.push_back({SCI_EVENT_STORED, S(key), {}, {}, {}});
  sci_index* index = nullptr;
  const long sites = Sweep(
      "sci_index_apply_events",
      [&] {
        sci_index_free(index);  // the previous run's
        g_armed = false;  // (the fixture's own allocations are not swept)
        index = PopulatedIndex();
        g_armed = true;
        return sci_index_apply_events(index, 2, events.data(), events.size());
      },
      [&](const Outcome& outcome) {
        const sci_stats stats = StatsOf(index);
        if (outcome.status == SCI_ERR_NO_MEMORY) {
          EXPECT_EQ(stats.keys, 0u);
          EXPECT_FALSE(stats.has_sequence);
        } else {
          EXPECT_EQ(stats.keys, 203u);
          EXPECT_EQ(stats.last_sequence, 2u);
        }
      });
  sci_index_free(index);
  EXPECT_GE(sites, 2);
}

TEST(CapiAllocationSweep, QueriesAnswerExactlyOrFail) {
  sci_index* index = PopulatedIndex();
  sci_layout* layout = SglangLayout();
  sci_layout* vllm = nullptr;
  ASSERT_EQ(sci_layout_new_json(sci_str{kVllmDescriptor, std::strlen(kVllmDescriptor)}, &vllm), SCI_OK);
  const sci_str hashes[] = {S(kHash0), S(kHash1)};
  long total = 0;
  const auto pages = [&](const sci_layout* l, uint32_t block, std::vector<uint8_t> expected_hits) {
    return std::function<sci_status()>([=] {
      uint8_t hits[8] = {7, 7, 7, 7, 7, 7, 7, 7};
      sci_page_result result = PageResult();
      const sci_status status =
          sci_index_check_pages(index, l, kTokens.data(), kTokens.size(), block, hits, sizeof hits, &result);
      g_armed = false;  // the checks' own allocations are not swept
      if (status == SCI_OK) {
        EXPECT_EQ(result.n_pages, expected_hits.size());
        for (size_t i = 0; i < expected_hits.size(); ++i) EXPECT_EQ(hits[i], expected_hits[i]) << "page " << i;
      }
      return status;
    });
  };
  total += Sweep("sci_index_check_pages (SGLang)", pages(layout, 4, {1, 0}));
  total += Sweep("sci_index_check_prefix (SGLang)", [&] {
    size_t prefix = 99;
    const sci_status status = sci_index_check_prefix(index, layout, kTokens.data(), kTokens.size(), 4, &prefix);
    g_armed = false;
    if (status == SCI_OK) EXPECT_EQ(prefix, 1u);
    return status;
  });
  total += Sweep("sci_index_check_page_hashes (SGLang)", [&] {
    uint8_t hits[2] = {7, 7};
    sci_page_result result = PageResult();
    const sci_status status = sci_index_check_page_hashes(index, layout, hashes, 2, hits, 2, &result);
    g_armed = false;
    if (status == SCI_OK) {
      EXPECT_EQ(hits[0], 1);
      EXPECT_EQ(hits[1], 0);
    }
    return status;
  });
  // vLLM: nothing of it is stored, so every block misses.
  total += Sweep("sci_index_check_pages (vLLM)", pages(vllm, 4, {0, 0}));
  total += Sweep("sci_index_check_prefix_with_extras (vLLM, salt)", [&] {
    sci_request_extras extras;
    std::memset(&extras, 0, sizeof extras);
    extras.struct_size = sizeof extras;
    extras.cache_salt = sci_str{"tenant-salt", 11};
    size_t prefix = 99;
    const sci_status status =
        sci_index_check_prefix_with_extras(index, vllm, kTokens.data(), kTokens.size(), 4, &extras, &prefix);
    g_armed = false;
    if (status == SCI_OK) EXPECT_EQ(prefix, 0u);
    return status;
  });
  total += Sweep("sci_index_check_prefix_tokens (SGLang, then vLLM)", [&] {
    size_t prefix = 99, loaded = 99;
    sci_status status =
        sci_index_check_prefix_tokens(index, layout, kTokens.data(), kTokens.size(), 4, nullptr, &prefix, &loaded);
    if (status == SCI_OK) {
      EXPECT_EQ(prefix, 1u);
      EXPECT_EQ(loaded, 4u);
      status = sci_index_check_prefix_tokens(index, vllm, kTokens.data(), kTokens.size(), 4, nullptr, &prefix, &loaded);
      if (status == SCI_OK) EXPECT_EQ(loaded, 0u);
    }
    g_armed = false;
    return status;
  });
  // Tiers: the default index keeps no media, so a present page is at the
  // slowest tier (1 of cpu=0, disk=1).
  const auto tiers = [&](const sci_layout* l, std::vector<uint8_t> expected, size_t slowest_prefix) {
    return std::function<sci_status()>([=] {
      uint8_t page_tier[8] = {7, 7, 7, 7, 7, 7, 7, 7};
      sci_tier_result result;
      std::memset(&result, 0, sizeof result);
      result.struct_size = sizeof result;
      const sci_status status = sci_index_check_tiers(index, l, kTokens.data(), kTokens.size(), 4, nullptr,
                                                      page_tier, sizeof page_tier, &result);
      g_armed = false;
      if (status == SCI_OK) {
        EXPECT_EQ(result.n_pages, expected.size());
        for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(page_tier[i], expected[i]) << "page " << i;
        EXPECT_EQ(result.prefix_pages[0], 0u);
        EXPECT_EQ(result.prefix_pages[1], slowest_prefix);
      }
      return status;
    });
  };
  total += Sweep("sci_index_check_tiers (SGLang)", tiers(layout, {1, SCI_TIER_ABSENT}, 1));
  total += Sweep("sci_index_check_tiers (vLLM)", tiers(vllm, {SCI_TIER_ABSENT, SCI_TIER_ABSENT}, 0));
  total += Sweep("sci_stats_format_prometheus", [&] {
    char text[16384];
    size_t written = 0;
    const sci_status status = sci_stats_format_prometheus(index, sci_str{"pool=\"a\"", 8}, text, sizeof text, &written);
    g_armed = false;
    if (status == SCI_OK) EXPECT_NE(std::string(text, written).find("sci_keys{pool=\"a\"} 3"), std::string::npos);
    return status;
  });
  EXPECT_GE(total, 6);
  // The index is as it was: queries change nothing a query can see.
  EXPECT_EQ(StatsOf(index).keys, 3u);
  sci_layout_free(vllm);
  sci_layout_free(layout);
  sci_index_free(index);
}

// Memory that stays short: every allocation from the N-th on fails. Each
// call must still return (SCI_ERR_NO_MEMORY, never std::terminate: the
// error path itself allocates nothing it needs), and leave nothing broken
// for the calls after it, made with memory back.
TEST(CapiAllocationSweep, MemoryThatStaysShortCostsTheCallNotTheProcess) {
  g_persistent = true;
  sci_index* index = PopulatedIndex();
  sci_layout* layout = SglangLayout();
  long total = 0;
  // (Not sci_layout_new_json: nlohmann's parser, unwinding from a failed
  // allocation, destroys its partial document with allocations of its
  // own, inside a noexcept destructor. One failure is survived, as the
  // sweeps above show; memory that stays short is not. docs/testing.md.)
  total += Sweep("sci_layout_new, memory short", [] {
    const sci_layout_spec spec = Spec(64, 8, 1);
    sci_layout* out = nullptr;
    const sci_status status = sci_layout_new(&spec, &out);
    g_armed = false;
    sci_layout_free(out);
    return status;
  });
  total += Sweep("sci_index_check_pages, memory short", [&] {
    uint8_t hits[4] = {};
    sci_page_result result = PageResult();
    const sci_status status =
        sci_index_check_pages(index, layout, kTokens.data(), kTokens.size(), 4, hits, sizeof hits, &result);
    g_armed = false;
    if (status == SCI_OK) EXPECT_EQ(hits[0], 1);
    return status;
  });
  total += Sweep("sci_index_apply_events, memory short", [&] {
    const std::string key = "short-" + std::to_string(g_fail_at);  // (allocated before the failures start)
    const sci_event events[] = {{SCI_EVENT_STORED, sci_str{key.data(), key.size()}, {}, {}, {}}};
    const sci_stats before = StatsOf(index);
    const sci_status status = sci_index_apply_events(index, before.last_sequence + 1, events, 1);
    g_armed = false;
    if (status == SCI_ERR_NO_MEMORY) EXPECT_EQ(StatsOf(index).keys, 0u);
    return status;
  });
  g_persistent = false;
  EXPECT_GE(total, 3);
  // Memory back: everything works (the index refilled as a stream would).
  sci_index_free(index);
  index = PopulatedIndex();
  uint8_t hits[4] = {};
  sci_page_result result = PageResult();
  EXPECT_EQ(sci_index_check_pages(index, layout, kTokens.data(), kTokens.size(), 4, hits, sizeof hits, &result),
            SCI_OK);
  EXPECT_EQ(hits[0], 1);
  sci_layout_free(layout);
  sci_index_free(index);
}

}  // namespace
