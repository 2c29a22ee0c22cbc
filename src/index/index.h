// The shared-cache index: which physical objects are present, and the
// sequence cursor that keeps it exact. Semantics: docs/index-semantics.md.
//
// The store (object_store.h). A key that carries a page's digest is a slot
// of that page's entry (page_store.h): one entry per (tenant, page, slot
// bank) says which of its slots are present, and on which media. Every
// other key is kept whole, one entry per key. A page query reads one entry
// per page and answers exactly (ObjectStore::PageTier, through a slot plan
// resolved once per layout: slot_plan.h). Group ids the events carry are
// not needed to answer: a page's entry is already the one probe a verified
// group bought in 1.3 (docs/index-semantics.md, "Groups").
//
// Concurrency. One writer at a time (ApplyBatch, Clear; serialised by
// apply_mu_) and any number of readers share one writer-preferring
// reader/writer lock over the store. The writer holds it for one event at a
// time; a reader for one lookup, or for a round of pages (Reader), so
// neither side ever waits for the other's whole batch or query. A table
// grows by a rebuild the writer makes outside the lock and swaps in under
// it (ObjectStore::MakeRoom), so readers never wait for a rebuild.
// Counters are atomics, readable at any moment; the readers' ones are
// striped per thread, like the lock's reader counts, so that querying
// threads write no line in common. These rules are checked by clang's
// -Wthread-safety (abseil's annotations below; scripts/test.sh).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "index/annotated_mutex.h"
#include "common/warn_once.h"
#include "index/deferred_stores.h"
#include "index/event.h"
#include "index/event_hash_digests.h"
#include "index/fingerprint.h"
#include "index/key_entry.h"
#include "index/media_names.h"
#include "index/medium_tiers.h"
#include "index/object_store.h"
#include "index/table_lock.h"
#include "index/stats.h"
#include "index/stream_cursor.h"
#include "index/tenant_keys.h"

namespace sci {

// When a key stops being present (index-semantics.md, "Residency").
enum class Residency : uint32_t {
  // Any `removed` drops the key, whatever its medium: exact for masters that
  // announce a removal once no replica is left (the first generation); for
  // a per-medium master it can only cost hits. The default.
  kObject = 0,
  // A key is present while some medium holds it: `stored` adds its medium,
  // `removed` takes it away. Exact for per-medium (second-generation)
  // masters. Safe on a first-generation one too since 1.3: a removal whose
  // event shows that generation (Event::generation) drops the whole key.
  kPerMedium = 1,
};

struct IndexOptions {
  static constexpr uint64_t kDefaultMaxEntries = uint64_t{1} << 25;  // 33,554,432
  uint64_t max_entries = kDefaultMaxEntries;  // present keys (1.3: keys + groups)
  Residency residency = Residency::kObject;
  // The index itself knows no layout family: whoever makes it passes the
  // conventions of the families it serves (each family's layout header
  // offers its options).
  //
  // Unused since 1.4 (the page store needs no group to answer; 1.3 counted
  // keys stored apart from the group named "<this><their head>").
  std::string head_group_prefix = {};
  // A family whose keys end with this and a 64-hex-digit digest, which its
  // engines name by the digest's low 64 bits: set, the index keeps those
  // digests by their low 64 bits (event_hash_digests.h, DigestOfEventHash).
  // Empty: none is kept, and every event hash is unresolved (a miss).
  std::string digest_key_separator = {};
  // Which tier each medium is (medium_tiers.h): what tier queries answer.
  // Media are known only under the per-medium rule; under the object rule
  // every key is at the slowest tier.
  MediumTiers tiers = {};
  // A table whose next growth would reach this many bytes splits into 64
  // parts instead, so that it grows a part at a time (split_table.h; 0:
  // 512 MiB). Tests set 1, to run every path on split tables.
  size_t split_table_bytes = 0;
};

class Index {
 public:
  explicit Index(IndexOptions options = {});
  Index(const Index&) = delete;
  Index& operator=(const Index&) = delete;

  // ---- writer side (any thread; calls are serialised) ----

  // Applies one batch under `sequence`: duplicate ignored, gap clears first.
  // A resync replaying buffered messages goes through here too, so the
  // first of them begins a run like any batch after a clear.
  // `ids`: the batch's event_id numbers, when its format carries them (the
  // Mooncake production format). One publisher numbers its events in the
  // order it numbers its batches, so a batch that continues the sequence
  // continues the ids too (first = last applied + 1): one that does not is
  // another publisher at the same sequence (a restart), and clears like a
  // gap (restarts_suspected). Judged on every continuing batch whose ids
  // and whose predecessor's are known; see RequireEventContinuity for the
  // batches that cannot show them.
  BatchOutcome ApplyBatch(uint64_t sequence, std::span<const Event> events,
                          SequenceRules rules = SequenceRules::kPlain, const BatchEventIds& ids = {})
      ABSL_LOCKS_EXCLUDED(apply_mu_, tables_lock_);

  // The connection the batches came on was lost (issue #35 §2): a publisher
  // that restarted meanwhile starts its sequence at 1 again, and if it sent
  // exactly as many batches as our cursor before we reconnected, its next
  // batch looks like last + 1. So the next batch with events that continues
  // the sequence must show the same publisher: its event ids continue the
  // last ones (always checked), and a batch without ids, or after a batch
  // without ids, cannot show it and is read as a restart: the index is
  // cleared (restarts_suspected) and the batch begins a run.
  void RequireEventContinuity() ABSL_LOCKS_EXCLUDED(apply_mu_);

  // Counts every emptying of the tables by a clear (a gap, a restart, an
  // all-cleared event, Clear(), the loop's recovery), for whoever must act
  // on one whoever made it (the subscriber resyncs). Not a counter: it
  // steers; `clears` in the stats reports.
  uint64_t clear_epoch() const { return clear_epoch_.load(std::memory_order_acquire); }

  // Forgets every key and the cursor; counts a clear.
  void Clear() ABSL_LOCKS_EXCLUDED(apply_mu_, tables_lock_);

  // ---- resync (feed/resync.h): load a snapshot that no query may see yet ----

  // Empties the index (keys, cursor; not counted as a clear: the resync
  // that asks for it is counted instead) and conceals it: until Reveal(),
  // every lookup answers "absent", so a
  // half-loaded snapshot whose later removals still wait in a buffer is
  // never seen. Idempotent. ("Conceal", not "hold": a hold is a lock's.)
  void Conceal() ABSL_LOCKS_EXCLUDED(apply_mu_, tables_lock_);
  // Ends the concealment: queries see the index again.
  void Reveal() ABSL_LOCKS_EXCLUDED(apply_mu_);
  // Where the stream stands: the last batch applied and the last event id
  // it carried (what the next batch must continue).
  using Cursor = StreamPosition;
  Cursor cursor() const ABSL_LOCKS_EXCLUDED(apply_mu_);
  // Sets the cursor as if its batch had just been applied; nothing else
  // changes, nothing is counted. For a resync with nothing buffered: the
  // stream goes on after the batch that made the clear.
  void ResumeAt(const Cursor& cursor) ABSL_LOCKS_EXCLUDED(apply_mu_);
  // From DeferStores() to EndDeferral(), stored events wait (each key's
  // last store, dropped by a later removal or clear: deferred_stores.h;
  // counted in stores_withheld): a resync that revealed the index before
  // its catch-up was anchored (feed/resync.h), so that a store older than
  // its snapshot cannot bring back a key the snapshot saw removed.
  // Removals and clears apply as they come: only hits wait, none is made.
  // EndDeferral(true) applies what waits (the anchor came), false drops it.
  void DeferStores() ABSL_LOCKS_EXCLUDED(apply_mu_);
  void EndDeferral(bool apply) ABSL_LOCKS_EXCLUDED(apply_mu_, tables_lock_);
  bool concealed() const { return concealed_.load(std::memory_order_relaxed); }

  // Stores `keys` in the default tenant, leaving the cursor and the batch
  // / event counters alone (snapshot keys are not events). Keys must be
  // non-empty and at most kMaxObjectKeyBytes long. The capacity bound
  // applies as for stored events. A snapshot key is then what a stored
  // event makes it: the first query of its page costs what any costs.
  void LoadKeys(std::span<const std::string_view> keys) ABSL_LOCKS_EXCLUDED(apply_mu_, tables_lock_);

  // ---- reader side (any number of threads, concurrently with the writer) ----

  // Each of these takes the reader lock for its own lookups; a caller with
  // several lookups to make at once holds one Reader instead (below).
  bool Contains(std::string_view tenant, std::string_view object_key) const ABSL_LOCKS_EXCLUDED(tables_lock_);
  // The digest that present keys of the tenant whose seed is `tenant_seed`
  // ending "<digest_key_separator><64 hex digits>" carry for an engine's 64-bit event hash (event_hash_digests.h);
  // false when none or more than one does, or with no separator.
  bool DigestOfEventHash(uint64_t tenant_seed, uint64_t event_hash, std::array<uint8_t, 32>* digest) const
      ABSL_LOCKS_EXCLUDED(tables_lock_);
  // The same for the default tenant.
  bool DigestOfEventHash(uint64_t event_hash, std::array<uint8_t, 32>* digest) const
      ABSL_LOCKS_EXCLUDED(tables_lock_) {
    return DigestOfEventHash(TenantSeed({}), event_hash, digest);
  }
  // Entries of the event-hash digest map: one per (low 64 bits, tenant) of
  // present digest-ended keys. For tests (a tenant's clear takes its own
  // away).
  size_t EventHashDigestEntries() const ABSL_LOCKS_EXCLUDED(tables_lock_) {
    ReaderLock lock(tables_lock_);
    return event_digests_.size();
  }

  // Several lookups under one hold of the reader lock: the page query's way
  // of paying for the lock once for many pages (each hold is two locked
  // writes to the thread's stripe of the lock and two reads of the writer's
  // word: rw_lock.h). Prefetches let the caller start the table lines it
  // will need in a later hold on their way while it computes something else.
  // Hold it for lookups only (a writer waits for it), and never apply
  // events while holding it (that would wait for itself).
  //
  // Pages are asked for through slot plans (slot_plan.h): a layout's key
  // names resolved to slot numbers in some hold, used in later holds while
  // Current() says so (numbers are never taken back), resolved again when not.
  //
  // Lock analysis: the hold is this object's lifetime, which clang's
  // -Wthread-safety cannot see inside the member functions; they are exempt
  // from it and only read what the lock guards.
  class ABSL_SCOPED_LOCKABLE Reader {
   public:
    explicit Reader(const Index& index) ABSL_SHARED_LOCK_FUNCTION(index.tables_lock_) : index_(index) {
      index_.tables_lock_.ReaderLock();
    }
    ~Reader() ABSL_UNLOCK_FUNCTION() { index_.tables_lock_.ReaderUnlock(); }
    Reader(const Reader&) = delete;
    Reader& operator=(const Reader&) = delete;

    // A plan for pages whose keys are `slots` (prefix + digest + suffix
    // each). May throw bad_alloc (the plan is the caller's memory).
    SlotPlan Resolve(const std::vector<SlotName>& slots) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return index_.store_.ResolvePlan(slots);
    }
    bool Current(const SlotPlan& plan) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return plan.current(index_.store_.slot_names());
    }
    // `plan` made current: resolved again (into its own room) if a slot
    // was numbered since it was made, or it never was. Returns whether it
    // was. May throw bad_alloc (then the plan answers no page).
    bool Refresh(SlotPlan& plan, const std::vector<SlotName>& slots) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      if (Current(plan)) return false;
      SlotPlan::ResolveInto(index_.store_.slot_names(), slots, plan);
      return true;
    }
    // Starts the lines of a page's entries (ObjectStore::PageKeys) on their way.
    void PrefetchPage(std::span<const Fingerprint> page_keys) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      index_.store_.PrefetchPage(page_keys);
    }
    // Whether every key `plan` names for the page with this digest is
    // present: one entry read per bank the plan needs. `page_keys`:
    // ObjectStore::PageKeys of this plan for the page, or empty. A plan
    // must be Current(). False while the index is concealed.
    bool PageHas(uint64_t tenant_seed, const PageDigest& digest, const SlotPlan& plan,
                 std::span<const Fingerprint> page_keys = {}) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return PageTier(tenant_seed, digest, plan, page_keys) != MediumTiers::kAbsent;
    }
    // ... and the page's tier: the slowest of its keys' (TierOfMedia);
    // MediumTiers::kAbsent when not every key is present.
    uint8_t PageTier(uint64_t tenant_seed, const PageDigest& digest, const SlotPlan& plan,
                     std::span<const Fingerprint> page_keys = {}) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      if (index_.concealed_.load(std::memory_order_relaxed)) return MediumTiers::kAbsent;
      return index_.store_.PageTier(
          tenant_seed, digest, plan, page_keys, [this](MediaSet media) { return index_.TierOfMedia(media); },
          MediumTiers::kAbsent);
    }
    // One key, whole.
    bool Contains(uint64_t tenant_seed, std::string_view object_key) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return !index_.concealed_.load(std::memory_order_relaxed) && index_.store_.Contains(tenant_seed, object_key);
    }
    // A present key's tier; MediumTiers::kAbsent if it is absent.
    uint8_t KeyTier(uint64_t tenant_seed, std::string_view object_key) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      if (!Contains(tenant_seed, object_key)) return MediumTiers::kAbsent;
      return index_.TierOfMedia(index_.store_.Media(tenant_seed, object_key));
    }

   private:
    const Index& index_;
  };

  // ---- tiers (medium_tiers.h) ----

  const MediumTiers& tiers() const { return tiers_; }
  // A key's tier: the fastest tier among its media; the slowest tier when
  // they are unknown (0). A constant table, made with the index.
  uint8_t TierOfMedia(MediaSet media) const { return tier_of_media_[media]; }

  // ---- counters ----

  Stats GetStats() const;

  // Whether zero bytes are an empty bucket of every table the index keeps
  // (fingerprint_table.h maps large tables and does not write them first).
  static bool TablesStartAsZeroBytes() { return ObjectStore::TablesStartAsZeroBytes(); }
  // The counters, to read (GetStats copies them with the tables' gauges).
  const Counters& counters() const { return counters_; }
  // The rows the subscriber's thread keeps of its own doings, and those
  // queries keep (each thread on its stripes). The apply path's rows are
  // the index's own; from outside it they move only through the Count*
  // calls below. Nothing steers by a counter.
  FeedCounters& feed_counters() { return counters_; }
  QueryCounters& query_counters() { return counters_; }
  // A message the decoder refused (it changed nothing).
  void CountMalformedMessage() { counters_.malformed_messages.Add(); }
  // Events of a type the index does not use.
  void CountIgnoredEvents(uint64_t n) { counters_.ignored_events.Add(n); }
  // A gap or a restart a resync's buffer showed: the stream broke where the
  // index did not see it (its replay begins after the break).
  void CountStreamBreak(bool restart) {
    (restart ? counters_.restarts_suspected : counters_.sequence_gaps).Add();
  }
  uint64_t max_entries() const { return max_entries_; }
  // This index's number, never another's in the process (a query's thread
  // keeps slot plans made for one index by it: query/query_plans.h).
  uint64_t serial() const { return serial_; }

  // What breaks the store's invariants, or "" (ObjectStore::Inconsistency,
  // and the index's counts of what it holds). A walk of everything: for tests.
  std::string Inconsistency() const ABSL_LOCKS_EXCLUDED(apply_mu_, tables_lock_);
  // Tables renewed before a store since the index was made (ObjectStore::
  // renewals; docs/architecture.md, I57). For tests.
  uint64_t TableRenewals() const ABSL_LOCKS_EXCLUDED(apply_mu_, tables_lock_);

 private:
  // ApplyEvent takes tables_lock_ itself; the helpers below it expect it
  // held exclusively.
  // What a batch's events did, counted in locals and added to the shared
  // counters once per batch: an atomic add per event and kind cost the
  // writer about 4% of its rate (bench/apply_bench, paired).
  struct BatchTally {
    uint64_t events_applied = 0;
    uint64_t removals_per_medium = 0;
    uint64_t removals_whole_key = 0;
    uint64_t residency_mismatches = 0;
    PublisherGeneration generation = PublisherGeneration::kUnknown;  // the last one shown
  };
  void AddTally(BatchTally& tally);  // and empties it
  void ApplyEvent(uint64_t sequence, const Event& event, BatchTally& tally) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_)
      ABSL_LOCKS_EXCLUDED(tables_lock_);
  // An object key, named as the store files it, worked out with no lock held.
  struct KeyName {
    uint64_t tenant_seed = 0;
    std::string_view object_key;   // the key itself (a view of the event's)
    ObjectStore::Place place;      // where the store keeps it
    bool digest_ended = false;     // the key ends "<digest_key_separator_><64 hex digits>": event_digests_ knows it
    EventHashDigests::Digest digest;  // with digest_ended
  };
  KeyName NameKey(uint64_t tenant_seed, std::string_view object_key) const ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // The store as its writer may use it without the table lock: the thread
  // holding apply_mu_ is the only one that changes the store, so it may
  // read it unlocked (prefetch a key's line, see whether a table is full)
  // and build a grown table beside it (ObjectStore::MakeRoom takes the
  // table lock for the swap). The analysis cannot tell such a read from a
  // reader's, hence the exemption, kept to this one accessor.
  ObjectStore& WriterStore() ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) ABSL_NO_THREAD_SAFETY_ANALYSIS { return store_; }
  // `medium`: the stored medium's bit under the per-medium rule (0:
  // unknown, and always under the object rule). Under it, a removal takes
  // `medium` (0: unknown, every medium) off the key, which stays while
  // another holds it (then counted in medium_removals_kept).
  void StoreKey(const KeyName& key, MediaSet medium) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  void RemoveKey(const KeyName& key, MediaSet medium) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  // The gauges' side of a store or removal: the key count, keys per tag
  // and per tier, the event-hash digests.
  void Account(const KeyName& key, const SlotChange& change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  // Once per index and direction: the stream contradicts the residency
  // option (ApplyEvent says which way).
  void WarnOfResidencyMismatch(bool first_generation_removal);
  // Logs, once, that every slot number is taken (keys of new slots are then
  // stored whole); with tables_lock_ released (a log callback may query).
  void WarnIfSlotNumbersRanOut() ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) ABSL_LOCKS_EXCLUDED(tables_lock_);
  // A tenant's `cleared`: every key of the tenant goes, as by a removal.
  // How depends on what it holds (tenant_keys.h): nothing; its few keys,
  // removed by name; else every key with its tag (fingerprint.h), other
  // tenants' too, a bounded run of the tables at a time, or the whole
  // store when the tag holds every key.
  enum class TenantClear { kNothing, kByName, kTagWalk, kWhole };
  static const char* Describe(TenantClear how) {
    switch (how) {
      case TenantClear::kNothing: return "it held no key";
      case TenantClear::kByName: return "its keys removed by name";
      case TenantClear::kTagWalk: return "every key of its tenant tag dropped (a walk of the store)";
      case TenantClear::kWhole: return "every key dropped (its tenant tag held them all)";
    }
    return "";
  }
  TenantClear ClearTenant(uint64_t tenant_seed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) ABSL_LOCKS_EXCLUDED(tables_lock_);
  void RemoveNamedKeys(uint64_t tenant_seed, const TenantKeys::Names& names) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_)
      ABSL_LOCKS_EXCLUDED(tables_lock_);
  // ClearTables also resets the cursor; EmptyTables leaves it alone (a
  // tenant's clear inside a batch).
  void ClearTables() ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) ABSL_LOCKS_EXCLUDED(tables_lock_);
  void EmptyTables() ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) ABSL_LOCKS_EXCLUDED(tables_lock_);
  // Counts a clear the tables have just had (stats and clear_epoch()).
  void CountClear() ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_);
  bool HasRoom() const;

  const uint64_t serial_;
  const uint64_t max_entries_;
  const Residency residency_;
  const MediumTiers tiers_;
  // TierOfMedia's table, by MediaSet.
  std::array<uint8_t, 256> tier_of_media_{};
  WarnOnce residency_mismatch_warning_;  // per-medium on a first-generation stream
  WarnOnce residency_mismatch_note_;     // the object rule on a second-generation stream
  const std::string digest_key_separator_;  // IndexOptions::digest_key_separator

  // Guards the store and the digest map: see "Concurrency" above.
  mutable TableLock tables_lock_;
  ObjectStore store_ ABSL_GUARDED_BY(tables_lock_);
  // Digests of keys ending "<digest_key_separator_><digest>", by their low
  // 64 bits (event_hash_digests.h).
  EventHashDigests event_digests_ ABSL_GUARDED_BY(tables_lock_);
  bool slot_numbers_warned_ ABSL_GUARDED_BY(apply_mu_) = false;
  // Medium numbers, for the per-medium rule.
  MediaNames media_names_ ABSL_GUARDED_BY(apply_mu_);
  // Present keys by tenant tag (fingerprint.h): a tenant's clear walks the
  // tables only when its tag holds some keys, and empties them whole when
  // it holds them all.
  std::array<uint64_t, 256> keys_by_tag_ ABSL_GUARDED_BY(apply_mu_) = {};
  // Present keys by tenant, and the names of a small tenant's: what its
  // clear must do (tenant_keys.h).
  TenantKeys tenant_keys_ ABSL_GUARDED_BY(apply_mu_);

  // Sizes, kept beside the tables so stats and capacity checks need no lock.
  std::atomic<uint64_t> key_count_{0};
  std::atomic<uint64_t> page_entry_count_{0};
  std::atomic<uint64_t> stores_past_slot_capacity_{0};
  // Present keys by tier (TierOfMedia): the keys_tier<t> gauges. Written by
  // the writer alone (apply_mu_), so a load and a store, no locked add.
  std::array<std::atomic<uint64_t>, MediumTiers::kMax> keys_at_tier_{};
  void CountKeysAtTier(uint8_t tier, int64_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) {
    std::atomic<uint64_t>& count = keys_at_tier_[tier];
    count.store(count.load(std::memory_order_relaxed) + static_cast<uint64_t>(n), std::memory_order_relaxed);
  }

  // Serialises writers; guards the cursor and the deferral.
  // Taken before tables_lock_, never after it.
  mutable AnnotatedMutex apply_mu_ ABSL_ACQUIRED_BEFORE(tables_lock_);
  // The sequence rules and where the stream stands (stream_cursor.h).
  StreamCursor cursor_ ABSL_GUARDED_BY(apply_mu_);
  std::atomic<uint64_t> clear_epoch_{0};  // see clear_epoch()
  bool deferring_ ABSL_GUARDED_BY(apply_mu_) = false;  // DeferStores
  DeferredStores deferred_ ABSL_GUARDED_BY(apply_mu_);
  // See Conceal(). Written by the writer; readers test it with tables_lock_
  // held, so a reader that can see a snapshot key also sees the concealment.
  std::atomic<bool> concealed_{false};

  Counters counters_;
};

}  // namespace sci
