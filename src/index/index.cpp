#include "index/index.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <new>

#include "common/check.h"
#include "common/format.h"
#include "common/log.h"

namespace sci {
namespace {
std::atomic<uint64_t> next_index_serial{1};
}  // namespace

Index::Index(IndexOptions options)
    : serial_(next_index_serial.fetch_add(1, std::memory_order_relaxed)),
      max_entries_(options.max_entries == 0 ? IndexOptions::kDefaultMaxEntries : options.max_entries),
      residency_(options.residency),
      tiers_(std::move(options.tiers)),
      digest_key_separator_(std::move(options.digest_key_separator)),
      store_(options.split_table_bytes) {
  // (options.head_group_prefix: unused since 1.4, see IndexOptions.)
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
    for (const auto& [tenant, keys] : deferred_.by_tenant()) {
      for (const auto& [key, stored] : keys) ApplyEvent(cursor_.position().last_sequence, DeferredStores::AsEvent(stored), tally);
    }
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
  // Keys are named (hashed, located) kNamedAhead ahead of their store and
  // their lines prefetched, so that a store waits for no DRAM round trip:
  // a snapshot of one key a page touches a new entry with every key.
  constexpr size_t kNamedAhead = 16;
  std::array<KeyName, kNamedAhead> ahead;
  std::array<uint32_t, kNamedAhead> numbered_then;  // slot numbers given when each was named
  const auto name = [&](size_t at, std::string_view object_key) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    ahead[at] = NameKey(seed, object_key);
    numbered_then[at] = WriterStore().slot_names().size();
    WriterStore().Prefetch(ahead[at].place);
  };
  for (size_t i = 0; i < std::min(keys.size(), kNamedAhead); ++i) name(i, keys[i]);
  for (size_t i = 0; i < keys.size(); ++i) {
    KeyName key = ahead[i % kNamedAhead];
    const uint32_t numbers_when_named = numbered_then[i % kNamedAhead];
    if (i + kNamedAhead < keys.size()) name(i % kNamedAhead, keys[i + kNamedAhead]);
    // A key named with no slot number may have had its slot numbered since
    // (by a key before it): located again, it is found where it now is
    // (I56). Numbers are never taken back, so only a new number can move
    // it; with none given since (every number taken, say), the name stands.
    if (key.place.past_slot_capacity && numbers_when_named != WriterStore().slot_names().size()) {
      key.place = WriterStore().Locate(seed, key.object_key);
    }
    if (HasRoom()) WriterStore().MakeRoom(key.place, tables_lock_);
    {
      WriterLock lock(tables_lock_);
      StoreKey(key, 0);  // media unknown: a snapshot names none
    }
    WarnIfSlotNumbersRanOut();
  }
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
    {
      deferred_.ClearTenant(event.tenant_id);
      const TenantClear how = ClearTenant(TenantSeed(event.tenant_id));
      counters_.tenant_clears.Add();
      ++tally.events_applied;
      Logf(LogLevel::kInfo, "tenant '%s' cleared by the publisher (batch %d): %s",
           event.tenant_id.empty() ? std::string_view("default") : event.tenant_id, sequence, Describe(how));
      return;
    }
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
  // The writer is the only thread that changes the store, so it may read it
  // without the lock. Touching the line first brings it into cache: the
  // lock is then held for in-cache updates only, and readers wait a
  // fraction of a DRAM round trip per event instead of one.
  WriterStore().Prefetch(key.place);
  if (event.kind == EventKind::kStored && HasRoom()) WriterStore().MakeRoom(key.place, tables_lock_);
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
      StoreKey(key, medium);
    } else {
      // Per medium, the key stays while another medium holds it (its media
      // known); else it goes, whatever media held it.
      RemoveKey(key, per_medium_removal ? medium : 0);
    }
  }
  if (removal) ++(per_medium_removal ? tally.removals_per_medium : tally.removals_whole_key);
  if (mismatch) ++tally.residency_mismatches;
  ++tally.events_applied;
  // Logged with the table lock released: a log callback may query.
  if (event.kind == EventKind::kStored) WarnIfSlotNumbersRanOut();
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
  name.tenant_seed = tenant_seed;
  name.object_key = object_key;
  // Unlocked: only the writer, who calls this, changes the store.
  name.place = store_.Locate(tenant_seed, object_key);
  name.digest_ended = EventHashDigests::DigestOfKey(object_key, digest_key_separator_, &name.digest);
  return name;
}

bool Index::HasRoom() const { return key_count_.load(std::memory_order_relaxed) < max_entries_; }

void Index::StoreKey(const KeyName& key, MediaSet medium) {
  const bool is_new = !store_.Has(key.place);
  if (is_new && !HasRoom()) {
    // Refusing keeps the answer conservative: a key we do not hold can
    // only turn a hit into a miss.
    counters_.capacity_refusals.Add();
    return;
  }
  // First, as they may fail to allocate: then nothing has changed.
  if (is_new) tenant_keys_.Prepare(key.tenant_seed, key.object_key);
  SlotChange change;
  bool digest_added = false;
  try {
    if (is_new && key.digest_ended) {
      event_digests_.Add(key.digest, key.tenant_seed);
      digest_added = true;
    }
    change = store_.Store(key.tenant_seed, key.object_key, key.place, medium);
  } catch (const std::bad_alloc&) {
    // Undone in the reverse order; neither undo allocates.
    if (digest_added) event_digests_.Remove(key.digest, key.tenant_seed);
    if (is_new) tenant_keys_.Unprepare(key.tenant_seed, key.object_key);
    throw;
  }
  SCI_DCHECK(change.present && change.was_present == !is_new, "a store leaves its key present; Has() told the truth");
  Account(key, change);
}

void Index::RemoveKey(const KeyName& key, MediaSet medium) {
  const SlotChange change = store_.Remove(key.place, medium);
  SCI_DCHECK(change.was_present || !change.present, "a removal never makes a key present");
  if (change.was_present && change.present) counters_.medium_removals_kept.Add();
  if (change.was_present && !change.present && key.digest_ended) {
    event_digests_.Remove(key.digest, key.tenant_seed);
  }
  Account(key, change);
}

void Index::Account(const KeyName& key, const SlotChange& change) {
  if (change.present != change.was_present) {
    const int64_t n = change.present ? 1 : -1;
    SCI_DCHECK(change.present || (key_count_.load(std::memory_order_relaxed) > 0 &&
                                  keys_by_tag_[TenantTag(key.tenant_seed)] > 0),
               "a key leaving was counted, in its tenant too");
    key_count_.store(key_count_.load(std::memory_order_relaxed) + static_cast<uint64_t>(n), std::memory_order_relaxed);
    keys_by_tag_[TenantTag(key.tenant_seed)] += static_cast<uint64_t>(n);
    if (change.present) {
      tenant_keys_.Came(key.tenant_seed);
    } else {
      tenant_keys_.Went(key.tenant_seed, key.object_key);
    }
    CountKeysAtTier(TierOfMedia(change.present ? change.media : change.was_media), n);
  } else if (change.present && TierOfMedia(change.media) != TierOfMedia(change.was_media)) {
    CountKeysAtTier(TierOfMedia(change.was_media), -1);
    CountKeysAtTier(TierOfMedia(change.media), 1);
  }
  page_entry_count_.store(store_.pages().entries(), std::memory_order_relaxed);
  stores_past_slot_capacity_.store(store_.stores_past_slot_capacity(), std::memory_order_relaxed);
}

void Index::WarnIfSlotNumbersRanOut() {
  if (slot_numbers_warned_ || stores_past_slot_capacity_.load(std::memory_order_relaxed) == 0) return;
  // Once for the life of the index: numbers are never taken back.
  slot_numbers_warned_ = true;
  Logf(LogLevel::kWarn,
       "page store: all %d slot numbers are taken; keys of slots seen from now on are stored whole (exact, "
       "about 20 bytes a key instead of a bit; stores_past_slot_capacity counts them). Some writer names its "
       "keys with a new prefix or suffix around the digest per page",
       SlotNames::kCapacity);
}

void Index::ClearTables() {
  EmptyTables();
  cursor_.Reset();  // the batch after a clear starts a new history: not a gap
  deferred_.Clear();  // what waited was of the stream just dropped
}

void Index::EmptyTables() {
  // One hold: the store's contents are swapped for empty tables (slot
  // numbers stay: slot_names.h), and the old arrays are freed (unmapped)
  // after the lock is released.
  ObjectStore gone;
  {
    WriterLock lock(tables_lock_);
    store_.MoveContentsTo(gone);
    event_digests_.Clear();
    key_count_.store(0, std::memory_order_relaxed);
    page_entry_count_.store(0, std::memory_order_relaxed);
  }
  keys_by_tag_.fill(0);
  tenant_keys_.Clear();
  for (std::atomic<uint64_t>& n : keys_at_tier_) n.store(0, std::memory_order_relaxed);
}

Index::TenantClear Index::ClearTenant(uint64_t tenant_seed) {
  const uint32_t tag = TenantTag(tenant_seed);
  if (keys_by_tag_[tag] == 0) return TenantClear::kNothing;  // nothing of the tag's is present
  TenantKeys::Names names;
  switch (tenant_keys_.PlanClear(tenant_seed, &names)) {
    case TenantKeys::ClearBy::kNothing:
      return TenantClear::kNothing;  // its keys went by removals; another tenant of its tag keeps its own
    case TenantKeys::ClearBy::kNames:
      RemoveNamedKeys(tenant_seed, names);
      return TenantClear::kByName;
    case TenantKeys::ClearBy::kTagWalk:
      break;
  }
  if (keys_by_tag_[tag] == key_count_.load(std::memory_order_relaxed)) {
    EmptyTables();  // every key is the tag's (a pool of one tenant): no walk
    return TenantClear::kWhole;
  }
  // Held a bounded run of buckets at a time, so readers wait for one run,
  // never for the walk. Keys of another tenant with the same tag go too: a
  // miss, never a false hit.
  constexpr size_t kBucketsPerHold = 4096;
  ObjectStore::TenantWalk walk;
  for (bool more = true; more;) {
    WriterLock lock(tables_lock_);
    // (The lambda runs within this hold; the analysis cannot see that.)
    more = store_.ClearTenantRun(tag, &walk, kBucketsPerHold, [&](MediaSet media, uint64_t n) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      key_count_.store(key_count_.load(std::memory_order_relaxed) - n, std::memory_order_relaxed);
      keys_by_tag_[tag] -= n;
      CountKeysAtTier(TierOfMedia(media), -static_cast<int64_t>(n));
    });
    page_entry_count_.store(store_.pages().entries(), std::memory_order_relaxed);
  }
  // The tag's digests behind event hashes (event_hash_digests.h), the same
  // bounded run at a time.
  EventHashDigests::Walk digests;
  for (bool more = true; more;) {
    WriterLock lock(tables_lock_);
    more = event_digests_.HasTag(tag) && event_digests_.EraseTagRun(tag, &digests, kBucketsPerHold);
  }
  tenant_keys_.ForgetTag(tag);  // every tenant of the tag holds nothing now
  return TenantClear::kTagWalk;
}

void Index::RemoveNamedKeys(uint64_t tenant_seed, const TenantKeys::Names& names) {
  // As removals from every medium, a bounded run a hold (at most
  // TenantKeys::kListed keys in all), each run's keys hashed before the
  // hold, as ApplyEvent does: readers wait for the removals only.
  constexpr size_t kKeysPerHold = 64;
  std::array<KeyName, kKeysPerHold> run;
  auto name = names.begin();
  while (name != names.end()) {
    size_t n = 0;
    for (; n < kKeysPerHold && name != names.end(); ++n, ++name) run[n] = NameKey(tenant_seed, *name);
    WriterLock lock(tables_lock_);
    for (size_t i = 0; i < n; ++i) RemoveKey(run[i], 0);
  }
  SCI_DCHECK(!tenant_keys_.Holds(tenant_seed), "a listed tenant's names were all its present keys");
}

uint64_t Index::TableRenewals() const {
  WriterLock apply(apply_mu_);
  ReaderLock lock(tables_lock_);
  return store_.renewals();
}

std::string Index::Inconsistency() const {
  WriterLock apply(apply_mu_);
  ReaderLock lock(tables_lock_);
  std::string what = store_.Inconsistency();
  if (!what.empty()) return what;
  const uint64_t keys = key_count_.load(std::memory_order_relaxed);
  if (keys != store_.objects()) return sci::StrFormat("%d keys counted, %d in the store", keys, store_.objects());
  uint64_t by_tag = 0;
  for (uint64_t n : keys_by_tag_) by_tag += n;
  if (by_tag != keys) return sci::StrFormat("%d keys counted by tenant tag, %d in all", by_tag, keys);
  what = tenant_keys_.Inconsistency(keys);
  if (!what.empty()) return what;
  uint64_t by_tier = 0;
  for (const std::atomic<uint64_t>& n : keys_at_tier_) by_tier += n.load(std::memory_order_relaxed);
  if (by_tier != keys) return sci::StrFormat("%d keys counted by tier, %d in all", by_tier, keys);
  if (page_entry_count_.load(std::memory_order_relaxed) != store_.pages().entries()) {
    return "the page entry gauge is not the store's count";
  }
  return "";
}

// ---------------------------------------------------------------- readers --

bool Index::Contains(std::string_view tenant, std::string_view object_key) const {
  const Reader reader(*this);
  return reader.Contains(TenantSeed(tenant), object_key);
}

bool Index::DigestOfEventHash(uint64_t tenant_seed, uint64_t event_hash, std::array<uint8_t, 32>* digest) const {
  ReaderLock lock(tables_lock_);
  if (concealed_.load(std::memory_order_relaxed)) return false;
  return event_digests_.Find(event_hash, tenant_seed, digest);
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
  // 1.3's group rows, as the page store gives them meaning
  // (docs/operations.md): a page entry is what a group was, and none needs
  // verifying, summarising or counting apart.
  s.groups = page_entry_count_.load(std::memory_order_relaxed);
  s.verified_groups = 0;
  s.summarised_pages = 0;
  s.tail_numbers = 0;
  s.stray_keys = 0;
  s.stores_past_slot_capacity = stores_past_slot_capacity_.load(std::memory_order_relaxed);
  // The cursor's mirrors are atomics, made to be read without apply_mu_.
  s.has_sequence = ABSL_TS_UNCHECKED_READ(cursor_).has_sequence_now();
  s.last_sequence = s.has_sequence ? ABSL_TS_UNCHECKED_READ(cursor_).last_sequence_now() : 0;
  return s;
}

}  // namespace sci
