// The fixture of the fresh-cold-prompt benchmarks (cold_prompts_bench.cpp
// at 1M foreign keys, scale_bench.cpp at every index size): kPrompts
// distinct 169-page tp8 prompts, all stored with their groups, among
// foreign tp8 pages; unrelated prompts nobody stored; the evictions; and
// the paired loop (SHA-256 of the pages alone, then the query). What each
// piece is for, and why it is done this way, is told at the top of
// cold_prompts_bench.cpp.
#pragma once

#include <benchmark/benchmark.h>
#include <malloc.h>

#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_support.h"
#include "cache_eviction.h"
#include "query_fixture.h"
#include "sglang/layout.h"
#include "sglang/page_query.h"

namespace sci::bench {

using Clock = std::chrono::steady_clock;

constexpr size_t kPages = 169;
constexpr size_t kPrompts = 48;          // >= 41 distinct prompts per pass
constexpr size_t kUnrelatedPrompts = 256;
constexpr size_t kStoredHalf = 84;  // ends_at_page:84
constexpr size_t kKeysPerTp8Page = 16;
// The keys the prompts' objects take in the index (tp8: 16 a page).
constexpr uint64_t kPromptKeys = uint64_t{kPrompts} * kPages * kKeysPerTp8Page;
// SHA-256 of the first `pages` pages of `tokens`, chained, the way the
// query computes them, with nothing else around it.
inline PageDigest HashPagesAlone(const std::vector<uint32_t>& tokens, size_t pages) {
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(tokens.data());
  constexpr size_t kPageBytes = kPageSize * sizeof(uint32_t);
  PageDigest digest{};
  for (size_t page = 0; page < pages; ++page) {
    SHA256_CTX ctx;
    SHA256_Init(&ctx);
    if (page > 0) SHA256_Update(&ctx, digest.data(), digest.size());
    SHA256_Update(&ctx, bytes + page * kPageBytes, kPageBytes);
    SHA256_Final(digest.data(), &ctx);
  }
  return digest;
}

class ColdFixture {
 public:
  // What the index keeps of media (the tier benchmarks): nothing (the
  // object rule, every key on cpu), or per medium with half the keys on
  // disk only: every odd page of the prompts, the second half of the
  // foreign pages.
  enum class Media { kNone, kHalfOnDisk };

  // An index of the prompts' objects (kPromptKeys keys) and `foreign_keys`
  // keys of other prompts' tp8 pages.
  explicit ColdFixture(uint64_t foreign_keys, Media media = Media::kNone)
      : layout_(LayoutNamed("tp8")), half_on_disk_(media == Media::kHalfOnDisk) {
    std::fprintf(stderr, "building the cold-prompt index (%llu foreign keys, %zu prompts)...\n",
                 static_cast<unsigned long long>(foreign_keys), kPrompts);
    for (size_t i = 0; i < kPrompts; ++i) {
      prompts_.push_back(PromptTokens(7'000'000 + i, kPages));
      prompt_hashes_.push_back(PageHashesHex(prompts_.back(), kPageSize, false));
      const std::vector<std::string>& hashes = prompt_hashes_.back();
      std::vector<std::string> keys, groups;
      for (size_t page = 0; page < kPages; ++page) {
        keys.push_back(layout_->KeysFor(hashes[page], page, kPages).front());
        groups.push_back(layout_->GroupId(hashes[page]));
      }
      restore_keys_.push_back(std::move(keys));
      restore_groups_.push_back(std::move(groups));
    }
    for (size_t i = 0; i < kUnrelatedPrompts; ++i) unrelated_.push_back(PromptTokens(8'000'000 + i, kPages));
    for (size_t i = 0; i < kPrompts; ++i) {
      // Tails may repeat (kPrompts may exceed kUnrelatedPrompts); the
      // prompts still differ from their first page on.
      std::vector<uint32_t> tokens = unrelated_[i % unrelated_.size()];
      std::copy_n(prompts_[i].begin(), kStoredHalf * kPageSize, tokens.begin());
      half_stored_.push_back(std::move(tokens));
    }
    // Only the index from here on: what it takes is measured (bytes_per_key
    // in scale_bench), the prompts above are made before it.
    malloc_trim(0);
    peak_reset_ = ResetPeakResident();
    const uint64_t before = ResidentBytes();
    // Room for every key and group, and for the churn a benchmark adds.
    const uint64_t entries = (kPromptKeys + foreign_keys) / kKeysPerTp8Page * (kKeysPerTp8Page + 1);
    index_ = std::make_unique<Index>(
        SGLangIndexOptions(IndexOptions{.max_entries = std::max(uint64_t{4} << 20, entries + entries / 4),
                                        .residency = half_on_disk_ ? Residency::kPerMedium : Residency::kObject}));
    for (size_t i = 0; i < kPrompts; ++i) {
      required_keys_ = StoreRequestObjects(*index_, *layout_, prompt_hashes_[i], kPages, &sequence_, half_on_disk_);
    }
    if (half_on_disk_) {
      const uint64_t half = foreign_keys / 2 / kKeysPerTp8Page * kKeysPerTp8Page;
      ApplyForeignPages(*index_, 0, half, /*stored=*/true, /*salt=*/77, &sequence_, "cpu");
      ApplyForeignPages(*index_, half / kKeysPerTp8Page, foreign_keys - half, /*stored=*/true, /*salt=*/77, &sequence_,
                        "disk");
    } else {
      ApplyForeignPages(*index_, 0, foreign_keys, /*stored=*/true, /*salt=*/77, &sequence_);
    }
    index_bytes_ = ResidentBytes() - before;
    index_peak_bytes_ = peak_reset_ ? PeakResidentBytes() - before : 0;
  }

  Index& index() { return *index_; }
  const Layout& layout() const { return *layout_; }
  const std::vector<uint32_t>& prompt(size_t i) const { return prompts_[i % prompts_.size()]; }
  const std::vector<uint32_t>& unrelated(size_t i) const { return unrelated_[i % unrelated_.size()]; }
  // Prompt `i`'s first kStoredHalf pages, then pages nobody stored.
  const std::vector<uint32_t>& half_stored(size_t i) const { return half_stored_[i % half_stored_.size()]; }
  size_t required_keys() const { return required_keys_; }
  // What the index took from the process once filled (RSS delta), and at
  // its peak during the fill (0 if the peak could not be reset).
  uint64_t index_bytes() const { return index_bytes_; }
  uint64_t index_peak_bytes() const { return index_peak_bytes_; }
  uint64_t* sequence() { return &sequence_; }

  // Verifies every prompt's groups from a thread other than the caller's:
  // the caller's memo never sees these prompts.
  void VerifyElsewhere() {
    std::thread verifier([this] {
      std::vector<uint8_t> hits(kPages);
      for (const auto& tokens : prompts_) CheckPages(*index_, *layout_, tokens, kPageSize, hits);
    });
    verifier.join();
  }

  // Drops the verification of prompt `i`'s groups: each page's first key
  // is stored again under its group (a new object of the group), in
  // 64-event batches. The keys stay present under the same groups.
  void DropVerification(size_t i) {
    const std::vector<std::string>& keys = restore_keys_[i % kPrompts];
    const std::vector<std::string>& groups = restore_groups_[i % kPrompts];
    std::vector<Event> batch;
    for (size_t first = 0; first < keys.size(); first += 64) {
      batch.clear();
      for (size_t k = first; k < std::min(keys.size(), first + 64); ++k) {
        // (keys[k] is page k's first key: stored again on its own medium.)
        batch.push_back(Event{EventKind::kStored, keys[k], groups[k], {}, PageMedium(k, half_on_disk_)});
      }
      index_->ApplyBatch(sequence_++, batch);
    }
  }
  // ... of every prompt's groups.
  void DropVerification() {
    for (size_t i = 0; i < kPrompts; ++i) DropVerification(i);
  }

  // Every prompt's keys as a resync leaves them: removed (their groups and
  // summary entries go with them), then loaded as a snapshot loads keys, with
  // no group. StoreGroupsAgain undoes it.
  void LoadAsSnapshot() {
    for (size_t i = 0; i < kPrompts; ++i) {
      RemovePromptKeys(i);
      const std::vector<std::string> keys = PromptKeys(i);
      const std::vector<std::string_view> views(keys.begin(), keys.end());
      index_->LoadKeys(views);
    }
  }
  void StoreGroupsAgain() {
    for (size_t i = 0; i < kPrompts; ++i) {
      RemovePromptKeys(i);  // else the summary entries made now would see keys of no group
      StoreRequestObjects(*index_, *layout_, prompt_hashes_[i], kPages, &sequence_, half_on_disk_);
    }
  }

  // evict8m, dram512m (cache_eviction.h).
  void Evict(Eviction eviction) { evictor_.Evict(eviction); }

 private:
  std::vector<std::string> PromptKeys(size_t i) const {
    std::vector<std::string> keys;
    for (size_t page = 0; page < kPages; ++page) {
      for (std::string& key : layout_->KeysFor(prompt_hashes_[i][page], page, kPages)) keys.push_back(std::move(key));
    }
    return keys;
  }
  void RemovePromptKeys(size_t i) {
    const std::vector<std::string> keys = PromptKeys(i);
    std::vector<Event> batch;
    for (size_t first = 0; first < keys.size(); first += 64) {
      batch.clear();
      for (size_t k = first; k < std::min(keys.size(), first + 64); ++k) {
        batch.push_back(Event{EventKind::kRemoved, keys[k], {}, {}, {}});  // no medium: the whole key, under any rule
      }
      index_->ApplyBatch(sequence_++, batch);
    }
  }

  std::unique_ptr<const Layout> layout_;
  const bool half_on_disk_;
  std::unique_ptr<Index> index_;
  std::vector<std::vector<uint32_t>> prompts_;
  std::vector<std::vector<std::string>> prompt_hashes_;
  std::vector<std::vector<uint32_t>> unrelated_;
  std::vector<std::vector<uint32_t>> half_stored_;
  // Per prompt: each page's first key and its group (DropVerification).
  std::vector<std::vector<std::string>> restore_keys_, restore_groups_;
  size_t required_keys_ = 0;
  uint64_t index_bytes_ = 0, index_peak_bytes_ = 0;
  bool peak_reset_ = false;
  uint64_t sequence_ = 1;
  CacheEvictor evictor_;
};

// Per-call times of a paired pass, in µs: SHA-256 of the pages alone, and
// the query.
struct PairedTimes {
  std::vector<double> hashing, query;
};

// One paired call, the step every cold benchmark shares: takes prompt
// `tokens_of(i)`; evicts (see Eviction), times SHA-256 of its first
// `hashed_pages` pages alone; evicts again, clears the thread's memo and
// times `query(tokens)`, whose answer `right(result)` checks; then calls
// `after(i)`, untimed. Appends both times to `times`; returns the query's
// time in seconds, negative if the answer was not what the workload's name
// says.
template <typename TokensOf, typename Query, typename Right, typename After>
double PairedCall(ColdFixture& fixture, size_t i, Eviction evict, size_t hashed_pages, TokensOf& tokens_of,
                  Query& query, Right& right, After& after, PairedTimes* times) {
  const std::vector<uint32_t>& tokens = tokens_of(i);
  fixture.Evict(evict);
  const auto t0 = Clock::now();
  benchmark::DoNotOptimize(HashPagesAlone(tokens, hashed_pages));
  const auto t1 = Clock::now();
  fixture.Evict(evict);
  PageDigestMemo::ForThisThread()->Clear();
  const auto t2 = Clock::now();
  const PageQueryResult r = query(tokens);
  const auto t3 = Clock::now();
  after(i);
  times->hashing.push_back(Micros(t1 - t0));
  times->query.push_back(Micros(t3 - t2));
  const double seconds = std::chrono::duration<double>(t3 - t2).count();
  return right(r) ? seconds : -seconds;
}

// The loop of a cold benchmark: iteration i is PairedCall(i), its query's
// time the iteration's (manual) time. False (and the benchmark skipped) if
// any answer was not what the workload's name says.
template <typename TokensOf, typename Query, typename Right, typename After>
bool RunPaired(benchmark::State& state, ColdFixture& fixture, Eviction evict, size_t hashed_pages,
               TokensOf tokens_of, Query query, Right right, After after, PairedTimes* times) {
  size_t next = 0;
  bool all_right = true;
  for (auto _ : state) {
    const double seconds = PairedCall(fixture, next++, evict, hashed_pages, tokens_of, query, right, after, times);
    state.SetIterationTime(std::abs(seconds));
    all_right &= seconds >= 0;
  }
  if (!all_right) state.SkipWithError("unexpected answer: the workload is not what its name says");
  return all_right;
}

// Verification as a workload needs it: all groups verified by another
// thread (fastpath), or none. Without, each prompt's verification is
// dropped again right after its query (see the top of cold_prompts_bench.cpp).
inline std::function<void(size_t)> PrepareVerification(ColdFixture& fixture, bool fast_path) {
  fixture.DropVerification();
  if (fast_path) {
    fixture.VerifyElsewhere();
    return [](size_t) {};
  }
  return [&fixture](size_t i) { fixture.DropVerification(i); };
}

}  // namespace sci::bench
