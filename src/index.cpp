#include "index.h"

#include <new>

#include "log.h"

namespace sci {

Index::Index(IndexOptions options)
    : max_entries_(options.max_entries == 0 ? IndexOptions::kDefaultMaxEntries : options.max_entries) {}

// ---------------------------------------------------------------- writer --

void Index::ApplyBatch(uint64_t sequence, std::span<const Event> events) {
  absl::MutexLock lock(&apply_mu_);
  if (has_sequence_ && sequence == last_sequence_) {
    counters_.duplicate_batches.Add();
    Logf(LogLevel::kDebug, "duplicate batch %d ignored", sequence);
    return;
  }
  if (has_sequence_ && sequence != last_sequence_ + 1) {
    // Lost batches (or a restarted publisher): what we hold may be stale, and
    // stale means false hits. Start over from this batch.
    counters_.sequence_gaps.Add();
    Logf(LogLevel::kWarn, "sequence gap: expected %d, got %d; index cleared", last_sequence_ + 1, sequence);
    ClearTables();
    counters_.clears.Add();
  }
  try {
    for (const Event& event : events) ApplyEvent(sequence, event);
  } catch (const std::bad_alloc&) {
    // Part of the batch is applied and the rest is lost: the only state we
    // can vouch for is the empty one.
    ClearTables();
    counters_.clears.Add();
    has_sequence_ = false;
    has_sequence_mirror_.store(false, std::memory_order_relaxed);
    Logf(LogLevel::kError, "out of memory applying batch %d; index cleared", sequence);
    throw;
  }
  has_sequence_ = true;
  last_sequence_ = sequence;
  last_sequence_mirror_.store(sequence, std::memory_order_relaxed);
  has_sequence_mirror_.store(true, std::memory_order_relaxed);
  counters_.batches_applied.Add();
}

void Index::Clear() {
  absl::MutexLock lock(&apply_mu_);
  ClearTables();
  counters_.clears.Add();
}

void Index::ApplyEvent(uint64_t sequence, const Event& event) {
  switch (event.kind) {
    case EventKind::kAllCleared:
      ClearTables();
      counters_.clears.Add();
      counters_.events_applied.Add();
      Logf(LogLevel::kInfo, "all objects cleared by the publisher (batch %d)", sequence);
      return;
    case EventKind::kStored:
    case EventKind::kRemoved:
      break;
    default:
      counters_.ignored_events.Add();
      return;
  }
  if (event.object_key.empty()) {
    counters_.ignored_events.Add();
    return;
  }
  const uint64_t seed = TenantSeed(event.tenant_id);
  const Fingerprint key = FingerprintOf(seed, event.object_key);
  if (event.kind == EventKind::kStored) {
    StoreKey(key);
    // A new physical object of the group may be one a verification did not
    // see: the group must be proven again.
    if (!event.group_id.empty()) InvalidateGroup(FingerprintOf(seed, event.group_id));
  } else {
    // The key goes first: a reader that saw it present and tries to verify
    // afterwards must find the group (or the epoch) already changed.
    RemoveKey(key);
    if (!event.group_id.empty()) {
      EraseGroup(FingerprintOf(seed, event.group_id));
    } else {
      // The removed object could belong to any group.
      DropAllVerification();
    }
  }
  counters_.events_applied.Add();
}

bool Index::HasRoom() const {
  return key_count_.load(std::memory_order_relaxed) + group_count_.load(std::memory_order_relaxed) <
         max_entries_;
}

void Index::StoreKey(const Fingerprint& key) {
  KeyShard& shard = key_shards_[ShardOf(key)];
  absl::MutexLock lock(&shard.mu);
  if (shard.keys.contains(key)) return;
  if (!HasRoom()) {
    // Refusing keeps the answer conservative: a key we do not hold can only
    // turn a hit into a miss.
    counters_.capacity_refusals.Add();
    return;
  }
  shard.keys.insert(key);
  key_count_.fetch_add(1, std::memory_order_relaxed);
}

void Index::RemoveKey(const Fingerprint& key) {
  KeyShard& shard = key_shards_[ShardOf(key)];
  absl::MutexLock lock(&shard.mu);
  if (shard.keys.erase(key) > 0) key_count_.fetch_sub(1, std::memory_order_relaxed);
}

void Index::ForgetVerification(const GroupState& state) {
  const uint64_t word = state.verification.word.load(std::memory_order_relaxed);
  if (word != 0 && static_cast<uint32_t>(word >> 32) == CurrentVerifyEpoch()) {
    // Only this (writer) thread changes the epoch, so the count it subtracts
    // from is the one this verification was added to.
    verify_state_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void Index::InvalidateGroup(const Fingerprint& group) {
  GroupShard& shard = group_shards_[ShardOf(group)];
  absl::MutexLock lock(&shard.mu);
  auto it = shard.groups.find(group);
  if (it != shard.groups.end()) {
    ForgetVerification(it->second);
    it->second.verification.word.store(0, std::memory_order_relaxed);
    it->second.generation = next_generation_++;
    return;
  }
  if (!HasRoom()) {
    // Without a group state the page is still answered by its keys; it just
    // never takes the fast path.
    counters_.capacity_refusals.Add();
    return;
  }
  GroupState state;
  state.generation = next_generation_++;
  shard.groups.emplace(group, state);
  group_count_.fetch_add(1, std::memory_order_relaxed);
}

void Index::EraseGroup(const Fingerprint& group) {
  GroupShard& shard = group_shards_[ShardOf(group)];
  absl::MutexLock lock(&shard.mu);
  auto it = shard.groups.find(group);
  if (it == shard.groups.end()) return;
  ForgetVerification(it->second);
  shard.groups.erase(it);
  group_count_.fetch_sub(1, std::memory_order_relaxed);
}

void Index::DropAllVerification() {
  const uint32_t epoch = CurrentVerifyEpoch();
  if (epoch != UINT32_MAX) {
    // New epoch, zero verified groups, in one store.
    verify_state_.store(uint64_t{epoch + 1} << 32, std::memory_order_release);
    return;
  }
  // The epoch wraps (after 4 billion unlabelled removals): words from the
  // old epoch 1 would look current again, so wipe every word. The epoch
  // moves first, so a reader racing with the sweep fails its epoch check.
  verify_state_.store(uint64_t{1} << 32, std::memory_order_release);
  for (GroupShard& shard : group_shards_) {
    absl::MutexLock lock(&shard.mu);
    for (auto& [fingerprint, state] : shard.groups) state.verification.word.store(0, std::memory_order_relaxed);
  }
}

void Index::ClearTables() {
  for (KeyShard& shard : key_shards_) {
    absl::MutexLock lock(&shard.mu);
    key_count_.fetch_sub(shard.keys.size(), std::memory_order_relaxed);
    shard.keys.clear();
  }
  for (GroupShard& shard : group_shards_) {
    absl::MutexLock lock(&shard.mu);
    group_count_.fetch_sub(shard.groups.size(), std::memory_order_relaxed);
    shard.groups.clear();
  }
  DropAllVerification();
  // The batch after a clear starts a new history: it must not count as a gap.
  has_sequence_ = false;
  has_sequence_mirror_.store(false, std::memory_order_relaxed);
}

// ---------------------------------------------------------------- readers --

bool Index::Contains(std::string_view tenant, std::string_view object_key) const {
  return ContainsKey(FingerprintOf(TenantSeed(tenant), object_key));
}

bool Index::ContainsKey(const Fingerprint& key) const {
  const KeyShard& shard = key_shards_[ShardOf(key)];
  absl::ReaderMutexLock lock(&shard.mu);
  return shard.keys.contains(key);
}

GroupProbe Index::ProbeGroup(const Fingerprint& group, LayoutId layout) const {
  const GroupShard& shard = group_shards_[ShardOf(group)];
  absl::ReaderMutexLock lock(&shard.mu);
  auto it = shard.groups.find(group);
  if (it == shard.groups.end()) return GroupProbe{};
  GroupProbe probe;
  probe.exists = true;
  probe.generation = it->second.generation;
  probe.verify_epoch = CurrentVerifyEpoch();
  probe.verified = layout != 0 && it->second.verification.word.load(std::memory_order_acquire) ==
                                      PackVerification(probe.verify_epoch, layout);
  return probe;
}

bool Index::MarkVerified(const Fingerprint& group, const GroupProbe& probe, LayoutId layout) {
  if (!probe.exists || layout == 0) return false;
  GroupShard& shard = group_shards_[ShardOf(group)];
  absl::ReaderMutexLock lock(&shard.mu);
  auto it = shard.groups.find(group);
  // A stored event for the group, or its removal, since the probe: what the
  // caller checked may not be the group's current object set.
  if (it == shard.groups.end() || it->second.generation != probe.generation) return false;
  // An unlabelled removal since the probe: one of the keys may be gone.
  const uint32_t epoch = probe.verify_epoch;
  if (CurrentVerifyEpoch() != epoch) return false;

  const uint64_t desired = PackVerification(epoch, layout);
  std::atomic<uint64_t>& word = it->second.verification.word;
  uint64_t seen = word.load(std::memory_order_acquire);
  do {
    if (seen == desired) return true;
  } while (!word.compare_exchange_weak(seen, desired, std::memory_order_acq_rel));
  const bool was_counted = seen != 0 && static_cast<uint32_t>(seen >> 32) == epoch;
  if (!was_counted) {
    // Count it only in its own epoch: if a bump came in between, the bump
    // already reset the count and this verification is stale anyway.
    uint64_t state = verify_state_.load(std::memory_order_acquire);
    while (static_cast<uint32_t>(state >> 32) == epoch &&
           !verify_state_.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel)) {
    }
  }
  return true;
}

// --------------------------------------------------------------- counters --

Stats Index::GetStats() const {
  Stats s;
  s.keys = key_count_.load(std::memory_order_relaxed);
  s.groups = group_count_.load(std::memory_order_relaxed);
  s.verified_groups = static_cast<uint32_t>(verify_state_.load(std::memory_order_relaxed));
  s.batches_applied = counters_.batches_applied.Get();
  s.events_applied = counters_.events_applied.Get();
  s.duplicate_batches = counters_.duplicate_batches.Get();
  s.sequence_gaps = counters_.sequence_gaps.Get();
  s.clears = counters_.clears.Get();
  s.malformed_messages = counters_.malformed_messages.Get();
  s.ignored_events = counters_.ignored_events.Get();
  s.capacity_refusals = counters_.capacity_refusals.Get();
  s.has_sequence = has_sequence_mirror_.load(std::memory_order_relaxed);
  s.last_sequence = s.has_sequence ? last_sequence_mirror_.load(std::memory_order_relaxed) : 0;
  s.subscriber_connected = counters_.subscriber_connected.load(std::memory_order_relaxed);
  s.subscriber_connects = counters_.subscriber_connects.Get();
  s.subscriber_disconnects = counters_.subscriber_disconnects.Get();
  s.messages_received = counters_.messages_received.Get();
  s.queries = counters_.queries.Get();
  s.pages_checked = counters_.pages_checked.Get();
  s.page_hits = counters_.page_hits.Get();
  s.fast_path_hits = counters_.fast_path_hits.Get();
  return s;
}

}  // namespace sci
