// The hot path allocates nothing once warm. This binary replaces the global
// operator new / delete with counting versions, warms a query up, then
// asserts that repeated queries -- fast path, exact path, misses, eagle,
// trailing pools, caller-supplied hashes, the prefix query, through the C entry points and the
// C++ core -- allocate nothing at all.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <numeric>
#include <string>
#include <vector>

#include "index/index.h"
#include "sglang/layout.h"
#include "sglang/page_hash.h"
#include "sglang/page_query.h"
#include "shared_cache_index.h"

#include "replaced_operator_new.h"

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

void* sci_test::AllocateForTest(std::size_t size, std::size_t alignment) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return HeapAllocate(size, alignment);
}

namespace {

constexpr uint32_t kPageSize = 64;
constexpr size_t kPages = 169;
constexpr int kRounds = 20;

// Batches are numbered in one series so that the next batch of any index
// is never a gap.
uint64_t g_sequence = 0;

sci_str S(const std::string& s) { return sci_str{s.data(), s.size()}; }

// Stores the objects of every page of `tokens` for `spec`, through the C API.
// With `labelled` each stored event carries the page's group id (so queries
// can verify it); without, every query must go the exact path.
void StoreRequest(sci_index* index, const sci::LayoutSpec& spec, const std::vector<uint32_t>& tokens, bool labelled,
                  size_t skip_page = SIZE_MAX) {
  std::string error;
  const auto layout = sci::Layout::Create(spec, &error);
  ASSERT_NE(layout, nullptr) << error;
  const std::vector<std::string> hashes = sci::PageHashesHex(tokens, spec.page_size, spec.is_eagle);
  std::vector<std::string> keys, groups;
  for (size_t page = 0; page < hashes.size(); ++page) {
    if (page == skip_page) continue;
    for (const std::string& key : layout->KeysFor(hashes[page], page, hashes.size())) {
      keys.push_back(key);
      groups.push_back(labelled ? layout->GroupId(hashes[page]) : std::string());
    }
  }
  std::vector<sci_event> events;
  for (size_t i = 0; i < keys.size(); ++i) {
    events.push_back(sci_event{SCI_EVENT_STORED, S(keys[i]), S(groups[i]), sci_str{nullptr, 0}, sci_str{"cpu", 3}});
  }
  ASSERT_EQ(sci_index_apply_events(index, ++g_sequence, events.data(), events.size()), SCI_OK) << sci_last_error();
}

// The C spec of `spec` (no pools: the pooled case goes through the core).
sci_layout* NewLayout(const sci::LayoutSpec& spec) {
  sci_layout_spec c{};
  c.struct_size = sizeof c;
  c.page_size = spec.page_size;
  c.tp_size = spec.tp_size;
  c.pp_size = spec.pp_size;
  c.is_mla_model = spec.is_mla_model;
  c.is_eagle = spec.is_eagle;
  sci_layout* layout = nullptr;
  EXPECT_EQ(sci_layout_new(&c, &layout), SCI_OK) << sci_last_error();
  return layout;
}

sci::LayoutSpec Tp8(bool eagle = false) {
  sci::LayoutSpec spec;
  spec.page_size = kPageSize;
  spec.tp_size = 8;
  spec.is_eagle = eagle;
  return spec;
}

std::vector<uint32_t> Tokens(bool eagle = false) {
  std::vector<uint32_t> tokens(kPages * kPageSize + (eagle ? 1 : 0));
  std::iota(tokens.begin(), tokens.end(), 7u);
  return tokens;
}

struct Handles {
  Handles() { EXPECT_EQ(sci_index_new(nullptr, &index), SCI_OK); }
  ~Handles() {
    sci_layout_free(layout);
    sci_index_free(index);
  }
  sci_index* index = nullptr;
  sci_layout* layout = nullptr;
};

// Allocations made by kRounds calls of `query` after two warm-up calls.
// `before_each` runs before every call, outside the count.
template <typename Query, typename Prepare>
long AllocationsOnceWarm(Query query, Prepare before_each) {
  for (int i = 0; i < 2; ++i) {
    before_each();
    query();
  }
  long allocations = 0;
  for (int i = 0; i < kRounds; ++i) {
    before_each();
    const long before = g_allocations.load();
    query();
    allocations += g_allocations.load() - before;
  }
  return allocations;
}
template <typename Query>
long AllocationsOnceWarm(Query query) {
  return AllocationsOnceWarm(query, [] {});
}

TEST(PageQueryAllocation, CountingAllocatorSeesAllocations) {
  const long before = g_allocations.load();
  auto* p = new std::string(100, 'x');
  delete p;
  EXPECT_GT(g_allocations.load(), before);
}

TEST(PageQueryAllocation, FastPathAllocatesNothing) {
  Handles h;
  const std::vector<uint32_t> tokens = Tokens();
  StoreRequest(h.index, Tp8(), tokens, /*labelled=*/true);
  h.layout = NewLayout(Tp8());
  std::vector<uint8_t> hits(kPages);
  sci_page_result result{};
  result.struct_size = sizeof result;
  const long allocations = AllocationsOnceWarm([&] {
    sci_index_check_pages(h.index, h.layout, tokens.data(), tokens.size(), kPageSize, hits.data(), hits.size(),
                          &result);
  });
  EXPECT_EQ(allocations, 0);
  EXPECT_EQ(result.total_hits, kPages);
  EXPECT_EQ(result.fast_path, kPages);
}

TEST(PageQueryAllocation, PrefixQueryAllocatesNothing) {
  Handles h;
  const std::vector<uint32_t> tokens = Tokens();
  StoreRequest(h.index, Tp8(), tokens, /*labelled=*/true, /*skip_page=*/100);
  h.layout = NewLayout(Tp8());
  size_t prefix = 0;
  const long allocations = AllocationsOnceWarm([&] {
    sci_index_check_prefix(h.index, h.layout, tokens.data(), tokens.size(), kPageSize, &prefix);
  });
  EXPECT_EQ(allocations, 0);
  EXPECT_EQ(prefix, 100u);
}

TEST(PageQueryAllocation, ExactPathAllocatesNothing) {
  Handles h;
  const std::vector<uint32_t> tokens = Tokens();
  StoreRequest(h.index, Tp8(), tokens, /*labelled=*/false);  // no group: never verified
  h.layout = NewLayout(Tp8());
  std::vector<uint8_t> hits(kPages);
  sci_page_result result{};
  result.struct_size = sizeof result;
  const long allocations = AllocationsOnceWarm([&] {
    sci_index_check_pages(h.index, h.layout, tokens.data(), tokens.size(), kPageSize, hits.data(), hits.size(),
                          &result);
  });
  EXPECT_EQ(allocations, 0);
  EXPECT_EQ(result.total_hits, kPages);
  EXPECT_EQ(result.fast_path, kPages);  // 1.4: every hit reads its page's entry
}

TEST(PageQueryAllocation, VerifyingAndMissingAllocateNothing) {
  Handles h;
  const std::vector<uint32_t> tokens = Tokens();
  StoreRequest(h.index, Tp8(), tokens, /*labelled=*/true, /*skip_page=*/3);
  h.layout = NewLayout(Tp8());
  std::vector<uint8_t> hits(kPages);
  sci_page_result result{};
  result.struct_size = sizeof result;
  // Each round stores the pages' objects again first (the writer between
  // queries; in 1.3 it sent every group back to the exact path).
  const long allocations = AllocationsOnceWarm(
      [&] {
        sci_index_check_pages(h.index, h.layout, tokens.data(), tokens.size(), kPageSize, hits.data(), hits.size(),
                              &result);
      },
      [&] { StoreRequest(h.index, Tp8(), tokens, /*labelled=*/true, /*skip_page=*/3); });
  EXPECT_EQ(allocations, 0);
  EXPECT_EQ(result.total_hits, kPages - 1);
  EXPECT_EQ(result.prefix_hits, 3u);
  EXPECT_EQ(result.fast_path, kPages - 1);  // 1.4: every hit reads its page's entry
}

TEST(PageQueryAllocation, EagleAllocatesNothing) {
  Handles h;
  const std::vector<uint32_t> tokens = Tokens(/*eagle=*/true);
  StoreRequest(h.index, Tp8(true), tokens, /*labelled=*/false);
  h.layout = NewLayout(Tp8(true));
  std::vector<uint8_t> hits(kPages);
  sci_page_result result{};
  result.struct_size = sizeof result;
  const long allocations = AllocationsOnceWarm([&] {
    sci_index_check_pages(h.index, h.layout, tokens.data(), tokens.size(), kPageSize, hits.data(), hits.size(),
                          &result);
  });
  EXPECT_EQ(allocations, 0);
  EXPECT_EQ(result.total_hits, kPages);
}

TEST(PageQueryAllocation, CallerSuppliedHashesAllocateNothing) {
  Handles h;
  const std::vector<uint32_t> tokens = Tokens();
  StoreRequest(h.index, Tp8(), tokens, /*labelled=*/false);
  h.layout = NewLayout(Tp8());
  const std::vector<std::string> hashes = sci::PageHashesHex(tokens, kPageSize, false);
  std::vector<sci_str> c_hashes;
  for (const std::string& hash : hashes) c_hashes.push_back(S(hash));
  std::vector<uint8_t> hits(kPages);
  sci_page_result result{};
  result.struct_size = sizeof result;
  const long allocations = AllocationsOnceWarm([&] {
    sci_index_check_page_hashes(h.index, h.layout, c_hashes.data(), c_hashes.size(), hits.data(), hits.size(), &result);
  });
  EXPECT_EQ(allocations, 0);
  EXPECT_EQ(result.total_hits, kPages);
}

TEST(PageQueryAllocation, TrailingPoolsAllocateNothing) {
  sci::Index index(sci::SGLangIndexOptions());
  sci::LayoutSpec spec;
  spec.page_size = kPageSize;
  spec.extra_backend_tag = "tag";
  spec.key_prefix = "model-a";
  spec.pools = {sci::PoolSpec{{"__kv", "__idx"}, sci::HitPolicy::kAllPages, 0},
                sci::PoolSpec{{"__swa"}, sci::HitPolicy::kTrailingPages, 4}};
  std::string error;
  const auto layout = sci::Layout::Create(spec, &error);
  ASSERT_NE(layout, nullptr) << error;
  const std::vector<uint32_t> tokens = Tokens();
  const std::vector<std::string> hashes = sci::PageHashesHex(tokens, kPageSize, false);
  std::vector<std::string> keys, groups;
  for (size_t page = 0; page < hashes.size(); ++page) {
    for (const std::string& key : layout->KeysFor(hashes[page], page, hashes.size())) {
      keys.push_back(key);
      groups.push_back(layout->GroupId(hashes[page]));
    }
  }
  std::vector<sci::Event> events;
  for (size_t i = 0; i < keys.size(); ++i)
    events.push_back(sci::Event{sci::EventKind::kStored, keys[i], groups[i], {}, {}});
  index.ApplyBatch(1, events);
  std::vector<uint8_t> hits(kPages);
  sci::PageQueryResult result;
  const long allocations =
      AllocationsOnceWarm([&] { result = sci::CheckPages(index, *layout, tokens, kPageSize, hits); });
  EXPECT_EQ(allocations, 0);
  EXPECT_EQ(result.total_hits, kPages);
  EXPECT_EQ(result.fast_path, kPages);
}

}  // namespace
