#include "index/index.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <new>

#include "common/check.h"
#include "common/log.h"

namespace sci {
Index::Index(IndexOptions options)
    : max_entries_(options.max_entries == 0 ? IndexOptions::kDefaultMaxEntries : options.max_entries),
      residency_(options.residency),
      tiers_(std::move(options.tiers)),
      head_group_prefix_(std::move(options.head_group_prefix)),
      digest_key_separator_(std::move(options.digest_key_separator)) {
  // The map's media are numbered first, in its order, so that medium number
  // i is its i-th name (MediumTiers::media) for the index's life; names the
  // map does not have are numbered as they come, at the slowest tier.
  const std::vector<std::pair<std::string, uint8_t>>& named = tiers_.media();
  for (const auto& [name, tier] : named) media_names_.BitOf(name);
  tier_of_media_[0] = tiers_.slowest();  // unknown media
  for (unsigned media = 1; media < tier_of_media_.size(); ++media) {
    uint8_t fastest = tiers_.slowest();
    for (size_t bit = 0; bit < named.size(); ++bit) {
      if ((media >> bit) & 1u) fastest = std::min(fastest, named[bit].second);
    }
    tier_of_media_[media] = fastest;
  }
#if SCI_DCHECK_ENABLED
  shadow_ = std::make_unique<ObjectStore>();  // I46
#endif
}

// ---------------------------------------------------------------- writer --

void Index::RequireEventContinuity() {
  WriterLock apply(apply_mu_);
  cursor_.RequireContinuity();
}

BatchOutcome Index::ApplyBatch(uint64_t sequence, std::span<const Event> events, SequenceRules rules,
                               const BatchEventIds& ids) {
  WriterLock apply(apply_mu_);
  BatchTally tally;  // what the events did; added to the counters once, below
  BatchOutcome outcome;
  const uint64_t epoch_before = clear_epoch_.load(std::memory_order_relaxed);
  // Everything in the try, logging included: a batch that fails anywhere,
  // even before its first event, is lost with its removals, and the cursor
  // would not show it.
  try {
    // What queries asked for since the last batch, in stream order: before
    // this batch, whatever it brings (a duplicate or a gap included).
    AdoptRequestedGroupsLocked();
    // Judged before anything changes; logged from the position it was judged against.
    const StreamPosition was = cursor_.position();
    const StreamCursor::Verdict verdict = cursor_.Judge(sequence, !events.empty(), ids, rules);
    outcome.sequence = verdict.sequence;
    const bool withhold_stores = verdict.withhold_stores;
    switch (verdict.sequence) {
      case BatchOutcome::Sequence::kDuplicate:
        counters_.duplicate_batches.Add();
        Logf(LogLevel::kDebug, "duplicate batch %d ignored", sequence);
        return outcome;
      case BatchOutcome::Sequence::kGap:
        // Lost batches (or a restarted publisher): what we hold may be stale,
        // and stale means false hits. Start over from this batch.
        counters_.sequence_gaps.Add();
        Logf(LogLevel::kWarn, "sequence gap: expected %d, got %d; index cleared", was.last_sequence + 1, sequence);
        ClearTables();
        CountClear();
        break;
      case BatchOutcome::Sequence::kRestart:
        if (ids.known && was.has_event_id) {
          Logf(LogLevel::kWarn,
               "publisher restart: batch %d follows %d, but its first event id is %d, not %d; index cleared",
               sequence, was.last_sequence, ids.first, was.last_event_id + 1);
        } else {
          Logf(LogLevel::kWarn,
               "publisher restart suspected: batch %d follows %d after a reconnect, and no event ids show it is the "
               "same publisher; index cleared",
               sequence, was.last_sequence);
        }
        ClearTables();
        CountClear();
        counters_.restarts_suspected.Add();  // after the clear: whoever sees it sees the index cleared
        break;
      case BatchOutcome::Sequence::kFirst:
      case BatchOutcome::Sequence::kContinued:
        break;
    }
    uint64_t withheld = 0;
    for (const Event& event : events) {
      // What the stream shows, withheld events included.
      if (event.generation != PublisherGeneration::kUnknown) tally.generation = event.generation;
      if ((withhold_stores || deferring_) && event.kind == EventKind::kStored && !event.object_key.empty()) {
        // The run's first batch drops its stores; a deferral keeps them.
        if (!withhold_stores && deferring_) (void)deferred_.Add(event);
        ++withheld;
        continue;
      }
      ApplyEvent(sequence, event, tally);
    }
    AddTally(tally);
    if (withheld > 0) {
      counters_.stores_withheld.Add(withheld);
      Logf(LogLevel::kInfo, "batch %d: %d stored events withheld (%s)", sequence, withheld,
           withhold_stores ? "it begins a run after a possible loss" : "deferred: a resync's catch-up is not anchored");
    }
  } catch (const std::bad_alloc&) {
    // Part of the batch is applied and the rest is lost: the only state we
    // can vouch for is the empty one. (What was applied is still counted.)
    AddTally(tally);
    ClearTables();
    CountClear();
    Logf(LogLevel::kError, "out of memory applying batch %d; index cleared", sequence);
    throw;
  }
  cursor_.Advance(sequence, !events.empty(), ids);
  counters_.batches_applied.Add();
#if SCI_DCHECK_ENABLED
  {
    ReaderLock lock(tables_lock_);
    CheckShadowCount();
  }
#endif
  outcome.cleared = clear_epoch_.load(std::memory_order_relaxed) != epoch_before;
  return outcome;
}

void Index::CountClear() {
  counters_.clears.Add();
  clear_epoch_.fetch_add(1, std::memory_order_release);
}

void Index::Clear() {
  WriterLock apply(apply_mu_);
  ClearTables();
  CountClear();
}

void Index::Conceal() {
  WriterLock apply(apply_mu_);
  // Concealed before the tables are touched: a reader that takes the lock
  // after any of the changes below sees the concealment (the lock orders them).
  concealed_.store(true, std::memory_order_relaxed);
  ClearTables();
}

void Index::Reveal() {
  WriterLock apply(apply_mu_);
  concealed_.store(false, std::memory_order_relaxed);
}

void Index::ResumeAt(const Cursor& cursor) {
  WriterLock apply(apply_mu_);
  cursor_.ResumeAt(cursor);
}

Index::Cursor Index::cursor() const {
  WriterLock apply(apply_mu_);
  return cursor_.position();
}

void Index::DeferStores() {
  WriterLock apply(apply_mu_);
  deferring_ = true;
}

void Index::EndDeferral(bool apply) {
  WriterLock writer(apply_mu_);
  deferring_ = false;
  if (!apply) {
    deferred_.Clear();
    return;
  }
  BatchTally tally;
  try {
    // Each key's last store, in no order: no two are of one key.
    for (const auto& [id, stored] : deferred_) ApplyEvent(cursor_.position().last_sequence, DeferredStores::AsEvent(stored), tally);
    deferred_.Clear();
  } catch (const std::bad_alloc&) {
    // As for a batch half applied: only the empty state can be vouched for.
    AddTally(tally);
    ClearTables();
    CountClear();
    Logf(LogLevel::kError, "out of memory applying the stores a resync deferred; index cleared");
    throw;
  }
  AddTally(tally);
}

void Index::LoadKeys(std::span<const std::string_view> keys) {
  WriterLock apply(apply_mu_);
  const uint64_t seed = TenantSeed({});
  for (std::string_view object_key : keys) {
    const KeyName key = NameKey(seed, object_key);
    // A split snapshot key is a stray (no group): its count's slot is
    // fetched beside the tables' lines (one more miss a key, otherwise:
    // resync 16% slower).
    if (key.split) PrefetchStraySlot(HeadGroupOf(key));
    WarmUp(key, nullptr);
    MakeRoom(key, nullptr);
    {
      WriterLock lock(tables_lock_);
      StoreKey(key, nullptr, Fingerprint{});  // no group: an exact-path hit, a stray until adopted
    }
    WarnIfTailNumbersRanOut();
  }
#if SCI_DCHECK_ENABLED
  ReaderLock lock(tables_lock_);
  CheckShadowCount();
#endif
}

void Index::AddTally(BatchTally& tally) {
  if (tally.events_applied != 0) counters_.events_applied.Add(tally.events_applied);
  if (tally.removals_per_medium != 0) counters_.removals_per_medium.Add(tally.removals_per_medium);
  if (tally.removals_whole_key != 0) counters_.removals_whole_key.Add(tally.removals_whole_key);
  if (tally.residency_mismatches != 0) counters_.residency_mismatches.Add(tally.residency_mismatches);
  if (tally.generation != PublisherGeneration::kUnknown) {
    counters_.stream_generation.Set(static_cast<uint64_t>(tally.generation));
  }
  tally = {};  // added once, whatever throws after
}

void Index::ApplyEvent(uint64_t sequence, const Event& event, BatchTally& tally) {
  switch (event.kind) {
    case EventKind::kAllCleared:
      ClearTables();
      CountClear();
      ++tally.events_applied;
      Logf(LogLevel::kInfo, "all objects cleared by the publisher (batch %d)", sequence);
      return;
    case EventKind::kTenantCleared:
      deferred_.ClearTenant(event.tenant_id);
      ClearTenant(TenantSeed(event.tenant_id));
      counters_.tenant_clears.Add();
      ++tally.events_applied;
      Logf(LogLevel::kInfo, "tenant '%s' cleared by the publisher (batch %d)",
           event.tenant_id.empty() ? std::string_view("default") : event.tenant_id, sequence);
      return;
    case EventKind::kStored:
    case EventKind::kRemoved:
      break;
    default:
      counters_.ignored_events.Add();
      return;
  }
  if (event.object_key.empty() || event.object_key.size() > kMaxObjectKeyBytes) {
    counters_.ignored_events.Add();
    return;
  }
  // Hash outside the lock: readers wait only for the table updates.
  const uint64_t seed = TenantSeed(event.tenant_id);
  const KeyName key = NameKey(seed, event.object_key);
  const bool labelled = !event.group_id.empty();
  const Fingerprint group = labelled ? FingerprintOf(seed, event.group_id) : Fingerprint{};
  const Fingerprint group_head =
      labelled && event.kind == EventKind::kStored ? HeadNamedBy(seed, event.group_id, key) : Fingerprint{};

  // The writer is the only thread that changes the tables, so it may read
  // them without the lock. Looking the slots up first brings them into cache:
  // the lock is then held for in-cache updates only, and readers wait a
  // fraction of a DRAM round trip per event instead of several.
  WarmUp(key, labelled ? &group : nullptr);
  if (event.kind == EventKind::kStored) MakeRoom(key, labelled ? &group : nullptr);
  // Under the object rule every key's media stay unknown (0). So do those
  // a first-generation master names (1.3.0): it evicts memory and keeps the
  // disk copy without an event, so a `stored cpu` proves no tier; the key
  // counts at the slowest tier and falls to any removal.
  const bool per_medium = residency_ == Residency::kPerMedium;
  const bool media_known = per_medium && event.generation != PublisherGeneration::kFirst;
  const MediaSet medium = media_known ? media_names_.BitOf(event.medium) : 0;
  const bool removal = event.kind == EventKind::kRemoved;
  if (removal && !deferred_.empty()) deferred_.Remove(event.tenant_id, event.object_key);
  // A first-generation master announces `removed` once no replica is left,
  // whatever medium it names: under any residency option such a removal
  // drops the whole key (issue #35; 1.2 kept it if another medium held it).
  const bool first_generation_removal = removal && event.generation == PublisherGeneration::kFirst;
  const bool per_medium_removal = removal && per_medium && !first_generation_removal && medium != 0;
  // The stream contradicts the option: per-medium on a first-generation
  // stream (which the line above makes safe), or the object rule on a
  // second-generation one (safe, but it drops keys another medium holds).
  const bool mismatch = removal && (per_medium ? first_generation_removal
                                               : event.generation == PublisherGeneration::kSecond);

  {
    WriterLock lock(tables_lock_);
    if (event.kind == EventKind::kStored) {
      StoreKey(key, labelled ? &group : nullptr, group_head, medium);
    } else if (per_medium_removal && KeptOnAnotherMedium(key, medium)) {
      // Still present: neither the key nor any group changes (a verified
      // group keeps its fast path while every key is on some medium).
      counters_.medium_removals_kept.Add();
    } else {
      RemoveKey(key, labelled ? &group : nullptr);
    }
  }
  if (removal) ++(per_medium_removal ? tally.removals_per_medium : tally.removals_whole_key);
  if (mismatch) ++tally.residency_mismatches;
  ++tally.events_applied;
  // Logged with the table lock released: a log callback may query.
  if (event.kind == EventKind::kStored) WarnIfTailNumbersRanOut();
  if (mismatch) WarnOfResidencyMismatch(first_generation_removal);
}

void Index::WarnOfResidencyMismatch(bool first_generation_removal) {
  if (first_generation_removal) {
    if (residency_mismatch_warning_.First()) {
      Logf(LogLevel::kWarn,
           "residency per-medium, but the stream is first-generation (its events' dp_rank is nil): its removals "
           "mean no replica is left and drop the whole key (residency_mismatches counts them)");
    }
  } else if (residency_mismatch_note_.First()) {
    Logf(LogLevel::kInfo,
         "the stream is second-generation (per-medium events), and the index runs the object rule: a removal "
         "from one medium drops a key another medium still holds (a miss); SCI_RESIDENCY_PER_MEDIUM keeps it");
  }
}

Index::KeyName Index::NameKey(uint64_t tenant_seed, std::string_view object_key) const {
  KeyName name;
  KeySplit split;
  name.key = FingerprintOf(tenant_seed, object_key, &split);
  name.tenant_seed = tenant_seed;
  if (split.at != kNoFingerprintSplit) {
    name.split = true;
    name.head = split.head;
    name.tail_bytes = object_key.substr(split.at);
    name.tail = TailId(name.tail_bytes);
    name.head_bytes = object_key.substr(0, split.at);
  }
  name.digest_ended = EventHashDigests::DigestOfKey(object_key, digest_key_separator_, &name.digest);
  name.object_key = object_key;
  return name;
}

void Index::WarmUp(const KeyName& key, const Fingerprint* group) const {
  const PackedKey packed(key.key);
  const KeyTable& keys = key_shards_[ShardOf(packed)];
  // volatile: the lookups are wanted for their loads, not their answers.
  volatile bool sink = false;
  const KeyEntry* entry = keys.find(packed);
  if (entry != nullptr && entry->group() != kNoGroup) {
    const Fingerprint& current = refs_[entry->group()].group;
    sink = groups_.contains(PackedKey(current));
  }
  if (group != nullptr) sink = groups_.contains(PackedKey(*group));
  if (key.split) sink = page_tails_.contains(PackedKey(key.head));
  (void)sink;
}

namespace {

// Swaps `grown` into `table` under `lock`; the old bucket array (now in
// `grown`) is freed after the lock is released.
template <typename Table>
void SwapIn(TableLock& lock, Table& table, Table grown) {
  WriterLock hold(lock);
  table.swap(grown);
}

}  // namespace

void Index::MakeRoom(const KeyName& key, const Fingerprint* group) {
  KeyTable& keys = key_shards_[ShardOf(key.key)];
  if (keys.full()) SwapIn(tables_lock_, keys, keys.Grown());
  if (group != nullptr && groups_.full()) SwapIn(tables_lock_, groups_, groups_.Grown());
  // Only a store under a group can add a summary entry (AddTail).
  if (key.split && group != nullptr && page_tails_.full()) SwapIn(tables_lock_, page_tails_, page_tails_.Grown());
}

void Index::ReserveKeys(uint64_t keys) {
  WriterLock apply(apply_mu_);
  try {
    ReserveKeyTables(std::min(keys, max_entries_));
  } catch (const std::bad_alloc&) {
    Logf(LogLevel::kWarn, "out of memory reserving room for %d keys; the tables grow as keys come", keys);
  }
}

void Index::ReserveKeyTables(uint64_t keys) {
  // Keys spread evenly over the shards by their fingerprints: each gets
  // about a kShards-th, give or take a few standard deviations.
  const uint64_t per_shard = keys / kShards + keys / kShards / 64 + 1024;
  for (KeyTable& shard : key_shards_) {
    if (!shard.holds(per_shard)) SwapIn(tables_lock_, shard, shard.Reserved(per_shard));
  }
}

bool Index::HasRoom() const {
  return key_count_.load(std::memory_order_relaxed) + group_count_.load(std::memory_order_relaxed) <
         max_entries_;
}

void Index::AdoptRequestedGroups() {
  if (!adoption_queue_.maybe_waiting()) return;  // the subscriber asks after every wake-up: no lock for nothing
  WriterLock apply(apply_mu_);
  AdoptRequestedGroupsLocked();
}

void Index::AdoptRequestedGroupsLocked() {
  if (!adoption_queue_.maybe_waiting()) return;
  try {
    adoption_queue_.TakeAll(adopting_);
    for (const AdoptionQueue::Request& request : adopting_->Requests()) Adopt(request, adopting_->KeysOf(request));
  } catch (const std::bad_alloc&) {
    // Growing the group table failed before it changed anything: an
    // adoption only saves lookups, so the pages stay on the exact path and
    // the batch that follows is applied as ever.
    Logf(LogLevel::kWarn, "out of memory adopting snapshot pages; they stay on the exact path");
  }
}

bool Index::ReadyToAdopt(const Fingerprint& group, std::span<const Fingerprint> keys) {
  // The query's proof is old news by now: what counts is the tables as they
  // are, between two batches. Only this thread changes them, so reading them
  // unlocked here is reading what the locked update will see (as WarmUp).
  // An adoption saves lookups; it is never worth refusing a key for: at the
  // bound it is skipped, uncounted (capacity_refusals counts lost entries).
  if (!HasRoom() || concealed_.load(std::memory_order_relaxed) || groups_.contains(PackedKey(group))) return false;
  for (const Fingerprint& key : keys) {
    const PackedKey packed(key);
    const KeyEntry* entry = key_shards_[ShardOf(packed)].find(packed);
    if (entry == nullptr || entry->group() != kNoGroup) return false;
  }
  if (groups_.full()) SwapIn(tables_lock_, groups_, groups_.Grown());
  return true;
}

void Index::Adopt(const AdoptionQueue::Request& request, std::span<const Fingerprint> keys) {
  if (request.layout == 0 || !ReadyToAdopt(request.group, keys)) return;
  WriterLock lock(tables_lock_);
  GroupState* state = AcquireGroup(request.group, request.group_named_by_head ? request.head : Fingerprint{});
  if (state == nullptr) return;  // no ref left
  for (const Fingerprint& key : keys) {
    const PackedKey packed(key);
    KeyEntry* entry = key_shards_[ShardOf(packed)].find(packed);
    if (entry->group() == state->ref) continue;  // a key the request named twice
    entry->set_group(state->ref);
    AttachKey(*state, TierOfMedia(entry->media()));
    // A stray under no group until now; under its head's group, no longer
    // (the request's keys are the head's: the query derived them from it).
    if (request.group_named_by_head) strays_.Remove(request.group, TenantTagOf(key));
  }
  // The summary entry of the keys' head, if any, said they were under no
  // group: it is worked out again.
  if (request.has_head) {
    if (PageTails* tails = page_tails_.find(PackedKey(request.head))) {
      tails->group = PageTails::kMixedGroups;
      SummariseAgainIfWhole(*tails, request.tenant_seed, request.head, *state);
    }
  }
  // Verified as a key check would verify it: every key the layout needs is
  // present and stored under the group, and nothing changed since.
  state->verification.word.store(PackVerification(CurrentVerifyEpoch(), request.layout), std::memory_order_release);
  verify_state_.fetch_add(1, std::memory_order_acq_rel);
  counters_.groups_adopted.Add();
}

void Index::StoreKey(const KeyName& key, const Fingerprint* group, const Fingerprint& group_head,
                     MediaSet medium) {
  const MediaSet stored_medium = medium;  // for the shadow, which applies the rule itself
  const PackedKey packed(key.key);
  KeyTable& keys = key_shards_[ShardOf(packed)];
  KeyEntry* entry = keys.find(packed);
  const bool was_stray = entry != nullptr && IsStray(key, entry->group());
  if (entry == nullptr) {
    if (!HasRoom()) {
      // Refusing keeps the answer conservative: a key we do not hold can
      // only turn a hit into a miss. The group still learns that it has a
      // new object it has not seen.
      counters_.capacity_refusals.Add();
      if (group != nullptr) {
        if (GroupState* state = FindGroup(*group)) Invalidate(*state);
      }
      return;
    }
    // First, as it may fail to allocate: then nothing has changed.
    if (key.digest_ended) event_digests_.Add(key.digest, TenantTagOf(key.key));
    entry = keys.insert_absent(packed, KeyEntry{});
    key_count_.fetch_add(1, std::memory_order_relaxed);
    CountKeyAtTier(TierOfMedia(0), true);  // unknown media, until set below
    ++keys_by_tag_[TenantTagOf(key.key)];
  } else if (medium != 0 && entry->media() != 0) {
    medium |= entry->media();  // one more medium holds it
  }
  // A store with its medium unknown leaves the key's media unknown, which
  // any removal drops; one with a known medium makes it the key's known
  // media (a key stored on "cpu" is there until "cpu" is removed, whatever
  // its other media).
  const uint8_t was_tier = TierOfMedia(entry->media());
  entry->set_media(medium);
  // Mirrored as soon as the key table holds the key and its media: what
  // follows changes groups and tails only, and may throw (a review found a
  // failed group or tail allocation leaving the shadow a key behind).
  ShadowWrite([&](ObjectStore& shadow) {
    shadow.Store(key.tenant_seed, key.object_key, stored_medium);
    return true;
  });
  const uint8_t tier = TierOfMedia(medium);
  if (tier != was_tier) {
    CountKeyAtTier(was_tier, false);
    CountKeyAtTier(tier, true);
  }
  // A new physical object of the group may be one a verification did not
  // see: the group must be proven again (AcquireGroup invalidates it). The
  // group the key leaves, even if it is the same one, loses a key it was
  // verified with.
  // (AcquireGroup changes the group table only: `entry` stays valid.)
  const GroupRef previous = entry->group();
  GroupState* next = group != nullptr ? AcquireGroup(*group, group_head) : nullptr;
  const GroupRef next_ref = next != nullptr ? next->ref : kNoGroup;
  if (previous != next_ref) {
    entry->set_group(next_ref);
    if (next != nullptr) AttachKey(*next, tier);
    // (`next` keeps a key, so this erases another group: an erase moves nothing.)
    if (previous != kNoGroup) DetachKey(previous, was_tier);
  } else if (previous != kNoGroup && tier != was_tier) {
    Retier(previous, was_tier, tier);
  }
  const bool is_stray = IsStray(key, next_ref);
  if (is_stray != was_stray) {
    if (is_stray) {
      strays_.Add(HeadGroupOf(key), TenantTagOf(key.key));
    } else {
      strays_.Remove(HeadGroupOf(key), TenantTagOf(key.key));
    }
  }
  AddTail(key, next);
}

bool Index::KeptOnAnotherMedium(const KeyName& key, MediaSet medium) {
  const PackedKey packed(key.key);
  KeyEntry* entry = key_shards_[ShardOf(packed)].find(packed);
  // Absent, or on media unknown, or removed from a medium without a number:
  // whatever medium it was on, it may have been the last.
  if (entry == nullptr || entry->media() == 0 || medium == 0) return false;
  const MediaSet left = entry->media() & static_cast<MediaSet>(~medium);
  if (left == 0) return false;
  const uint8_t was_tier = TierOfMedia(entry->media());
  entry->set_media(left);
  if (TierOfMedia(left) != was_tier) {
    CountKeyAtTier(was_tier, false);
    CountKeyAtTier(TierOfMedia(left), true);
  }
  // Still present, under the same group: only the group's tier may change.
  if (entry->group() != kNoGroup && TierOfMedia(left) != was_tier) {
    Retier(entry->group(), was_tier, TierOfMedia(left));
  }
  ShadowWrite([&](ObjectStore& shadow) {
    const uint64_t dropped = shadow.removals_dropped_for_memory();
    const bool went = shadow.Remove(key.tenant_seed, key.object_key, medium);
    // The page store drops a slot whose media left it cannot record (a
    // miss it chooses); the key table kept the key: no longer a mirror.
    if (went && shadow.removals_dropped_for_memory() != dropped) return false;
    SCI_DCHECK(!went, "I46: the page store keeps a key on its other media as the key table does");
    return true;
  });
  return true;
}

void Index::RemoveKey(const KeyName& key, const Fingerprint* label) {
  const PackedKey packed(key.key);
  KeyTable& keys = key_shards_[ShardOf(packed)];
  ShadowWrite([&](ObjectStore& shadow) {
    const bool went = shadow.Remove(key.tenant_seed, key.object_key, 0);
    SCI_DCHECK(went == keys.contains(packed), "I46: the page store held the key the key table removes");
    return true;
  });
  if (KeyEntry* found = keys.find(packed)) {
    const GroupRef ref = found->group();
    const uint8_t tier = TierOfMedia(found->media());
    if (IsStray(key, ref)) strays_.Remove(HeadGroupOf(key), TenantTagOf(key.key));
    keys.erase(found);
    key_count_.fetch_sub(1, std::memory_order_relaxed);
    CountKeyAtTier(tier, false);
    --keys_by_tag_[TenantTagOf(key.key)];
    if (key.digest_ended) event_digests_.Remove(key.digest, TenantTagOf(key.key));
    RemoveTail(key);
    // The group the key was stored under: the only one a verification
    // through this key can have marked.
    if (ref != kNoGroup) DetachKey(ref, tier);
  }
  // The labelled group too, whatever the key's own: a removal is
  // conservative. No other group can have been verified with this key.
  if (label != nullptr) {
    if (GroupState* state = FindGroup(*label)) Invalidate(*state);
  }
}

void Index::AddTail(const KeyName& key, const GroupState* group) {
  if (!key.split) return;
  const int number = NumberTail(key);
  if (number == TailInterner::kNone) return;  // unsummarised: its pages are checked key by key
  const PackedKey head(key.head);
  if (PageTails* tails = page_tails_.find(head)) {
    tails->Add(number, group != nullptr ? group->ref : kNoGroup);
    if (group != nullptr) SummariseAgainIfWhole(*tails, key.tenant_seed, key.head, *group);
    return;
  }
  // Keys stored under no group (snapshot keys) make no entry.
  if (group == nullptr || group->keys < kPageTailsMinKeys) return;
  // MakeRoom grew the table ahead of this store (or it throws, unchanged).
  page_tails_.insert_absent(head, SummarisePage(key.tenant_seed, key.head));
  summarised_count_.store(page_tails_.size(), std::memory_order_relaxed);
}

int Index::NumberTail(const KeyName& key) {
  const uint32_t known = tails_.size();
  const int number = tails_.Intern(key.tail, key.tail_bytes);
  if (tails_.size() != known) tail_number_count_.store(tails_.size(), std::memory_order_relaxed);
  return number;
}

void Index::WarnIfTailNumbersRanOut() {
  if (tail_numbers_warned_ || tail_number_count_.load(std::memory_order_relaxed) < TailInterner::kCapacity) return;
  // Once for the life of the index: numbers are never taken back.
  tail_numbers_warned_ = true;
  Logf(LogLevel::kWarn,
       "page summary: all %d key tail numbers are taken; pages whose keys have other tails are checked key by "
       "key from now on (exact, but slower). Keys of other applications with varied tails after a 64-digit "
       "hash use them up",
       TailInterner::kCapacity);
}

PageTails Index::SummarisePage(uint64_t tenant_seed, const Fingerprint& head) {
  // Every key of the page that is present has a numbered tail or is left
  // out of the summary for good (tail_interner.h): looking up the head with
  // each numbered tail finds them all, this key included. Most of those
  // keys are absent, each a cold line: all are prefetched first, so the
  // misses overlap (this runs with readers held out).
  if (tail_parts_seed_ != tenant_seed) {
    tail_parts_seed_ = tenant_seed;
    tail_parts_known_ = 0;
  }
  for (; tail_parts_known_ < tails_.size(); ++tail_parts_known_) {
    tail_parts_[tail_parts_known_] = FingerprintPart(tenant_seed, tails_.Tail(tail_parts_known_));
  }
  std::array<PackedKey, TailInterner::kCapacity> siblings;
  const uint32_t n_tails = tails_.size();
  for (uint32_t n = 0; n < n_tails; ++n) {
    siblings[n] = PackedKey(CombineFingerprintParts(tenant_seed, head, tail_parts_[n]));
    key_shards_[ShardOf(siblings[n])].prefetch(siblings[n]);
  }
  PageTails page;
  for (uint32_t n = 0; n < n_tails; ++n) {
    if (const KeyEntry* entry = key_shards_[ShardOf(siblings[n])].find(siblings[n])) {
      page.Add(static_cast<int>(n), entry->group());
    }
  }
  return page;
}

void Index::SummariseAgainIfWhole(PageTails& tails, uint64_t tenant_seed, const Fingerprint& head,
                                  const GroupState& group) {
  // A mixed entry never verifies its page, and stays mixed until its head's
  // last key goes. It is nearly always passing: a resync loads a page's keys
  // under no group while the buffered stream stores them again under their
  // group (or the page is adopted). Once the group holds as many keys as the
  // head has present tails, they may all be its: the key table says
  // exactly (one look-up per numbered tail, once per such page).
  if (tails.group != PageTails::kMixedGroups || group.keys != static_cast<uint32_t>(std::popcount(tails.tails()))) {
    return;
  }
  tails = SummarisePage(tenant_seed, head);
}

void Index::RemoveTail(const KeyName& key) {
  if (!key.split) return;
  const int number = tails_.Find(key.tail);
  if (number == TailInterner::kNone) return;
  PageTails* tails = page_tails_.find(PackedKey(key.head));
  if (tails == nullptr) return;
  tails->Remove(number);
  if (tails->empty()) {
    page_tails_.erase(tails);
    summarised_count_.store(page_tails_.size(), std::memory_order_relaxed);
  }
}

Fingerprint Index::HeadNamedBy(uint64_t tenant_seed, std::string_view group_id, const KeyName& key) const {
  if (head_group_prefix_.empty() || !group_id.starts_with(head_group_prefix_)) return Fingerprint{};
  const std::string_view head = group_id.substr(head_group_prefix_.size());
  if (key.split && head == key.head_bytes) return key.head;  // the usual case: nothing to hash
  // A head is what a split key's bytes up to the end of its first run of 64
  // hex digits are (fingerprint.h): a keys' head only if its run ends it.
  if (HexRunEnd(head) != head.size()) return Fingerprint{};
  return FingerprintPart(tenant_seed, head);
}

Fingerprint Index::HeadGroupOf(const KeyName& key) {
  // "<head_group_prefix><head>" is hash-ended (fingerprint.h: the head ends
  // with its first run of 64 digits), so its fingerprint is the 64 digits
  // mixed by the secret of what precedes them: the same few prefixes
  // (a family's prefix, and a tag its heads may begin with) for nearly every
  // key, so the secret is kept, and a snapshot key costs one NH round.
  // (Called for strays only, which need a head_group_prefix_.)
  const size_t digits = key.head_bytes.size() - kFingerprintHexRun;
  const std::string_view prefix = key.head_bytes.substr(0, digits);
  // (Empty until the first call; then it always starts with head_group_prefix_.)
  if (head_group_name_.empty() || key.tenant_seed != head_group_seed_ ||
      std::string_view(head_group_name_).substr(head_group_prefix_.size()) != prefix) {
    head_group_name_.assign(head_group_prefix_);
    head_group_name_.append(prefix);
    head_group_secret_ = HashEndSecretOf(key.tenant_seed, head_group_name_);
    head_group_seed_ = key.tenant_seed;
  }
  return HashEndedFingerprint(head_group_secret_, key.head_bytes.data() + digits);
}

Index::GroupState* Index::FindGroup(const Fingerprint& group) {
  return groups_.find(PackedKey(group));
}

Index::GroupState* Index::AcquireGroup(const Fingerprint& group, const Fingerprint& named_head) {
  if (GroupState* state = FindGroup(group)) {
    Invalidate(*state);
    return state;
  }
  if (!HasRoom() || (free_refs_.empty() && refs_.size() >= kGroupRefLimit)) {
    // Without a group state the page is still answered by its keys; it just
    // never takes the fast path.
    counters_.capacity_refusals.Add();
    return nullptr;
  }
  GroupRef ref;
  if (!free_refs_.empty()) {
    ref = free_refs_.back();
    free_refs_.pop_back();
    refs_[ref] = RefInfo{group, named_head};
  } else {
    // Room to give every ref back first (DetachKey must not allocate), then
    // the ref: either may throw, and then nothing changed.
    if (free_refs_.capacity() < refs_.size()) free_refs_.reserve(std::max<size_t>(2 * refs_.size(), 64));
    ref = static_cast<GroupRef>(refs_.size());
    refs_.push_back(RefInfo{group, named_head});
  }
  GroupState state;
  state.set_generation(next_generation_++);
  state.ref = ref;
  GroupState* stored = groups_.insert_absent(PackedKey(group), state);
  group_count_.fetch_add(1, std::memory_order_relaxed);
  return stored;
}

void Index::Retier(GroupRef ref, uint8_t from, uint8_t to) {
  GroupState& state = *groups_.find(PackedKey(refs_[ref].group));
  state.set_tier_counts(TierCounts::Add(TierCounts::Add(state.tier_counts(), from, false), to, true));
}

void Index::DetachKey(GroupRef ref, uint8_t tier) {
  const Fingerprint group = refs_[ref].group;
  GroupState* found = groups_.find(PackedKey(group));
  GroupState& state = *found;
  state.set_tier_counts(TierCounts::Add(state.tier_counts(), tier, false));
  if (--state.keys > 0) {
    Invalidate(state);
    return;
  }
  // No key refers to the group any more: it goes, and its ref may serve
  // another group (a probe of this one sees the group gone, or a new
  // generation, and marks nothing).
  ForgetVerification(state);
  groups_.erase(found);
  group_count_.fetch_sub(1, std::memory_order_relaxed);
  free_refs_.push_back(ref);
}

void Index::ForgetVerification(const GroupState& state) {
  const uint64_t word = state.verification.word.load(std::memory_order_relaxed);
  if (word != 0 && static_cast<uint32_t>(word >> 32) == CurrentVerifyEpoch()) {
    // Only this (writer) thread changes the epoch, so the count it subtracts
    // from is the one this verification was added to.
    verify_state_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void Index::Invalidate(GroupState& state) {
  ForgetVerification(state);
  state.verification.word.store(0, std::memory_order_relaxed);
  state.set_generation(next_generation_++);
}

void Index::DropAllVerification() {
  const uint32_t epoch = CurrentVerifyEpoch();
  if (epoch != UINT32_MAX) {
    // New epoch, zero verified groups, in one store.
    verify_state_.store(uint64_t{epoch + 1} << 32, std::memory_order_release);
    return;
  }
  // The epoch wraps (after 4 billion clears): words from the old epoch 1
  // would look current again, so wipe every word.
  verify_state_.store(uint64_t{1} << 32, std::memory_order_release);
  groups_.for_each([](const PackedKey&, GroupState& state) { state.verification.word.store(0, std::memory_order_relaxed); });
}

void Index::ClearTables() {
  EmptyTables();
  cursor_.Reset();  // the batch after a clear starts a new history: not a gap
  deferred_.Clear();  // what waited was of the stream just dropped
}

void Index::EmptyTables() {
  // Verifications first, then the groups (nothing can be verified without
  // them), then the keys: while the keys go shard by shard, no group whose
  // keys are already gone can answer a hit.
  {
    WriterLock lock(tables_lock_);
    DropAllVerification();
    shadow_settling_ = true;
  }
  // Shard by shard, so readers wait for one shard's release at a time, and
  // each array is freed (unmapped) after its lock is released.
  // The page summary goes with them: it answers hits too.
  {
    GroupTable gone;
    PageTailsTable tails_gone;
    WriterLock lock(tables_lock_);
    group_count_.fetch_sub(groups_.size(), std::memory_order_relaxed);
    groups_.swap(gone);
    page_tails_.swap(tails_gone);
    summarised_count_.store(0, std::memory_order_relaxed);
    // With the groups: no key is stored under one now (and an unknown group
    // proving its page absent during the clear is a miss, as it should be).
    strays_.Reset();
    event_digests_.Clear();
  }
  for (size_t i = 0; i < kShards; ++i) {
    KeyTable gone;
    WriterLock lock(tables_lock_);
    key_count_.fetch_sub(key_shards_[i].size(), std::memory_order_relaxed);
    key_shards_[i].swap(gone);
  }
#if SCI_DCHECK_ENABLED  // (a release build holds no shadow: no extra hold of the lock)
  {
    WriterLock lock(tables_lock_);
    if (shadow_ != nullptr) shadow_->Clear();
    shadow_valid_ = true;  // empty, as the tables
    shadow_settling_ = false;
  }
#endif
  // No key refers to any group now: every ref is free again.
  refs_.resize(1);
  free_refs_.clear();
  keys_by_tag_.fill(0);
  for (std::atomic<uint64_t>& n : keys_at_tier_) n.store(0, std::memory_order_relaxed);
}

void Index::ClearTenant(uint64_t tenant_seed) {
  const uint32_t tag = TenantTag(tenant_seed);
  if (keys_by_tag_[tag] == 0) return;  // nothing of the tenant's is present
  if (keys_by_tag_[tag] == key_count_.load(std::memory_order_relaxed)) {
    EmptyTables();  // every key is the tenant's (a pool of one tenant): no walk
    return;
  }
  // Held a bounded run of buckets at a time, so readers wait for one run,
  // never for the walk; each key goes with its group's invalidation in the
  // same hold, as by a removal. Keys of another tenant with the same tag go
  // too: a miss, never a false hit.
  constexpr size_t kBucketsPerHold = 4096;
#if SCI_DCHECK_ENABLED
  {
    WriterLock lock(tables_lock_);
    shadow_settling_ = true;
  }
#endif
  // The page summary first: an entry vouches for keys, so the tenant's go
  // before any of its keys does (a page without one is checked key by key).
  for (size_t b = 0;; b += kBucketsPerHold) {
    WriterLock lock(tables_lock_);
    if (b >= page_tails_.bucket_count()) {
      summarised_count_.store(page_tails_.size(), std::memory_order_relaxed);
      break;
    }
    page_tails_.erase_if(b, b + kBucketsPerHold,
                         [tag](const PackedKey& head, PageTails&) { return TenantTagOf(head.Unpack()) == tag; });
  }
  for (size_t shard = 0; shard < kShards; ++shard) {
    for (size_t b = 0; keys_by_tag_[tag] > 0; b += kBucketsPerHold) {
      WriterLock lock(tables_lock_);
      KeyTable& keys = key_shards_[shard];
      if (b >= keys.bucket_count()) break;
      // (The lambda runs within this hold; the analysis cannot see that.)
      keys.erase_if(b, b + kBucketsPerHold, [&](const PackedKey& key, KeyEntry& entry) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        if (TenantTagOf(key.Unpack()) != tag) return false;
        if (entry.group() != kNoGroup) DetachKey(entry.group(), TierOfMedia(entry.media()));
        key_count_.fetch_sub(1, std::memory_order_relaxed);
        CountKeyAtTier(TierOfMedia(entry.media()), false);
        --keys_by_tag_[tag];
        return true;
      });
    }
  }
  // The tag's keys are gone: its strays with them (stray_keys.h: the
  // gauge now, the slots once no stray is left), and its digests behind
  // event hashes (event_hash_digests.h), the same bounded run at a time.
  {
    WriterLock lock(tables_lock_);
    strays_.ClearTag(tag);
  }
  EventHashDigests::Walk walk;
  for (bool more = true; more;) {
    WriterLock lock(tables_lock_);
    more = event_digests_.HasTag(tag) && event_digests_.EraseTagRun(tag, &walk, kBucketsPerHold);
  }
#if SCI_DCHECK_ENABLED
  {
    WriterLock lock(tables_lock_);
    ShadowWrite([&](ObjectStore& shadow) {
      shadow.ClearTenant(tenant_seed);
      return true;
    });
    shadow_settling_ = false;
    CheckShadowCount();
  }
#endif
}

// ------------------------------------------------- the shadow store (I46) --

template <typename Write>
void Index::ShadowWrite(Write&& write) {
  if (shadow_ == nullptr || !shadow_valid_) return;
  try {
    // False: the write did what the store's rules say for a failure, which
    // the key tables did not do.
    if (!write(*shadow_)) shadow_valid_ = false;
  } catch (const std::bad_alloc&) {
    shadow_valid_ = false;  // it may lack this key: unchecked until the next full clear
  }
}

void Index::CheckShadowKey(uint64_t tenant_seed, std::string_view object_key) const {
  if (shadow_ == nullptr || !shadow_valid_ || shadow_settling_) return;
  const PackedKey packed(FingerprintOf(tenant_seed, object_key));
  const KeyEntry* entry = key_shards_[ShardOf(packed)].find(packed);
  SCI_DCHECK((entry != nullptr) == shadow_->Contains(tenant_seed, object_key),
             "I46: the page store holds a key exactly when the key table does");
  SCI_DCHECK(entry == nullptr || entry->media() == shadow_->Media(tenant_seed, object_key),
             "I46: the page store gives a key the media the key table does");
}

void Index::CheckShadowCount() const {
  if (shadow_ == nullptr || !shadow_valid_ || shadow_settling_) return;
  SCI_DCHECK(key_count_.load(std::memory_order_relaxed) == shadow_->objects(),
             "I46: the page store holds as many keys as the key table");
}

// ---------------------------------------------------------------- readers --

bool Index::Contains(std::string_view tenant, std::string_view object_key) const {
#if SCI_DCHECK_ENABLED
  {
    ReaderLock lock(tables_lock_);
    CheckShadowKey(TenantSeed(tenant), object_key);
  }
#endif
  return ContainsKey(FingerprintOf(TenantSeed(tenant), object_key));
}

bool Index::DigestOfEventHash(uint64_t tenant_seed, uint64_t event_hash, std::array<uint8_t, 32>* digest) const {
  ReaderLock lock(tables_lock_);
  if (concealed_.load(std::memory_order_relaxed)) return false;
  return event_digests_.Find(event_hash, TenantTag(tenant_seed), digest);
}

bool Index::ContainsKey(const Fingerprint& key) const {
  ReaderLock lock(tables_lock_);
  return ContainsKeyLocked(key);
}

KeyCheck Index::CheckKeys(std::span<const Fingerprint> keys, GroupRef group) const {
  ReaderLock lock(tables_lock_);
  for (const Fingerprint& key : keys) {
    const PackedKey packed(key);
    key_shards_[ShardOf(packed)].prefetch(packed);
  }
  return CheckKeysLocked<false>(keys, group);
}

GroupProbe Index::ProbeGroup(const Fingerprint& group, LayoutId layout) const {
  ReaderLock lock(tables_lock_);
  return ProbeGroupLocked(group, layout);
}

bool Index::MarkVerified(const Fingerprint& group, const GroupProbe& probe, LayoutId layout) {
  if (!probe.exists || layout == 0) return false;
  ReaderLock lock(tables_lock_);
  return MarkVerifiedLocked(group, probe, layout);
}

// Every read below tests the concealment (see Conceal()) with the table lock held.
bool Index::ContainsKeyLocked(const Fingerprint& key) const {
  if (concealed_.load(std::memory_order_relaxed)) return false;
  const PackedKey packed(key);
  return key_shards_[ShardOf(packed)].contains(packed);
}

template <bool kWithTier>
KeyCheck Index::CheckKeysLocked(std::span<const Fingerprint> keys, GroupRef group) const {
  if (concealed_.load(std::memory_order_relaxed)) return KeyCheck{};
  KeyCheck check{true, group != kNoGroup};
  for (const Fingerprint& key : keys) {
    const PackedKey packed(key);
    const KeyEntry* entry = key_shards_[ShardOf(packed)].find(packed);
    if (entry == nullptr) return KeyCheck{};
    check.all_under_group = check.all_under_group && entry->group() == group;
    if constexpr (kWithTier) check.tier = std::max(check.tier, TierOfMedia(entry->media()));
  }
  return check;
}
template KeyCheck Index::CheckKeysLocked<false>(std::span<const Fingerprint>, GroupRef) const;
template KeyCheck Index::CheckKeysLocked<true>(std::span<const Fingerprint>, GroupRef) const;

RequiredTails Index::FindRequiredTailsLocked(std::span<const Fingerprint> tail_ids) const {
  RequiredTails required;
  required.state = RequiredTails::State::kSummarised;
  for (const Fingerprint& tail : tail_ids) {
    const int number = tails_.Find(tail);
    if (number != TailInterner::kNone) {
      required.mask |= uint64_t{1} << number;
      continue;
    }
    // Numbers remain: no key with this tail was ever stored (tail_interner.h).
    return RequiredTails{tails_.full() ? RequiredTails::State::kUnsummarised : RequiredTails::State::kNeverStored, 0};
  }
  // Pages of fewer keys have no entry (page_tails.h); nor has a page needing no key.
  if (tail_ids.size() < kPageTailsMinKeys) required.state = RequiredTails::State::kUnsummarised;
  return required;
}

PageTailsCheck Index::CheckPageTailsLocked(const Fingerprint& head, uint64_t required, GroupRef group) const {
  if (concealed_.load(std::memory_order_relaxed)) return PageTailsCheck{true, KeyCheck{}};
  const PageTails* tails = page_tails_.find(PackedKey(head));
  if (tails == nullptr) return PageTailsCheck{};
  if ((tails->tails() & required) != required) return PageTailsCheck{true, KeyCheck{}};
  return PageTailsCheck{true, KeyCheck{true, group != kNoGroup && tails->group == group}};
}

uint8_t Index::GroupTierLocked(const Fingerprint& group, GroupRef ref) const {
  if (concealed_.load(std::memory_order_relaxed)) return MediumTiers::kAbsent;
  const GroupState* state = groups_.find(PackedKey(group));
  if (state == nullptr || state->ref != ref) return MediumTiers::kAbsent;
  return TierCounts::SlowestTier(state->tier_counts());
}

bool Index::MarkVerifiedLocked(const Fingerprint& group, const GroupProbe& probe, LayoutId layout) {
  if (!probe.exists || layout == 0) return false;
  if (concealed_.load(std::memory_order_relaxed)) return false;
  GroupState* state = groups_.find(PackedKey(group));
  // A key stored under the group, or leaving it, since the probe: what the
  // caller checked may not be the group's current object set.
  if (state == nullptr || state->generation() != probe.generation) return false;
  // A clear since the probe.
  const uint32_t epoch = probe.verify_epoch;
  if (CurrentVerifyEpoch() != epoch) return false;

  const uint64_t desired = PackVerification(epoch, layout);
  std::atomic<uint64_t>& word = state->verification.word;
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
  s.keys_tier0 = keys_at_tier_[0].load(std::memory_order_relaxed);
  s.keys_tier1 = keys_at_tier_[1].load(std::memory_order_relaxed);
  s.keys_tier2 = keys_at_tier_[2].load(std::memory_order_relaxed);
  s.keys_tier3 = keys_at_tier_[3].load(std::memory_order_relaxed);
  s.groups = group_count_.load(std::memory_order_relaxed);
  s.verified_groups = static_cast<uint32_t>(verify_state_.load(std::memory_order_relaxed));
  s.summarised_pages = summarised_count_.load(std::memory_order_relaxed);
  s.tail_numbers = tail_number_count_.load(std::memory_order_relaxed);
  s.stray_keys = StrayKeyCount();
  // The cursor's mirrors are atomics, made to be read without apply_mu_.
  s.has_sequence = ABSL_TS_UNCHECKED_READ(cursor_).has_sequence_now();
  s.last_sequence = s.has_sequence ? ABSL_TS_UNCHECKED_READ(cursor_).last_sequence_now() : 0;
  return s;
}

}  // namespace sci
