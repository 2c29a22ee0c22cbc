#include "index/index.h"

#include <new>

#include "common/log.h"

namespace sci {
namespace {

constexpr size_t kPageHashHex = 64;  // an SGLang page hash: 64 lowercase hex characters
constexpr std::string_view kSglangGroupNamespace = "sglang-hicache:";

bool IsLowerHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

// Whether erasing a removal's labelled group withdraws every verification the
// removed key took part in, so that the other groups may keep theirs.
//
// Verifications come from page queries only, and every key a page query
// checks holds its page hash: "<prefix><hash><suffix>", where the layout's
// group id is "sglang-hicache:<tag_><hash>". A key with no 64-character hex
// run was never checked by a page query, so its label is trusted as given.
// A page key's label is trusted only when it is exactly the group id of the
// key's own page: one unambiguous hash in the key, and the label is the
// namespace, the key's prefix and that hash. Anything else -- a label of
// another page (a publisher bug, a corrupted message), of the same page
// under another tag, or the keys of a layout whose key_prefix differs from
// its tag -- drops every verification: a miss on the next query, where
// trusting the label would leave the key's page verified with a key gone (a
// false hit on the fast path).
bool LabelCoversKey(std::string_view group_id, std::string_view object_key) {
  // The one hex run of exactly kPageHashHex characters, if that is all there is.
  size_t hash_at = std::string_view::npos;
  for (size_t i = 0; i < object_key.size();) {
    if (!IsLowerHex(object_key[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < object_key.size() && IsLowerHex(object_key[end])) ++end;
    if (end - i > kPageHashHex || (end - i == kPageHashHex && hash_at != std::string_view::npos)) return false;
    if (end - i == kPageHashHex) hash_at = i;
    i = end;
  }
  if (hash_at == std::string_view::npos) return true;
  const std::string_view prefix = object_key.substr(0, hash_at);
  const std::string_view hash = object_key.substr(hash_at, kPageHashHex);
  return group_id.size() == kSglangGroupNamespace.size() + prefix.size() + kPageHashHex &&
         group_id.substr(0, kSglangGroupNamespace.size()) == kSglangGroupNamespace &&
         group_id.substr(kSglangGroupNamespace.size(), prefix.size()) == prefix &&
         group_id.substr(kSglangGroupNamespace.size() + prefix.size()) == hash;
}

}  // namespace

Index::Index(IndexOptions options)
    : max_entries_(options.max_entries == 0 ? IndexOptions::kDefaultMaxEntries : options.max_entries) {}

// ---------------------------------------------------------------- writer --

void Index::ApplyBatch(uint64_t sequence, std::span<const Event> events) {
  WriterLock apply(apply_mu_);
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
  WriterLock apply(apply_mu_);
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
  // Hash outside the lock: readers wait only for the table updates.
  const uint64_t seed = TenantSeed(event.tenant_id);
  const Fingerprint key = FingerprintOf(seed, event.object_key);
  const bool labelled = !event.group_id.empty();
  const Fingerprint group = labelled ? FingerprintOf(seed, event.group_id) : Fingerprint{};
  const bool label_covers_key =
      labelled && event.kind == EventKind::kRemoved && LabelCoversKey(event.group_id, event.object_key);

  // The writer is the only thread that changes the tables, so it may read
  // them without the lock. Looking the slots up first brings them into cache:
  // the lock is then held for in-cache updates only, and readers wait a
  // fraction of a DRAM round trip per event instead of several.
  WarmUp(key, labelled ? &group : nullptr);

  WriterLock lock(tables_lock_);
  if (event.kind == EventKind::kStored) {
    StoreKey(key);
    // A new physical object of the group may be one a verification did not
    // see: the group must be proven again.
    if (labelled) InvalidateGroup(group);
  } else {
    RemoveKey(key);
    if (labelled) EraseGroup(group);
    // Without a label (or with one that does not name the key's page) the
    // removed object could belong to any group.
    if (!label_covers_key) DropAllVerification();
  }
  counters_.events_applied.Add();
}

void Index::WarmUp(const Fingerprint& key, const Fingerprint* group) const {
  // volatile: the lookups are wanted for their loads, not their answers.
  volatile bool sink = key_shards_[ShardOf(key)].contains(key);
  if (group != nullptr) sink = group_shards_[ShardOf(*group)].contains(*group);
  (void)sink;
}

bool Index::HasRoom() const {
  return key_count_.load(std::memory_order_relaxed) + group_count_.load(std::memory_order_relaxed) <
         max_entries_;
}

void Index::StoreKey(const Fingerprint& key) {
  KeyTable& keys = key_shards_[ShardOf(key)];
  if (keys.contains(key)) return;
  if (!HasRoom()) {
    // Refusing keeps the answer conservative: a key we do not hold can only
    // turn a hit into a miss.
    counters_.capacity_refusals.Add();
    return;
  }
  keys.insert(key);
  key_count_.fetch_add(1, std::memory_order_relaxed);
}

void Index::RemoveKey(const Fingerprint& key) {
  if (key_shards_[ShardOf(key)].erase(key) > 0) key_count_.fetch_sub(1, std::memory_order_relaxed);
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
  GroupTable& groups = group_shards_[ShardOf(group)];
  auto it = groups.find(group);
  if (it != groups.end()) {
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
  groups.emplace(group, state);
  group_count_.fetch_add(1, std::memory_order_relaxed);
}

void Index::EraseGroup(const Fingerprint& group) {
  GroupTable& groups = group_shards_[ShardOf(group)];
  auto it = groups.find(group);
  if (it == groups.end()) return;
  ForgetVerification(it->second);
  groups.erase(it);
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
  // old epoch 1 would look current again, so wipe every word.
  verify_state_.store(uint64_t{1} << 32, std::memory_order_release);
  for (GroupTable& groups : group_shards_) {
    for (auto& [fingerprint, state] : groups) state.verification.word.store(0, std::memory_order_relaxed);
  }
}

void Index::ClearTables() {
  // Shard by shard, so readers wait for one shard's release at a time.
  for (size_t i = 0; i < kShards; ++i) {
    WriterLock lock(tables_lock_);
    key_count_.fetch_sub(key_shards_[i].size(), std::memory_order_relaxed);
    key_shards_[i].clear();
    group_count_.fetch_sub(group_shards_[i].size(), std::memory_order_relaxed);
    group_shards_[i].clear();
  }
  {
    WriterLock lock(tables_lock_);
    DropAllVerification();
  }
  ResetCursor();
}

void Index::ResetCursor() {
  // The batch after a clear starts a new history: it must not count as a gap.
  has_sequence_ = false;
  has_sequence_mirror_.store(false, std::memory_order_relaxed);
}

// ---------------------------------------------------------------- readers --

bool Index::Contains(std::string_view tenant, std::string_view object_key) const {
  return ContainsKey(FingerprintOf(TenantSeed(tenant), object_key));
}

bool Index::ContainsKey(const Fingerprint& key) const {
  ReaderLock lock(tables_lock_);
  return key_shards_[ShardOf(key)].contains(key);
}

bool Index::ContainsAll(std::span<const Fingerprint> keys) const {
  ReaderLock lock(tables_lock_);
  for (const Fingerprint& key : keys) key_shards_[ShardOf(key)].prefetch(key);
  for (const Fingerprint& key : keys) {
    if (!key_shards_[ShardOf(key)].contains(key)) return false;
  }
  return true;
}

GroupProbe Index::ProbeGroup(const Fingerprint& group, LayoutId layout) const {
  ReaderLock lock(tables_lock_);
  const GroupTable& groups = group_shards_[ShardOf(group)];
  auto it = groups.find(group);
  if (it == groups.end()) return GroupProbe{};
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
  ReaderLock lock(tables_lock_);
  GroupTable& groups = group_shards_[ShardOf(group)];
  auto it = groups.find(group);
  // A stored event for the group, or its removal, since the probe: what the
  // caller checked may not be the group's current object set.
  if (it == groups.end() || it->second.generation != probe.generation) return false;
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
    // The epoch cannot move while we hold the lock shared, so the count we
    // add to is the one this verification belongs to.
    verify_state_.fetch_add(1, std::memory_order_acq_rel);
  }
  return true;
}

// --------------------------------------------------------------- counters --

Stats Index::GetStats() const {
  Stats s;
#define SCI_STAT_COPY_LIVE(name, type, kind, keeper, help) SCI_STAT_IN_COUNTERS_##keeper(s.name = counters_.name.Get();)
  SCI_STAT_LIST(SCI_STAT_COPY_LIVE)
#undef SCI_STAT_COPY_LIVE
  // The rows kept by TABLES.
  s.keys = key_count_.load(std::memory_order_relaxed);
  s.groups = group_count_.load(std::memory_order_relaxed);
  s.verified_groups = static_cast<uint32_t>(verify_state_.load(std::memory_order_relaxed));
  s.has_sequence = has_sequence_mirror_.load(std::memory_order_relaxed);
  s.last_sequence = s.has_sequence ? last_sequence_mirror_.load(std::memory_order_relaxed) : 0;
  return s;
}

}  // namespace sci
