// The shared-cache index: which physical objects are present, which logical
// groups are known and verified, and the sequence cursor that keeps both
// exact. Semantics: docs/index-semantics.md.
//
// Concurrency. One writer at a time (ApplyBatch, Clear; serialised by
// apply_mu_) and any number of readers share one writer-preferring
// reader/writer lock over all tables. The writer holds it for one event at a
// time; a reader for one lookup, or for the keys of one page (ContainsAll),
// so neither side ever waits for the other's whole batch or query. The
// tables are split into shards so that a table's rehash (growth, or clean-up
// of removed slots) stalls readers for 1/64th of the index, not all of it.
// Counters are atomics, readable at any moment. These rules are checked by
// clang's -Wthread-safety (abseil's annotations below; scripts/test.sh).
//
// Verification. A group's verification word packs (verify epoch, layout id).
// It counts only while its epoch is the index's current one, so "drop every
// group's verification" (an unlabelled removal, a clear) is one epoch bump
// instead of a walk over every group.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/base/thread_annotations.h"
#include "index/annotated_mutex.h"
#include "index/event.h"
#include "index/fingerprint.h"
#include "index/table_lock.h"
#include "index/stats.h"

namespace sci {

// Identifies the layout (key derivation) that verified a group. 0 = none.
using LayoutId = uint32_t;

struct IndexOptions {
  static constexpr uint64_t kDefaultMaxEntries = uint64_t{1} << 25;  // 33,554,432
  uint64_t max_entries = kDefaultMaxEntries;  // keys + groups
};

// What a query learned about a group before checking its keys.
struct GroupProbe {
  bool verified = false;     // verified for the asking layout: a hit, no key check needed
  bool exists = false;       // the group is known (it can be marked verified)
  uint64_t generation = 0;   // changes whenever the group is invalidated
  uint32_t verify_epoch = 0; // epoch the verification would be made in
};

class Index {
 public:
  explicit Index(IndexOptions options = {});
  Index(const Index&) = delete;
  Index& operator=(const Index&) = delete;

  // ---- writer side (any thread; calls are serialised) ----

  // Applies one batch under `sequence`: duplicate ignored, gap clears first.
  void ApplyBatch(uint64_t sequence, std::span<const Event> events) ABSL_LOCKS_EXCLUDED(apply_mu_, tables_lock_);

  // Forgets keys, groups and the cursor; counts a clear.
  void Clear() ABSL_LOCKS_EXCLUDED(apply_mu_, tables_lock_);

  // ---- reader side (any number of threads, concurrently with the writer) ----

  bool Contains(std::string_view tenant, std::string_view object_key) const ABSL_LOCKS_EXCLUDED(tables_lock_);
  bool ContainsKey(const Fingerprint& key) const ABSL_LOCKS_EXCLUDED(tables_lock_);
  // Whether every key is present, looked up under one lock hold with the
  // table lines of all of them prefetched first, so their cache misses
  // overlap. Callers keep `keys` short (one page's worth).
  bool ContainsAll(std::span<const Fingerprint> keys) const ABSL_LOCKS_EXCLUDED(tables_lock_);

  // Reads a group's state for `layout`. Fingerprints come from FingerprintOf
  // with the tenant's seed.
  GroupProbe ProbeGroup(const Fingerprint& group, LayoutId layout) const ABSL_LOCKS_EXCLUDED(tables_lock_);

  // Marks `group` verified for `layout` after a query proved every key of it
  // present, but only if nothing invalidated the group since `probe` was
  // taken (same generation, same verify epoch). Returns whether it marked.
  bool MarkVerified(const Fingerprint& group, const GroupProbe& probe, LayoutId layout)
      ABSL_LOCKS_EXCLUDED(tables_lock_);

  // ---- counters ----

  Stats GetStats() const;
  Counters& counters() { return counters_; }
  const Counters& counters() const { return counters_; }
  uint64_t max_entries() const { return max_entries_; }

 private:
  static constexpr size_t kShardBits = 6;
  static constexpr size_t kShards = size_t{1} << kShardBits;

  struct VerificationWord {
    // Only the writer moves group states (rehash, with tables_lock_ held
    // exclusively); readers update the word in place under the shared lock.
    std::atomic<uint64_t> word{0};
    VerificationWord() = default;
    VerificationWord(const VerificationWord& other) : word(other.word.load(std::memory_order_relaxed)) {}
    VerificationWord& operator=(const VerificationWord& other) {
      word.store(other.word.load(std::memory_order_relaxed), std::memory_order_relaxed);
      return *this;
    }
  };

  struct GroupState {
    uint64_t generation = 0;  // written only with tables_lock_ held exclusively
    VerificationWord verification;
  };

  using KeyTable = absl::flat_hash_set<Fingerprint, FingerprintHash>;
  using GroupTable = absl::flat_hash_map<Fingerprint, GroupState, FingerprintHash>;

  // Shards use the high half of the fingerprint; the tables hash the low half.
  static size_t ShardOf(const Fingerprint& f) { return static_cast<size_t>(f.high >> (64 - kShardBits)); }

  static uint64_t PackVerification(uint32_t epoch, LayoutId layout) {
    return (uint64_t{epoch} << 32) | layout;
  }
  uint32_t CurrentVerifyEpoch() const {
    return static_cast<uint32_t>(verify_state_.load(std::memory_order_acquire) >> 32);
  }

  // ApplyEvent takes tables_lock_ itself; the helpers below it expect it
  // held exclusively.
  void ApplyEvent(uint64_t sequence, const Event& event) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_)
      ABSL_LOCKS_EXCLUDED(tables_lock_);
  void StoreKey(const Fingerprint& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  void RemoveKey(const Fingerprint& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  void InvalidateGroup(const Fingerprint& group) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  void EraseGroup(const Fingerprint& group) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  void DropAllVerification() ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  void ForgetVerification(const GroupState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  // Takes tables_lock_ shard by shard.
  void ClearTables() ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) ABSL_LOCKS_EXCLUDED(tables_lock_);
  void ResetCursor() ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_);
  bool HasRoom() const;
  // Touches the slots an event will update, without tables_lock_: the writer
  // (apply_mu_) is the only thread that changes the tables, so it may read
  // them unlocked. The analysis cannot know that; see the definition.
  void WarmUp(const Fingerprint& key, const Fingerprint* group) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_)
      ABSL_NO_THREAD_SAFETY_ANALYSIS;

  const uint64_t max_entries_;

  // Guards every table below: see "Concurrency" above.
  mutable TableLock tables_lock_;
  std::array<KeyTable, kShards> key_shards_ ABSL_GUARDED_BY(tables_lock_);
  std::array<GroupTable, kShards> group_shards_ ABSL_GUARDED_BY(tables_lock_);

  // Sizes, kept beside the tables so stats and capacity checks need no lock.
  std::atomic<uint64_t> key_count_{0};
  std::atomic<uint64_t> group_count_{0};

  // High 32 bits: current verify epoch (starts at 1). Low 32 bits: how many
  // groups hold a verification of that epoch. One word, so that a bump
  // resets the count in the same store that invalidates the verifications.
  std::atomic<uint64_t> verify_state_{uint64_t{1} << 32};

  // Serialises writers; guards the cursor and the generation counter.
  // Taken before tables_lock_, never after it.
  AnnotatedMutex apply_mu_ ABSL_ACQUIRED_BEFORE(tables_lock_);
  bool has_sequence_ ABSL_GUARDED_BY(apply_mu_) = false;
  uint64_t last_sequence_ ABSL_GUARDED_BY(apply_mu_) = 0;
  uint64_t next_generation_ ABSL_GUARDED_BY(apply_mu_) = 1;
  // Mirrors of the cursor for lock-free stats.
  std::atomic<bool> has_sequence_mirror_{false};
  std::atomic<uint64_t> last_sequence_mirror_{0};

  Counters counters_;
};

}  // namespace sci
