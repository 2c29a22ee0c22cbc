// Layouts and the page query as a C caller sees them: only the public header
// and the shared library. Every pointer, struct_size and spec field is
// validated; a rejected call names the argument and changes nothing.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "shared_cache_index.h"

namespace {

// The check value of docs/sglang-hicache.md: tokens 1..10, page size 4.
const std::string kHash0 = "cf97adeedb59e05bfd73a2b4c2a8885708c4f4f70c84c64b27120e72ab733b72";
const std::string kHash1 = "4ebfa8a1f3c341517621838c6e1b9aa350307e3f00b3cbd1a07ef740f54396d6";
const std::vector<uint32_t> kTokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};

sci_str S(const std::string& s) { return sci_str{s.data(), s.size()}; }
sci_str S(const char* s) { return sci_str{s, std::strlen(s)}; }  // literals: no temporary std::string
const sci_str kEmpty{nullptr, 0};

sci_layout_spec Spec() {
  sci_layout_spec spec;
  std::memset(&spec, 0, sizeof spec);
  spec.struct_size = sizeof spec;
  spec.page_size = 4;
  spec.tp_size = 1;
  spec.pp_size = 1;
  return spec;
}

sci_page_result Result() {
  sci_page_result r;
  std::memset(&r, 0, sizeof r);
  r.struct_size = sizeof r;
  return r;
}

std::string LastError() { return sci_last_error(); }

struct Fixture : ::testing::Test {
  Fixture() { EXPECT_EQ(sci_index_new(nullptr, &index), SCI_OK); }
  ~Fixture() override {
    sci_layout_free(layout);
    sci_index_free(index);
  }

  sci_layout* NewLayout(const sci_layout_spec& spec) {
    sci_layout* out = nullptr;
    EXPECT_EQ(sci_layout_new(&spec, &out), SCI_OK) << LastError();
    return out;
  }
  // Stored events for `keys`, all labelled with `group`, as one batch.
  void Store(const std::vector<std::string>& keys, const std::string& group) {
    std::vector<sci_event> events;
    for (const std::string& key : keys) events.push_back(sci_event{SCI_EVENT_STORED, S(key), S(group), kEmpty, kEmpty});
    ASSERT_EQ(sci_index_apply_events(index, ++sequence, events.data(), events.size()), SCI_OK) << LastError();
  }
  sci_stats Stats() {
    sci_stats s;
    std::memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    EXPECT_EQ(sci_index_stats(index, &s), SCI_OK);
    return s;
  }
  sci_status Check(sci_page_result* result, uint8_t* hits, size_t hits_cap, uint32_t block_size = 4) {
    return sci_index_check_pages(index, layout, kTokens.data(), kTokens.size(), block_size, hits, hits_cap, result);
  }

  sci_index* index = nullptr;
  sci_layout* layout = nullptr;
  uint64_t sequence = 0;
};

// ---------------------------------------------------------- sci_layout_new --

using CapiLayoutNew = Fixture;

sci_status NewStatus(const sci_layout_spec& spec) {
  sci_layout* out = reinterpret_cast<sci_layout*>(0x1);
  const sci_status status = sci_layout_new(&spec, &out);
  if (status != SCI_OK) {
    EXPECT_EQ(out, nullptr);
  }
  sci_layout_free(out);
  return status;
}

TEST_F(CapiLayoutNew, CreatesAndFrees) {
  sci_layout* out = nullptr;
  const sci_layout_spec spec = Spec();
  ASSERT_EQ(sci_layout_new(&spec, &out), SCI_OK);
  EXPECT_NE(out, nullptr);
  sci_layout_free(out);
}

TEST_F(CapiLayoutNew, FreeOfNullIsANoOp) { sci_layout_free(nullptr); }

TEST_F(CapiLayoutNew, RejectsNullOutAndNullSpec) {
  const sci_layout_spec spec = Spec();
  EXPECT_EQ(sci_layout_new(&spec, nullptr), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_layout_new: out is NULL");
  sci_layout* out = reinterpret_cast<sci_layout*>(0x1);
  EXPECT_EQ(sci_layout_new(nullptr, &out), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_layout_new: spec is NULL");
  EXPECT_EQ(out, nullptr);
}

TEST_F(CapiLayoutNew, RejectsZeroOrTooSmallStructSize) {
  for (uint32_t size : {0u, 4u, static_cast<uint32_t>(sizeof(sci_layout_spec) - 1)}) {
    sci_layout_spec spec = Spec();
    spec.struct_size = size;
    EXPECT_EQ(NewStatus(spec), SCI_ERR_INVALID_ARGUMENT) << size;
    EXPECT_NE(LastError().find("sci_layout_new: spec->struct_size"), std::string::npos) << LastError();
  }
}

TEST_F(CapiLayoutNew, AcceptsALargerStructFromANewerCaller) {
  struct Newer {
    sci_layout_spec v1;
    uint64_t future_field;
  } spec;
  std::memset(&spec, 0, sizeof spec);
  spec.v1 = Spec();
  spec.v1.struct_size = sizeof spec;
  spec.future_field = 99;
  EXPECT_EQ(NewStatus(spec.v1), SCI_OK) << LastError();
}

TEST_F(CapiLayoutNew, RejectsZeroPageSize) {
  sci_layout_spec spec = Spec();
  spec.page_size = 0;
  EXPECT_EQ(NewStatus(spec), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_layout_new: spec->page_size is 0");
}

TEST_F(CapiLayoutNew, RejectsAbsurdParallelSizes) {
  sci_layout_spec spec = Spec();
  spec.tp_size = 1u << 20;
  EXPECT_EQ(NewStatus(spec), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_layout_new: spec->tp_size is 1048576 (more than 1024)");
  spec = Spec();
  spec.pp_size = 2000;
  EXPECT_EQ(NewStatus(spec), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_layout_new: spec->pp_size is 2000 (more than 1024)");
  spec = Spec();
  spec.tp_lcm_size = UINT32_MAX;
  EXPECT_EQ(NewStatus(spec), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("spec->tp_lcm_size"), std::string::npos);
  spec = Spec();
  spec.tp_size = 1024;
  spec.pp_size = 1024;
  EXPECT_EQ(NewStatus(spec), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("keys per page"), std::string::npos);
}

TEST_F(CapiLayoutNew, RejectsStringsWithANullPointerAndALength) {
  const std::pair<const char*, sci_str sci_layout_spec::*> fields[] = {
      {"extra_backend_tag", &sci_layout_spec::extra_backend_tag},
      {"key_prefix", &sci_layout_spec::key_prefix},
      {"tenant_id", &sci_layout_spec::tenant_id}};
  for (const auto& [name, field] : fields) {
    sci_layout_spec spec = Spec();
    spec.*field = sci_str{nullptr, 3};
    EXPECT_EQ(NewStatus(spec), SCI_ERR_INVALID_ARGUMENT) << name;
    EXPECT_EQ(LastError(), std::string("sci_layout_new: spec->") + name + " has a NULL ptr and a non-zero len");
  }
}

TEST_F(CapiLayoutNew, NullPointersWithZeroCountsAreEmpty) {
  sci_layout_spec spec = Spec();
  spec.extra_backend_tag = kEmpty;
  spec.pools = nullptr;
  spec.n_pools = 0;
  EXPECT_EQ(NewStatus(spec), SCI_OK) << LastError();
}

TEST_F(CapiLayoutNew, RejectsNullPoolsWithACount) {
  sci_layout_spec spec = Spec();
  spec.n_pools = 2;
  EXPECT_EQ(NewStatus(spec), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_layout_new: spec->pools is NULL but spec->n_pools is 2");
}

TEST_F(CapiLayoutNew, RejectsAnAbsurdPoolCountWithoutReadingIt) {
  const sci_str suffix = S("__kv");
  sci_pool pool{&suffix, 1, SCI_HIT_ALL_PAGES, 0};
  sci_layout_spec spec = Spec();
  spec.pools = &pool;
  spec.n_pools = SIZE_MAX;
  EXPECT_EQ(NewStatus(spec), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("sci_layout_new: spec->n_pools is"), std::string::npos) << LastError();
  pool.n_suffixes = SIZE_MAX;
  spec.n_pools = 1;
  EXPECT_EQ(NewStatus(spec), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("sci_layout_new: spec->pools[0].n_suffixes is"), std::string::npos) << LastError();
}

TEST_F(CapiLayoutNew, RejectsAPoolWithoutSuffixes) {
  const sci_str suffix = S("__kv");
  const sci_pool pools[] = {{&suffix, 1, SCI_HIT_ALL_PAGES, 0}, {nullptr, 0, SCI_HIT_ALL_PAGES, 0}};
  sci_layout_spec spec = Spec();
  spec.pools = pools;
  spec.n_pools = 2;
  EXPECT_EQ(NewStatus(spec), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_layout_new: spec->pools[1].suffixes is empty");
}

TEST_F(CapiLayoutNew, RejectsNullSuffixesWithACount) {
  const sci_pool pool{nullptr, 3, SCI_HIT_ALL_PAGES, 0};
  sci_layout_spec spec = Spec();
  spec.pools = &pool;
  spec.n_pools = 1;
  EXPECT_EQ(NewStatus(spec), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_layout_new: spec->pools[0].suffixes is NULL but n_suffixes is 3");
}

TEST_F(CapiLayoutNew, RejectsAnEmptySuffixAndABadSuffixString) {
  sci_str suffixes[] = {S("__kv"), kEmpty};
  const sci_pool pool{suffixes, 2, SCI_HIT_ALL_PAGES, 0};
  sci_layout_spec spec = Spec();
  spec.pools = &pool;
  spec.n_pools = 1;
  EXPECT_EQ(NewStatus(spec), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_layout_new: spec->pools[0].suffixes[1] is empty");
  suffixes[1] = sci_str{nullptr, 4};
  EXPECT_EQ(NewStatus(spec), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_layout_new: spec->pools[0].suffixes[1] has a NULL ptr and a non-zero len");
}

TEST_F(CapiLayoutNew, RejectsAnUnknownHitPolicy) {
  const sci_str suffix = S("__kv");
  for (sci_hit_policy policy : {2, -1}) {
    const sci_pool pool{&suffix, 1, policy, 1};
    sci_layout_spec spec = Spec();
    spec.pools = &pool;
    spec.n_pools = 1;
    EXPECT_EQ(NewStatus(spec), SCI_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(LastError(), "sci_layout_new: spec->pools[0].hit_policy is " + std::to_string(policy) +
                               " (want SCI_HIT_ALL_PAGES or SCI_HIT_TRAILING_PAGES)");
  }
}

TEST_F(CapiLayoutNew, RejectsKeysTooLongForTheKeyBuffer) {
  const std::string long_prefix(2000, 'p');
  const sci_str suffix = S("__kv");
  const sci_pool pool{&suffix, 1, SCI_HIT_ALL_PAGES, 0};
  sci_layout_spec spec = Spec();
  spec.pools = &pool;
  spec.n_pools = 1;
  spec.key_prefix = S(long_prefix);
  EXPECT_EQ(NewStatus(spec), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastError().find("sci_layout_new: spec->key_prefix is too long"), std::string::npos) << LastError();
}

// --------------------------------------------------- sci_index_check_pages --

using CapiCheckPages = Fixture;

TEST_F(CapiCheckPages, AnswersTheDocCheckValueAndTakesTheFastPathNext) {
  layout = NewLayout(Spec());
  Store({kHash0 + "_0_k", kHash0 + "_0_v"}, "sglang-hicache:" + kHash0);
  uint8_t hits[2] = {0xEE, 0xEE};
  sci_page_result r = Result();
  ASSERT_EQ(Check(&r, hits, 2), SCI_OK) << LastError();
  EXPECT_EQ(hits[0], 1);
  EXPECT_EQ(hits[1], 0);
  EXPECT_EQ(r.n_pages, 2u);
  EXPECT_EQ(r.total_hits, 1u);
  EXPECT_EQ(r.prefix_hits, 1u);
  EXPECT_EQ(r.prefix_tokens, 4u) << "SGLang loads whole pages: prefix_hits x page_size";
  EXPECT_EQ(r.fast_path, 1u);  // 1.4: every hit reads its page's entry, the first query too
  ASSERT_EQ(Check(&r, hits, 2), SCI_OK);
  EXPECT_EQ(r.fast_path, 1u);
  const sci_stats s = Stats();
  EXPECT_EQ(s.queries, 2u);
  EXPECT_EQ(s.pages_checked, 4u);
  EXPECT_EQ(s.page_hits, 2u);
  EXPECT_EQ(s.fast_path_hits, 2u);
  EXPECT_EQ(s.verified_groups, 0u);  // nothing to verify since 1.4
}

TEST_F(CapiCheckPages, HitsAfterAMissingPageAreReported) {
  layout = NewLayout(Spec());
  Store({kHash1 + "_0_k", kHash1 + "_0_v"}, "sglang-hicache:" + kHash1);
  uint8_t hits[2] = {0xEE, 0xEE};
  sci_page_result r = Result();
  ASSERT_EQ(Check(&r, hits, 2), SCI_OK);
  EXPECT_EQ(hits[0], 0);
  EXPECT_EQ(hits[1], 1);
  EXPECT_EQ(r.total_hits, 1u);
  EXPECT_EQ(r.prefix_hits, 0u);
  EXPECT_EQ(r.prefix_tokens, 0u) << "a hit after a missing page loads nothing";
}

TEST_F(CapiCheckPages, PoolsKeyPrefixAndTagThroughTheCSpec) {
  const sci_str all[] = {S("__kv")};
  const sci_str trailing[] = {S("__swa")};
  const sci_pool pools[] = {{all, 1, SCI_HIT_ALL_PAGES, 0}, {trailing, 1, SCI_HIT_TRAILING_PAGES, 1}};
  sci_layout_spec spec = Spec();
  spec.pools = pools;
  spec.n_pools = 2;
  const std::string tag = "tag", prefix = "kp", tenant = "tenant-a";
  spec.extra_backend_tag = S(tag);
  spec.key_prefix = S(prefix);
  spec.tenant_id = S(tenant);
  layout = NewLayout(spec);
  std::vector<sci_event> events;
  const std::string keys[] = {"kp_" + kHash0 + "__kv", "kp_" + kHash1 + "__kv", "kp_" + kHash1 + "__swa"};
  const std::string groups[] = {"sglang-hicache:tag_" + kHash0, "sglang-hicache:tag_" + kHash1,
                                "sglang-hicache:tag_" + kHash1};
  for (int i = 0; i < 3; ++i)
    events.push_back(sci_event{SCI_EVENT_STORED, S(keys[i]), S(groups[i]), S(tenant), kEmpty});
  ASSERT_EQ(sci_index_apply_events(index, 1, events.data(), events.size()), SCI_OK);
  uint8_t hits[2] = {0xEE, 0xEE};
  sci_page_result r = Result();
  ASSERT_EQ(Check(&r, hits, 2), SCI_OK);
  EXPECT_EQ(r.total_hits, 2u);
  ASSERT_EQ(Check(&r, hits, 2), SCI_OK);
  EXPECT_EQ(r.fast_path, 2u);
}

TEST_F(CapiCheckPages, RejectsNullHandlesAndResult) {
  layout = NewLayout(Spec());
  uint8_t hits[2];
  sci_page_result r = Result();
  EXPECT_EQ(sci_index_check_pages(nullptr, layout, kTokens.data(), kTokens.size(), 4, hits, 2, &r),
            SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_index_check_pages: index is NULL");
  EXPECT_EQ(sci_index_check_pages(index, nullptr, kTokens.data(), kTokens.size(), 4, hits, 2, &r),
            SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_index_check_pages: layout is NULL");
  EXPECT_EQ(sci_index_check_pages(index, layout, kTokens.data(), kTokens.size(), 4, hits, 2, nullptr),
            SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_index_check_pages: result is NULL");
  EXPECT_EQ(Stats().queries, 0u);
}

TEST_F(CapiCheckPages, RejectsATooSmallResultAndWritesNothing) {
  layout = NewLayout(Spec());
  Store({kHash0 + "_0_k", kHash0 + "_0_v"}, "sglang-hicache:" + kHash0);
  // The 1.0 struct ends at fast_path: one byte short of it is refused.
  for (uint32_t size : {0u, 4u, static_cast<uint32_t>(offsetof(sci_page_result, prefix_tokens) - 1)}) {
    sci_page_result r;
    std::memset(&r, 0xAB, sizeof r);
    r.struct_size = size;
    uint8_t hits[2] = {0xEE, 0xEE};
    EXPECT_EQ(Check(&r, hits, 2), SCI_ERR_INVALID_ARGUMENT) << size;
    EXPECT_NE(LastError().find("sci_index_check_pages: result->struct_size"), std::string::npos) << LastError();
    EXPECT_EQ(r.n_pages, static_cast<size_t>(0xABABABABABABABABull));
    EXPECT_EQ(hits[0], 0xEE);
  }
  EXPECT_EQ(Stats().queries, 0u);
}

TEST_F(CapiCheckPages, WritesNoMoreThanTheCallersResultAndZeroesAnUnknownTail) {
  layout = NewLayout(Spec());
  struct Newer {
    sci_page_result v1;
    uint64_t future[2];
  } r;
  std::memset(&r, 0xCD, sizeof r);
  r.v1.struct_size = sizeof r;
  uint8_t hits[2];
  ASSERT_EQ(Check(&r.v1, hits, 2), SCI_OK);
  EXPECT_EQ(r.v1.struct_size, sizeof r);
  EXPECT_EQ(r.v1.n_pages, 2u);
  EXPECT_EQ(r.future[0], 0u);
  EXPECT_EQ(r.future[1], 0u);
}

TEST_F(CapiCheckPages, RejectsNullTokensWithACount) {
  layout = NewLayout(Spec());
  uint8_t hits[2];
  sci_page_result r = Result();
  EXPECT_EQ(sci_index_check_pages(index, layout, nullptr, 8, 4, hits, 2, &r), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_index_check_pages: tokens is NULL but n_tokens is 8");
  EXPECT_EQ(sci_index_check_pages(index, layout, nullptr, 0, 4, nullptr, 0, &r), SCI_OK);
  EXPECT_EQ(r.n_pages, 0u);
}

TEST_F(CapiCheckPages, HitsMayBeNullOnlyWithoutAWholePage) {
  layout = NewLayout(Spec());
  sci_page_result r = Result();
  EXPECT_EQ(sci_index_check_pages(index, layout, kTokens.data(), 3, 4, nullptr, 0, &r), SCI_OK);
  EXPECT_EQ(r.n_pages, 0u);
  EXPECT_EQ(sci_index_check_pages(index, layout, kTokens.data(), kTokens.size(), 4, nullptr, 2, &r),
            SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_index_check_pages: hits is NULL but the request has 2 pages");
}

TEST_F(CapiCheckPages, TooSmallHitsBufferWritesNothing) {
  layout = NewLayout(Spec());
  Store({kHash0 + "_0_k", kHash0 + "_0_v"}, "sglang-hicache:" + kHash0);
  uint8_t hits[2] = {0xEE, 0xEE};
  sci_page_result r = Result();
  r.n_pages = 77;
  EXPECT_EQ(Check(&r, hits, 1), SCI_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(LastError(), "sci_index_check_pages: hits_cap is 1 but the request has 2 pages");
  EXPECT_EQ(hits[0], 0xEE);
  EXPECT_EQ(r.n_pages, 77u);
  EXPECT_EQ(Stats().queries, 0u);
  EXPECT_EQ(Stats().verified_groups, 0u);
}

TEST_F(CapiCheckPages, BlockSizeMismatchIsOkWithNoPageAndCountedAsAQuery) {
  layout = NewLayout(Spec());
  Store({kHash0 + "_0_k", kHash0 + "_0_v"}, "sglang-hicache:" + kHash0);
  uint8_t hits[2] = {0xEE, 0xEE};
  sci_page_result r = Result();
  ASSERT_EQ(Check(&r, hits, 2, /*block_size=*/16), SCI_OK);
  EXPECT_EQ(r.n_pages, 0u);
  EXPECT_EQ(r.total_hits, 0u);
  EXPECT_EQ(hits[0], 0xEE);
  // A mismatched caller needs no buffer at all.
  ASSERT_EQ(sci_index_check_pages(index, layout, kTokens.data(), kTokens.size(), 2, nullptr, 0, &r), SCI_OK);
  const sci_stats s = Stats();
  EXPECT_EQ(s.queries, 2u);
  EXPECT_EQ(s.pages_checked, 0u);
  EXPECT_EQ(s.block_size_mismatches, 2u);
}

// Warnings of a query, through the C log callback.
struct WarnLines {
  static void Record(void* user, int32_t level, const char* msg, size_t len) {
    if (level == SCI_LOG_WARN) static_cast<WarnLines*>(user)->lines.emplace_back(msg, len);
  }
  std::vector<std::string> lines;
};

TEST_F(CapiCheckPages, TheFirstMismatchedQueryOfALayoutWarnsOnce) {
  layout = NewLayout(Spec());
  sci_layout* other = NewLayout(Spec());
  WarnLines warnings;
  sci_set_log_callback(&WarnLines::Record, &warnings);
  sci_page_result r = Result();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Check(&r, nullptr, 0, /*block_size=*/16), SCI_OK);
  uint8_t hits[2];
  ASSERT_EQ(Check(&r, hits, 2, /*block_size=*/4), SCI_OK);  // the right size: no warning
  ASSERT_EQ(sci_index_check_pages(index, other, kTokens.data(), kTokens.size(), 16, nullptr, 0, &r), SCI_OK);
  sci_set_log_callback(nullptr, nullptr);
  sci_layout_free(other);
  ASSERT_EQ(warnings.lines.size(), 2u) << "one per layout";
  EXPECT_NE(warnings.lines[0].find("block size 16 is not the layout's page size 4"), std::string::npos)
      << warnings.lines[0];
  EXPECT_EQ(Stats().block_size_mismatches, 4u);
}

TEST_F(CapiCheckPages, EagleThroughTheCSpec) {
  sci_layout_spec spec = Spec();
  spec.is_eagle = true;
  layout = NewLayout(spec);
  uint8_t hits[2] = {0xEE, 0xEE};
  sci_page_result r = Result();
  // 10 tokens are 9 bigrams: two whole pages of 4.
  ASSERT_EQ(Check(&r, hits, 2), SCI_OK);
  EXPECT_EQ(r.n_pages, 2u);
  EXPECT_EQ(sci_index_check_pages(index, layout, kTokens.data(), 8, 4, hits, 2, &r), SCI_OK);
  EXPECT_EQ(r.n_pages, 1u);  // 7 bigrams
}

// --------------------------------------------- sci_index_check_page_hashes --

using CapiCheckPageHashes = Fixture;

TEST_F(CapiCheckPageHashes, AnswersLikeCheckPages) {
  layout = NewLayout(Spec());
  Store({kHash1 + "_0_k", kHash1 + "_0_v"}, "sglang-hicache:" + kHash1);
  const sci_str hashes[] = {S(kHash0), S(kHash1)};
  uint8_t hits[2] = {0xEE, 0xEE};
  sci_page_result r = Result();
  ASSERT_EQ(sci_index_check_page_hashes(index, layout, hashes, 2, hits, 2, &r), SCI_OK) << LastError();
  EXPECT_EQ(hits[0], 0);
  EXPECT_EQ(hits[1], 1);
  EXPECT_EQ(r.n_pages, 2u);
  EXPECT_EQ(r.total_hits, 1u);
  EXPECT_EQ(r.prefix_tokens, 0u);
  Store({kHash0 + "_0_k", kHash0 + "_0_v"}, "sglang-hicache:" + kHash0);
  ASSERT_EQ(sci_index_check_page_hashes(index, layout, hashes, 2, hits, 2, &r), SCI_OK) << LastError();
  EXPECT_EQ(r.prefix_hits, 2u);
  EXPECT_EQ(r.prefix_tokens, 4u) << "the request's length is not given: its last page may hold its last token";
  r = Result();
  ASSERT_EQ(Check(&r, hits, 2), SCI_OK);  // 10 tokens: two whole pages, then the last token
  EXPECT_EQ(r.prefix_tokens, 8u);
  ASSERT_EQ(sci_index_check_pages(index, layout, kTokens.data(), 8, 4, hits, 2, &r), SCI_OK);
  EXPECT_EQ(r.prefix_hits, 2u);
  EXPECT_EQ(r.prefix_tokens, 4u) << "8 tokens: SGLang computes the last, so the second page does not load";
  ASSERT_EQ(Check(&r, hits, 2), SCI_OK);
  EXPECT_EQ(r.fast_path, 2u);  // verified by the queries before
}

TEST_F(CapiCheckPageHashes, RejectsBadArgumentsAndChecksNothing) {
  layout = NewLayout(Spec());
  const std::string upper = "CF97ADEEDB59E05BFD73A2B4C2A8885708C4F4F70C84C64B27120E72AB733B72";
  const std::string short_hash = kHash0.substr(1);
  uint8_t hits[2] = {0xEE, 0xEE};
  sci_page_result r = Result();
  const sci_str good[] = {S(kHash0), S(kHash1)};
  EXPECT_EQ(sci_index_check_page_hashes(nullptr, layout, good, 2, hits, 2, &r), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_index_check_page_hashes: index is NULL");
  EXPECT_EQ(sci_index_check_page_hashes(index, nullptr, good, 2, hits, 2, &r), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_index_check_page_hashes: layout is NULL");
  EXPECT_EQ(sci_index_check_page_hashes(index, layout, good, 2, hits, 2, nullptr), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_index_check_page_hashes: result is NULL");
  EXPECT_EQ(sci_index_check_page_hashes(index, layout, nullptr, 2, hits, 2, &r), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_index_check_page_hashes: page_hashes is NULL but n_page_hashes is 2");
  EXPECT_EQ(sci_index_check_page_hashes(index, layout, good, 2, hits, 1, &r), SCI_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(sci_index_check_page_hashes(index, layout, good, 2, nullptr, 2, &r), SCI_ERR_INVALID_ARGUMENT);
  for (const sci_str bad : {S(upper), S(short_hash), sci_str{nullptr, 64}}) {
    const sci_str hashes[] = {S(kHash0), bad};
    EXPECT_EQ(sci_index_check_page_hashes(index, layout, hashes, 2, hits, 2, &r), SCI_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(LastError(), "sci_index_check_page_hashes: page_hashes[1] is not 64 lowercase hex characters");
  }
  EXPECT_EQ(hits[0], 0xEE);
  EXPECT_EQ(Stats().queries, 0u);
  EXPECT_EQ(sci_index_check_page_hashes(index, layout, nullptr, 0, nullptr, 0, &r), SCI_OK);
  EXPECT_EQ(r.n_pages, 0u);
}

// -------------------------------------------------- sci_index_check_prefix --

using CapiCheckPrefix = Fixture;

TEST_F(CapiCheckPrefix, CountsTheLeadingRunOnly) {
  layout = NewLayout(Spec());
  size_t prefix = 99;
  ASSERT_EQ(sci_index_check_prefix(index, layout, kTokens.data(), kTokens.size(), 4, &prefix), SCI_OK) << LastError();
  EXPECT_EQ(prefix, 0u);
  Store({kHash1 + "_0_k", kHash1 + "_0_v"}, "sglang-hicache:" + kHash1);
  ASSERT_EQ(sci_index_check_prefix(index, layout, kTokens.data(), kTokens.size(), 4, &prefix), SCI_OK);
  EXPECT_EQ(prefix, 0u);  // page 1 is present, but page 0 is not
  Store({kHash0 + "_0_k", kHash0 + "_0_v"}, "sglang-hicache:" + kHash0);
  ASSERT_EQ(sci_index_check_prefix(index, layout, kTokens.data(), kTokens.size(), 4, &prefix), SCI_OK);
  EXPECT_EQ(prefix, 2u);
  ASSERT_EQ(sci_index_check_prefix(index, layout, kTokens.data(), kTokens.size(), 4, &prefix), SCI_OK);
  EXPECT_EQ(prefix, 2u);
  const sci_stats s = Stats();
  EXPECT_EQ(s.queries, 4u);
  EXPECT_EQ(s.pages_checked, 1u + 1u + 2u + 2u);  // the run plus the miss that ended it
  EXPECT_EQ(s.page_hits, 4u);
  EXPECT_EQ(s.fast_path_hits, 4u);  // 1.4: every hit reads its page's entry
}

TEST_F(CapiCheckPrefix, BlockSizeMismatchIsOkWithZeroPages) {
  layout = NewLayout(Spec());
  Store({kHash0 + "_0_k", kHash0 + "_0_v"}, "sglang-hicache:" + kHash0);
  size_t prefix = 99;
  ASSERT_EQ(sci_index_check_prefix(index, layout, kTokens.data(), kTokens.size(), 8, &prefix), SCI_OK);
  EXPECT_EQ(prefix, 0u);
  ASSERT_EQ(sci_index_check_prefix(index, layout, nullptr, 0, 4, &prefix), SCI_OK);
  EXPECT_EQ(prefix, 0u);
}

TEST_F(CapiCheckPrefix, RejectsBadArgumentsAndWritesNothing) {
  layout = NewLayout(Spec());
  size_t prefix = 99;
  EXPECT_EQ(sci_index_check_prefix(nullptr, layout, kTokens.data(), kTokens.size(), 4, &prefix),
            SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_index_check_prefix: index is NULL");
  EXPECT_EQ(sci_index_check_prefix(index, nullptr, kTokens.data(), kTokens.size(), 4, &prefix),
            SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_index_check_prefix: layout is NULL");
  EXPECT_EQ(sci_index_check_prefix(index, layout, kTokens.data(), kTokens.size(), 4, nullptr),
            SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_index_check_prefix: prefix_pages is NULL");
  EXPECT_EQ(sci_index_check_prefix(index, layout, nullptr, 8, 4, &prefix), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(LastError(), "sci_index_check_prefix: tokens is NULL but n_tokens is 8");
  EXPECT_EQ(prefix, 99u);
  EXPECT_EQ(Stats().queries, 0u);
}

}  // namespace
