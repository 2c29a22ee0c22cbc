// An allocation that fails anywhere in the write path leaves no false hit
// (index-semantics.md, "Exception safety"). This binary replaces the global
// operator new with one that fails the N-th allocation made while it is
// armed. A scenario -- batches of every kind, tables growing, tails of a
// pool layout interned, a tenant cleared, a snapshot loaded, its pages
// adopted -- is run once for every N it allocates at, each time in a fresh
// index, and after every step (disarmed) every answer is checked against a
// model of what is truly present: the index may have lost keys (a failed
// batch clears it), but it may never report a key or a page the model does
// not hold, and its key count must agree with its own answers.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <new>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "index/index.h"
#include "sglang/layout.h"
#include "sglang/page_hash.h"
#include "sglang/page_query.h"

#include "replaced_operator_new.h"

namespace {
long g_fail_at = 0;     // the armed allocation that fails (1-based, counted over a whole scenario)
long g_allocations = 0; // allocations made while armed, in this scenario
bool g_armed = false;   // the writer is running
bool g_failed = false;  // the armed allocation did fail
}  // namespace

void* sci_test::AllocateForTest(std::size_t size, std::size_t alignment) {
  if (g_armed && ++g_allocations == g_fail_at) {
    g_failed = true;
    return nullptr;
  }
  return HeapAllocate(size, alignment);
}

namespace sci {
namespace {

constexpr uint32_t kPageSize = 4;

// Arms the failure for the life of the object (the writer's calls only:
// queries and the model run disarmed).
class Armed {
 public:
  Armed() { g_armed = true; }
  ~Armed() { g_armed = false; }
};

// One layout's pages, their keys and groups.
struct Pages {
  Pages(const LayoutSpec& spec, size_t n_pages, uint32_t first_token) {
    std::string error;
    layout = Layout::Create(spec, &error);
    EXPECT_NE(layout, nullptr) << error;
    tokens.resize(n_pages * kPageSize);
    std::iota(tokens.begin(), tokens.end(), first_token);
    const std::vector<std::string> hashes = PageHashesHex(tokens, kPageSize, false);
    for (size_t page = 0; page < n_pages; ++page) {
      keys.push_back(layout->KeysFor(hashes[page], page, n_pages));
      groups.push_back(layout->GroupId(hashes[page]));
    }
  }
  std::unique_ptr<const Layout> layout;
  std::vector<uint32_t> tokens;
  std::vector<std::vector<std::string>> keys;
  std::vector<std::string> groups;
  std::string tenant;
};

LayoutSpec Mha(uint32_t tp, std::string tenant = {}) {
  LayoutSpec spec;
  spec.page_size = kPageSize;
  spec.tp_size = tp;
  spec.tenant_id = std::move(tenant);
  return spec;
}

// Tails longer than a short string's inline buffer: interning one allocates.
LayoutSpec LongTailPool() {
  LayoutSpec spec = Mha(1);
  spec.pools = {PoolSpec{{"_first_long_pool_tail", "_second_long_pool_tail", "_third_long_pool_tail",
                          "_fourth_long_pool_tail"},
                         HitPolicy::kAllPages, 0}};
  return spec;
}

class Scenario {
 public:
  Scenario()
      : tp8_(Mha(8), 4, 100),
        pool_(LongTailPool(), 3, 500),
        tp1_(Mha(1), 3, 900),
        tenant_a_(Mha(8, "tenant-a"), 2, 1300),
        snapshot_(Mha(8), 2, 1700) {
    tenant_a_.tenant = "tenant-a";
  }

  // Runs every step with the N-th armed allocation failing; checks every
  // answer after each step. Returns whether the failure happened.
  bool Run(long fail_at) {
    fail_at_ = g_fail_at = fail_at;
    g_allocations = 0;
    g_failed = false;
    // Pages under their groups, one batch each: tables grow, tails are numbered.
    for (size_t page = 0; page < 4; ++page) Store(tp8_, page, /*labelled=*/true);
    // The pool's long tails: the third page lacks its second key (and has
    // three: enough for a summary entry).
    Store(pool_, 0, true);
    Store(pool_, 1, true);
    Store(pool_, 2, true, /*skip_key=*/1);
    // Removals, with and without their label.
    Remove(tp8_, 1, 3, true);
    Remove(pool_, 0, 2, false);
    // Pages under no group (stray keys).
    for (size_t page = 0; page < 3; ++page) Store(tp1_, page, /*labelled=*/false);
    // A second tenant, then its clear.
    Store(tenant_a_, 0, true);
    Store(tenant_a_, 1, true);
    Apply({Event{EventKind::kTenantCleared, {}, {}, "tenant-a", {}}});
    // A snapshot (keys under no group), then queries of its pages.
    LoadSnapshot();
    Query();
    Check("snapshot");
    // New batches after whatever failed: a lingering corruption shows here.
    Store(pool_, 2, true, /*skip_key=*/1);
    Store(tp8_, 1, true);
    Remove(snapshot_, 0, 5, false);
    Apply({Event{EventKind::kAllCleared, {}, {}, {}, {}}});
    Store(tp8_, 2, true);
    Store(pool_, 1, true);
    return g_failed;
  }

 private:
  using Key = std::pair<std::string, std::string>;  // (tenant, key)

  void Apply(const std::vector<Event>& events) {
    // The model first: it is the truth whatever the index makes of it.
    for (const Event& event : events) {
      switch (event.kind) {
        case EventKind::kStored: present_.insert({std::string(event.tenant_id), std::string(event.object_key)}); break;
        case EventKind::kRemoved: present_.erase({std::string(event.tenant_id), std::string(event.object_key)}); break;
        case EventKind::kTenantCleared:
          std::erase_if(present_, [&](const Key& key) { return key.first == event.tenant_id; });
          break;
        case EventKind::kAllCleared: present_.clear(); break;
        default: break;
      }
    }
    for (const Event& event : events) named_.insert({std::string(event.tenant_id), std::string(event.object_key)});
    try {
      Armed armed;
      index_.ApplyBatch(sequence_++, events);
    } catch (const std::bad_alloc&) {
      // The index cleared itself (its cursor too): the next batch starts anew.
    }
    Check("batch " + std::to_string(sequence_ - 1));
  }

  void Store(const Pages& pages, size_t page, bool labelled, size_t skip_key = SIZE_MAX) {
    std::vector<Event> events;
    for (size_t k = 0; k < pages.keys[page].size(); ++k) {
      if (k == skip_key) continue;
      events.push_back(Event{EventKind::kStored, pages.keys[page][k], labelled ? pages.groups[page] : std::string_view(),
                             pages.tenant, "cpu"});
    }
    Apply(events);
  }

  void Remove(const Pages& pages, size_t page, size_t key, bool labelled) {
    Apply({Event{EventKind::kRemoved, pages.keys[page][key], labelled ? pages.groups[page] : std::string_view(),
                 pages.tenant, "cpu"}});
  }

  void LoadSnapshot() {
    std::vector<std::string_view> keys;
    for (const auto& page : snapshot_.keys) {
      for (const std::string& key : page) {
        keys.push_back(key);
        present_.insert({"", key});
        named_.insert({"", key});
      }
    }
    try {
      Armed armed;
      index_.LoadKeys(keys);
    } catch (const std::bad_alloc&) {
      // Part of the snapshot is loaded: fewer keys, never others.
    }
    Check("snapshot");
  }

  // Every page of every layout, by both queries (disarmed).
  void Query() {
    for (const Pages* pages : {&tp8_, &pool_, &tp1_, &tenant_a_, &snapshot_}) {
      std::vector<uint8_t> hits(pages->keys.size());
      CheckPages(index_, *pages->layout, pages->tokens, kPageSize, hits);
      size_t leading = 0;
      while (leading < hits.size() && hits[leading]) ++leading;
      for (size_t page = 0; page < hits.size(); ++page) {
        if (hits[page]) EXPECT_TRUE(WholeInModel(*pages, page)) << where_ << ": false page hit " << page;
      }
      const size_t prefix = CheckPrefix(index_, *pages->layout, pages->tokens, kPageSize).prefix_hits;
      for (size_t page = 0; page < prefix; ++page) {
        EXPECT_TRUE(WholeInModel(*pages, page)) << where_ << ": false prefix hit " << page;
      }
    }
  }

  bool WholeInModel(const Pages& pages, size_t page) const {
    for (const std::string& key : pages.keys[page]) {
      if (!present_.contains({pages.tenant, key})) return false;
    }
    return true;
  }

  // No key or page the model lacks; the key count agrees with the answers.
  void Check(const std::string& where) {
    where_ = "fail_at " + std::to_string(fail_at_) + ", after " + where;
    uint64_t answered_present = 0;
    for (const Key& key : named_) {
      const bool present = index_.Contains(key.first, key.second);
      answered_present += present ? 1 : 0;
      if (present) EXPECT_TRUE(present_.contains(key)) << where_ << ": false key hit " << key.first << "/" << key.second;
    }
    EXPECT_EQ(index_.GetStats().keys, answered_present) << where_;
    Query();
    // Twice: the first query may have verified groups or asked for adoptions.
    Query();
  }

  Index index_{SGLangIndexOptions()};
  Pages tp8_, pool_, tp1_, tenant_a_, snapshot_;
  std::set<Key> present_, named_;
  uint64_t sequence_ = 1;
  long fail_at_ = 0;
  std::string where_;
};

TEST(WritePathAllocationFailure, NoFalseHitWhicheverAllocationFails) {
  long runs = 0;
  for (long fail_at = 1; fail_at < 100000; ++fail_at) {
    Scenario scenario;
    const bool failed = scenario.Run(fail_at);
    ++runs;
    if (::testing::Test::HasFailure()) break;  // the first N that breaks is the one to read
    if (!failed) break;                        // past the scenario's last allocation
  }
  // The scenario allocates: at least its tables, tails, refs and snapshot.
  EXPECT_GT(runs, 20);
  RecordProperty("allocations_failed_in_turn", static_cast<int>(runs - 1));
}

}  // namespace
}  // namespace sci
