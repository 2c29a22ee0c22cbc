// The shared-cache index: which physical objects are present, the group
// each was stored under, which groups are verified, and the sequence cursor
// that keeps it all exact. Semantics: docs/index-semantics.md.
//
// Concurrency. One writer at a time (ApplyBatch, Clear; serialised by
// apply_mu_) and any number of readers share one writer-preferring
// reader/writer lock over all tables. The writer holds it for one event at a
// time; a reader for one lookup, or for the keys of one page (CheckKeys),
// so neither side ever waits for the other's whole batch or query. A table
// grows by a rebuild the writer makes outside the lock and swaps in under
// it (MakeRoom), so readers never wait for a rebuild. The tables are split
// into 8 shards so that the writer's own pause for one (the events it has
// not applied meanwhile wait in the subscriber's socket) is 1/8th of the
// index; more, smaller shards cost queries: below 2 MiB a table gets no
// huge pages, and its lookups miss the TLB (fingerprint_table.h).
// Counters are atomics, readable at any moment; the readers' ones are
// striped per thread, like the lock's reader counts, so that querying
// threads write no line in common. These rules are checked by
// clang's -Wthread-safety (abseil's annotations below; scripts/test.sh).
//
// Groups of keys. Each present key remembers the group it was stored under
// as a 24-bit GroupRef (0 = none) in its entry (key_entry.h): a slot number
// the group keeps for as long as any key refers to it, so it is exact (never
// another group's) while costing 3 bytes per key instead of a 16-byte
// fingerprint. The entry's other byte holds the key's media (per-medium
// residency). A group lives
// while keys refer to it. Every change to the set of keys stored under a
// group -- a key stored, re-stored elsewhere or removed -- invalidates the
// group (new generation, verification dropped), and a page query marks a
// group verified only if every key it checked was stored under that group
// and the generation it probed is unchanged. So a verified group's keys all
// point at it, and any removal of one of them reaches it: a removal
// invalidates its key's group and its labelled group, nothing else.
//
// The page summary (page_tails.h). Pages of three or more keys stored
// under their group get one line saying which of their keys (by tail) are
// present, kept by the writer beside the keys: a page whose group is known
// but not verified is then checked by reading that line instead of each
// key's. It holds nothing the key table does not; pages without an entry,
// and tails without a number (tail_interner.h), are checked key by key.
//
// Adoption (adoption_queue.h). A page proven present key by key whose group
// is unknown -- nearly always a page loaded from a snapshot, whose keys
// carry no group -- is asked to be adopted; the writer, before its next
// batch, checks that every key is still present and stored under no group,
// and that the group is still unknown, then stores the keys under the group
// and marks it verified for the asking layout: the state a query's key
// check would leave had the keys come from the stream with their group.
//
// Stray keys (stray_keys.h). Groups named after their keys' head
// ("<IndexOptions::head_group_prefix><head>") remember the head; a present
// key not
// stored under its head's group is counted by that group, so an unknown
// group with no such count proves its page's keys absent.
//
// Verification. A group's verification word packs (verify epoch, layout id).
// It counts only while its epoch is the index's current one, so a clear
// drops every verification with one epoch bump instead of a walk.
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
#include "index/adoption_queue.h"
#include "index/annotated_mutex.h"
#include "common/warn_once.h"
#include "index/deferred_stores.h"
#include "index/event.h"
#include "index/event_hash_digests.h"
#include "index/fingerprint.h"
#include "index/fingerprint_table.h"
#include "index/key_entry.h"
#include "index/media_names.h"
#include "index/medium_tiers.h"
#include "index/object_store.h"
#include "index/page_tails.h"
#include "index/table_lock.h"
#include "index/tier_counts.h"
#include "index/stats.h"
#include "index/stream_cursor.h"
#include "index/stray_keys.h"
#include "index/tail_interner.h"

namespace sci {

// Identifies the layout (key derivation) that verified a group. 0 = none.
using LayoutId = uint32_t;

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
  uint64_t max_entries = kDefaultMaxEntries;  // keys + groups
  Residency residency = Residency::kObject;
  // The index itself knows no layout family: whoever makes it passes the
  // conventions of the families it serves (each family's layout header
  // offers its options).
  //
  // A family that names a page's group after its keys' head: the group id
  // is this followed by the head. Set, the index counts stray keys under it
  // (stray_keys.h), so a query may take an unknown group with no stray for
  // an absent page (HeadNamedGroupsCounted). Empty: the index counts none.
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
};

// What a query learned about a group before checking its keys.
struct GroupProbe {
  bool verified = false;     // verified for the asking layout: a hit, no key check needed
  bool exists = false;       // the group is known (it can be marked verified)
  uint64_t generation = 0;   // changes whenever the group is invalidated
  uint32_t verify_epoch = 0; // epoch the verification would be made in
  GroupRef ref = kNoGroup;   // what the group's keys refer to it by
  // With exists: how many of the group's keys are at each tier
  // (tier_counts.h), read in the same hold as `verified`; tier() is the
  // slowest tier among them. Copied raw: the plain query never asks.
  uint32_t tier_counts = 0;
  uint8_t tier() const { return TierCounts::SlowestTier(tier_counts); }
  // With !exists: whether a key whose head names this group (stray_keys.h)
  // may be present under no group or another one. False proves, for a
  // layout naming its groups after its keys' heads, every key of the page
  // absent.
  bool strays_possible = false;
};

// What a query learned about the tails a page needs (RequiredTails).
struct RequiredTails {
  enum class State {
    kSummarised,   // `mask`: the tail numbers; a page is present iff its head has them all
    kNeverStored,  // a tail no key was ever stored with: no page needing it is present
    kUnsummarised, // a tail without a number: check the page key by key
  };
  State state = State::kUnsummarised;
  uint64_t mask = 0;
};

// What a query learned about a page's keys.
struct KeyCheck {
  bool all_present = false;      // every key is present
  bool all_under_group = false;  // ... and each was stored under the expected group
  uint8_t tier = 0;              // with all_present, if asked for: the slowest of the keys' tiers
};

// What the page summary said of a page (CheckPageTails).
struct PageTailsCheck {
  bool summarised = false;  // false: the page has no summary entry; check its keys
  KeyCheck keys;
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

  // Forgets keys, groups and the cursor; counts a clear.
  void Clear() ABSL_LOCKS_EXCLUDED(apply_mu_, tables_lock_);

  // ---- resync (feed/resync.h): load a snapshot that no query may see yet ----

  // Empties the index (keys, groups, cursor; not counted as a clear: the
  // resync that asks for it is counted instead) and conceals it: until
  // Reveal(), every lookup answers "absent" and no group is verified, so a
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

  // Stores `keys` in the default tenant under no group, leaving the cursor
  // and the batch / event counters alone (snapshot keys are not events).
  // Keys must be non-empty and at most kMaxObjectKeyBytes long. The
  // capacity bound applies as for stored events.
  void LoadKeys(std::span<const std::string_view> keys) ABSL_LOCKS_EXCLUDED(apply_mu_, tables_lock_);
  // Sizes the key tables for `keys` present keys (at most max_entries), so
  // that loading a snapshot of that many rebuilds no table: a rebuild holds
  // a table's old and new arrays at once (at 30M keys about 100 MB more).
  // Never shrinks a table; out of memory, it leaves them as they are.
  void ReserveKeys(uint64_t keys) ABSL_LOCKS_EXCLUDED(apply_mu_, tables_lock_);

  // ---- adoption (see "Adoption" above) ----

  // A query proved every key of a page present (`keys`: the whole key set of
  // `layout`'s page; `head`: their common head, for split keys) while its
  // group was unknown: asks the writer to adopt the page into `group`
  // (`tenant_seed`: the keys' tenant's, for the head's summary entry). It
  // happens with the next batch applied, or AdoptRequestedGroups. Never
  // waits for the writer; a request the bounded queue cannot take is dropped.
  // `group_named_by_head`: `group` is the group named after `head`
  // ("<head_group_prefix><head>"; HeadNamedGroupsCounted).
  void RequestAdoption(const Fingerprint& group, LayoutId layout, std::span<const Fingerprint> keys,
                       const Fingerprint* head, uint64_t tenant_seed, bool group_named_by_head) {
    adoption_queue_.Push(group, layout, keys, head, tenant_seed, group_named_by_head);
  }
  // Adopts what was requested (ApplyBatch does this first, every batch; a
  // subscriber's thread also does on the listener's wake-up, below).
  void AdoptRequestedGroups() ABSL_LOCKS_EXCLUDED(apply_mu_, tables_lock_);
  // Called by the first request into an empty queue (from the querying
  // thread, with no lock of the index held): a subscriber wakes its thread
  // to adopt. One at a time; nullptr removes it, and once that returns it
  // is never called again.
  void SetAdoptionListener(std::function<void()> listener) { adoption_queue_.SetListener(std::move(listener)); }

  // ---- reader side (any number of threads, concurrently with the writer) ----

  // Each of these takes the reader lock for its own lookups; a caller with
  // several lookups to make at once holds one Reader instead (below).
  bool Contains(std::string_view tenant, std::string_view object_key) const ABSL_LOCKS_EXCLUDED(tables_lock_);
  bool ContainsKey(const Fingerprint& key) const ABSL_LOCKS_EXCLUDED(tables_lock_);
  // The digest that present keys of the tenant whose seed is `tenant_seed`
  // (by its tag, fingerprint.h) ending "<digest_key_separator><64 hex
  // digits>" carry for an engine's 64-bit event hash (event_hash_digests.h);
  // false when none or more than one does, or with no separator.
  bool DigestOfEventHash(uint64_t tenant_seed, uint64_t event_hash, std::array<uint8_t, 32>* digest) const
      ABSL_LOCKS_EXCLUDED(tables_lock_);
  // The same for the default tenant.
  bool DigestOfEventHash(uint64_t event_hash, std::array<uint8_t, 32>* digest) const
      ABSL_LOCKS_EXCLUDED(tables_lock_) {
    return DigestOfEventHash(TenantSeed({}), event_hash, digest);
  }
  // Entries of the event-hash digest map: one per (low 64 bits, tenant tag)
  // of present digest-ended keys. For tests (a tenant's clear takes its own
  // away).
  size_t EventHashDigestEntries() const ABSL_LOCKS_EXCLUDED(tables_lock_) {
    ReaderLock lock(tables_lock_);
    return event_digests_.size();
  }
  // Whether every key is present, and whether each was stored under
  // `group` (a probe's ref; kNoGroup: never), looked up under one lock hold
  // with the table lines of all of them prefetched first, so their cache
  // misses overlap. Callers keep `keys` short (one page's worth).
  KeyCheck CheckKeys(std::span<const Fingerprint> keys, GroupRef group) const ABSL_LOCKS_EXCLUDED(tables_lock_);
  bool ContainsAll(std::span<const Fingerprint> keys) const ABSL_LOCKS_EXCLUDED(tables_lock_) {
    return CheckKeys(keys, kNoGroup).all_present;
  }

  // Whether the index counts stray keys under groups named
  // "<group_prefix><head>" (IndexOptions::head_group_prefix): only then may
  // a query of a layout naming its groups so take an unknown group with no
  // stray for an absent page.
  bool HeadNamedGroupsCounted(std::string_view group_prefix) const {
    return !head_group_prefix_.empty() && group_prefix == head_group_prefix_;
  }

  // Reads a group's state for `layout`. Fingerprints come from FingerprintOf
  // with the tenant's seed.
  GroupProbe ProbeGroup(const Fingerprint& group, LayoutId layout) const ABSL_LOCKS_EXCLUDED(tables_lock_);

  // Marks `group` verified for `layout` after a query proved every key of
  // its page present and stored under it (CheckKeys with probe.ref), but
  // only if nothing invalidated the group since `probe` was taken (same
  // generation, same verify epoch). Returns whether it marked.
  bool MarkVerified(const Fingerprint& group, const GroupProbe& probe, LayoutId layout)
      ABSL_LOCKS_EXCLUDED(tables_lock_);

  // Several lookups under one hold of the reader lock: the page query's way
  // of paying for the lock once for many pages (each hold is two locked
  // writes to the thread's stripe of the lock and two reads of the writer's
  // word: rw_lock.h). Prefetches let the caller start the table lines it
  // will need in a later hold on their way while it computes something else.
  // Hold it for lookups only (a writer waits for it), and never apply
  // events while holding it (that would wait for itself).
  //
  // Lock analysis: the hold is this object's lifetime, which clang's
  // -Wthread-safety cannot see inside the member functions; they are exempt
  // from it and only forward to the *Locked functions, which require the
  // lock held shared.
  class ABSL_SCOPED_LOCKABLE Reader {
   public:
    explicit Reader(Index& index) ABSL_SHARED_LOCK_FUNCTION(index.tables_lock_) : index_(index) {
      index_.tables_lock_.ReaderLock();
    }
    ~Reader() ABSL_UNLOCK_FUNCTION() { index_.tables_lock_.ReaderUnlock(); }
    Reader(const Reader&) = delete;
    Reader& operator=(const Reader&) = delete;

    void PrefetchKey(const Fingerprint& key) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      const PackedKey packed(key);
      index_.key_shards_[ShardOf(packed)].prefetch(packed);
    }
    void PrefetchGroup(const Fingerprint& group) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      index_.groups_.prefetch(PackedKey(group));
    }
    bool ContainsKey(const Fingerprint& key) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return index_.ContainsKeyLocked(key);
    }
    // Index::CheckKeys without its prefetch (the caller prefetched the keys).
    KeyCheck CheckKeys(std::span<const Fingerprint> keys, GroupRef group) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return index_.CheckKeysLocked<false>(keys, group);
    }
    // ... with the keys' tier (KeyCheck::tier), for a tier query.
    KeyCheck CheckKeysWithTier(std::span<const Fingerprint> keys, GroupRef group) const
        ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return index_.CheckKeysLocked<true>(keys, group);
    }
    // Whether every key is present (no prefetch: the caller prefetched them).
    bool ContainsAll(std::span<const Fingerprint> keys) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return index_.CheckKeysLocked<false>(keys, kNoGroup).all_present;
    }
    GroupProbe ProbeGroup(const Fingerprint& group, LayoutId layout) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return index_.ProbeGroupLocked(group, layout);
    }
    // The page summary (page_tails.h): the tail numbers of `tail_ids`
    // (TailId of each tail a page needs), once per layout level and query;
    // then, per page, its head's present tails, one line.
    RequiredTails FindRequiredTails(std::span<const Fingerprint> tail_ids) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return index_.FindRequiredTailsLocked(tail_ids);
    }
    void PrefetchPageTails(const Fingerprint& head) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      index_.page_tails_.prefetch(PackedKey(head));
    }
    // Whether every key the tails stand for is present under `head` (all
    // of `required.mask`), and whether each was stored under `group`; or
    // that the page has no entry (pages of few keys, or not yet
    // summarised: page_tails.h), whose keys the caller then checks.
    PageTailsCheck CheckPageTails(const Fingerprint& head, uint64_t required, GroupRef group) const
        ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return index_.CheckPageTailsLocked(head, required, group);
    }
    bool MarkVerified(const Fingerprint& group, const GroupProbe& probe, LayoutId layout) const
        ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return index_.MarkVerifiedLocked(group, probe, layout);
    }
    // The slowest tier among the keys stored under `group`, if it is still
    // the group `ref` stands for; MediumTiers::kAbsent if not (or concealed).
    uint8_t GroupTier(const Fingerprint& group, GroupRef ref) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return index_.GroupTierLocked(group, ref);
    }

   private:
    Index& index_;
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
  static bool TablesStartAsZeroBytes() {
    return KeyTable::EmptyBucketIsZeroBytes() && GroupTable::EmptyBucketIsZeroBytes() &&
           PageTailsTable::EmptyBucketIsZeroBytes();
  }
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

 private:
  static constexpr size_t kShardBits = 3;
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

  // Written only with tables_lock_ held exclusively, except the
  // verification word (see VerificationWord). 24 bytes: three to a pair of
  // lines (fingerprint_table.h).
  struct GroupState {
    // Two facts in one word (low 40 bits, high 24):
    //  - the generation, which changes whenever the group is invalidated.
    //    40 bits: it is compared only between a query's probe and its
    //    mark, microseconds apart, and only 2^40 invalidations between
    //    them could fool it;
    //  - how many of its keys are at tiers 1, 2 and 3, a byte each (tier
    //    0: the rest), so that a probe reads the group's tier with its
    //    state (TierCounts below). The index keeps them as it keeps
    //    `keys`: AttachKey, DetachKey, Retier.
    uint64_t generation_and_tiers = 0;
    static constexpr uint64_t kGenerationMask = (uint64_t{1} << 40) - 1;
    uint64_t generation() const { return generation_and_tiers & kGenerationMask; }
    void set_generation(uint64_t generation) {
      generation_and_tiers = (generation_and_tiers & ~kGenerationMask) | (generation & kGenerationMask);
    }
    uint32_t tier_counts() const { return static_cast<uint32_t>(generation_and_tiers >> 40); }
    void set_tier_counts(uint32_t counts) {
      generation_and_tiers = (generation_and_tiers & kGenerationMask) | (uint64_t{counts} << 40);
    }
    VerificationWord verification;
    GroupRef ref = kNoGroup;  // fixed for the group's life
    uint32_t keys = 0;        // present keys stored under it; the group goes at 0
  };
  static_assert(sizeof(GroupState) == 24, "three groups and their fingerprints fill a pair of lines");

  // Each table reads one line (keys) or one aligned pair of lines (groups)
  // per lookup, at an address prefetch() knows: fingerprint_table.h.
  using KeyTable = FingerprintTable<KeyEntry>;
  using GroupTable = FingerprintTable<GroupState>;
  using PackedKey = PackedFingerprint;

  // Key shards use the high bits of the fingerprint; the tables place by the low half.
  static size_t ShardOf(const Fingerprint& f) { return static_cast<size_t>(f.high >> (64 - kShardBits)); }
  static size_t ShardOf(const PackedKey& k) { return static_cast<size_t>(k.words[3] >> (32 - kShardBits)); }

  static uint64_t PackVerification(uint32_t epoch, LayoutId layout) {
    return (uint64_t{epoch} << 32) | layout;
  }
  uint32_t CurrentVerifyEpoch() const {
    return static_cast<uint32_t>(verify_state_.load(std::memory_order_acquire) >> 32);
  }

  // The stray_keys gauge: an atomic, read without the lock like the sizes.
  uint64_t StrayKeyCount() const ABSL_NO_THREAD_SAFETY_ANALYSIS { return strays_.strays(); }

  // With tables_lock_ held (shared or exclusive).
  bool ContainsKeyLocked(const Fingerprint& key) const ABSL_SHARED_LOCKS_REQUIRED(tables_lock_);
  // kWithTier: also the slowest of the keys' tiers (a plain query skips it).
  template <bool kWithTier>
  KeyCheck CheckKeysLocked(std::span<const Fingerprint> keys, GroupRef group) const
      ABSL_SHARED_LOCKS_REQUIRED(tables_lock_);
  GroupProbe ProbeGroupLocked(const Fingerprint& group, LayoutId layout) const
      ABSL_SHARED_LOCKS_REQUIRED(tables_lock_);
  bool MarkVerifiedLocked(const Fingerprint& group, const GroupProbe& probe, LayoutId layout)
      ABSL_SHARED_LOCKS_REQUIRED(tables_lock_);
  RequiredTails FindRequiredTailsLocked(std::span<const Fingerprint> tail_ids) const
      ABSL_SHARED_LOCKS_REQUIRED(tables_lock_);
  PageTailsCheck CheckPageTailsLocked(const Fingerprint& head, uint64_t required, GroupRef group) const
      ABSL_SHARED_LOCKS_REQUIRED(tables_lock_);
  uint8_t GroupTierLocked(const Fingerprint& group, GroupRef ref) const ABSL_SHARED_LOCKS_REQUIRED(tables_lock_);

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
  // AdoptRequestedGroups' work, with apply_mu_ held.
  void AdoptRequestedGroupsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) ABSL_LOCKS_EXCLUDED(tables_lock_);
  // Whether `keys` may be adopted into `group` now: room for a group, the
  // group unknown, every key present and stored under no group; if so,
  // grows the group table ahead of the adoption. Unlocked reads, as MakeRoom's.
  bool ReadyToAdopt(const Fingerprint& group, std::span<const Fingerprint> keys)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) ABSL_NO_THREAD_SAFETY_ANALYSIS;
  void Adopt(const AdoptionQueue::Request& request, std::span<const Fingerprint> keys)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) ABSL_LOCKS_EXCLUDED(tables_lock_);
  // An object key's fingerprint, and what the page summary needs of it.
  struct KeyName {
    Fingerprint key;
    uint64_t tenant_seed = 0;
    bool split = false;          // a split key: the summary records it
    Fingerprint head;            // with split: its head's part
    Fingerprint tail;            // with split: TailId of its tail
    std::string_view tail_bytes; // with split: the tail (a view of the event's key)
    std::string_view head_bytes; // with split: the head (a view of the event's key)
    bool digest_ended = false;   // the key ends "<digest_key_separator_><64 hex digits>": event_digests_ knows it
    std::string_view object_key;  // the key itself (a view of the event's), for the shadow store
    EventHashDigests::Digest digest;  // with digest_ended
  };
  KeyName NameKey(uint64_t tenant_seed, std::string_view object_key) const;
  // `group_head`: the head part `group` is named after (HeadNamedBy), or
  // zero. `medium`: the stored medium's bit under the per-medium rule (0:
  // unknown, and always under the object rule).
  void StoreKey(const KeyName& key, const Fingerprint* group, const Fingerprint& group_head, MediaSet medium = 0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  // Under the per-medium rule, takes `medium` (a bit; 0: unknown) off a
  // present key and says whether it is still on another medium (then the
  // removal changes nothing else). False: the key goes (RemoveKey).
  bool KeptOnAnotherMedium(const KeyName& key, MediaSet medium) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  // Once per index and direction: the stream contradicts the residency
  // option (ApplyEvent says which way).
  void WarnOfResidencyMismatch(bool first_generation_removal);
  // A tenant's `cleared`: every key with the tenant's tag (fingerprint.h)
  // goes, as by a removal, a bounded run of the table at a time.
  void ClearTenant(uint64_t tenant_seed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) ABSL_LOCKS_EXCLUDED(tables_lock_);
  void RemoveKey(const KeyName& key, const Fingerprint* label) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  // The summary's side of StoreKey (`group`: the key's group now, or null)
  // and RemoveKey.
  void AddTail(const KeyName& key, const GroupState* group) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  // A new summary entry for `key`'s page: its tails present, found by
  // looking up the head with every numbered tail.
  PageTails SummarisePage(uint64_t tenant_seed, const Fingerprint& head)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  // A mixed entry (page_tails.h) summarised again once `group`, a group its
  // head's keys are stored under, holds as many keys as the entry has tails.
  void SummariseAgainIfWhole(PageTails& tails, uint64_t tenant_seed, const Fingerprint& head, const GroupState& group)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  // The tail number of `key` (TailInterner::Intern), keeping tail_numbers.
  int NumberTail(const KeyName& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  // Logs, once, that the last tail number was taken; with tables_lock_
  // released (a log callback may query).
  void WarnIfTailNumbersRanOut() ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) ABSL_LOCKS_EXCLUDED(tables_lock_);
  void RemoveTail(const KeyName& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  GroupState* FindGroup(const Fingerprint& group) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  // The group's state, created if need be (null when there is no room),
  // invalidated: a key is about to be stored under it. A new group
  // remembers `named_head` (zero: named after no head).
  GroupState* AcquireGroup(const Fingerprint& group, const Fingerprint& named_head)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  // Stray keys (stray_keys.h). The head part a group id is named after:
  // "<head_group_prefix_><head>", the head a split key could have; else zero.
  Fingerprint HeadNamedBy(uint64_t tenant_seed, std::string_view group_id, const KeyName& key) const;
  // Whether present `key`, stored under `ref`, is a stray.
  bool IsStray(const KeyName& key, GroupRef ref) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) {
    return !head_group_prefix_.empty() && key.split && (ref == kNoGroup || refs_[ref].named_head != key.head);
  }
  // The fingerprint of the group named after `key`'s head (a split key made
  // from its bytes), which counts it while it is a stray.
  Fingerprint HeadGroupOf(const KeyName& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_);
  // A prefetch of the slot (no read: the writer is the only thread that
  // writes the counts, so it needs no lock for a hint).
  void PrefetchStraySlot(const Fingerprint& group) const ABSL_NO_THREAD_SAFETY_ANALYSIS { strays_.Prefetch(group); }
  // A key at `tier` is stored under `state`.
  static void AttachKey(GroupState& state, uint8_t tier) {
    ++state.keys;
    state.set_tier_counts(TierCounts::Add(state.tier_counts(), tier, true));
  }
  // A key at `tier` stored under `ref` leaves it: invalidated, erased with
  // its last key.
  void DetachKey(GroupRef ref, uint8_t tier) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  // A key stored under `ref` moved from tier `from` to `to` (its media
  // changed). Nothing else of the group changes: its keys are the same.
  void Retier(GroupRef ref, uint8_t from, uint8_t to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  void Invalidate(GroupState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  void DropAllVerification() ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  void ForgetVerification(const GroupState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_, tables_lock_);
  // Takes tables_lock_ shard by shard. ClearTables also resets the cursor;
  // EmptyTables leaves it alone (a tenant's clear inside a batch).
  void ClearTables() ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) ABSL_LOCKS_EXCLUDED(tables_lock_);
  void EmptyTables() ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) ABSL_LOCKS_EXCLUDED(tables_lock_);
  // Counts a clear the tables have just had (stats and clear_epoch()).
  void CountClear() ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_);
  bool HasRoom() const;
  // Grows, ahead of a store, the key and group tables it may insert into,
  // building each grown table outside tables_lock_ and swapping it in under
  // it: readers wait for a swap, never for a rebuild. Unlocked reads of the
  // tables, as WarmUp's (see there).
  void MakeRoom(const KeyName& key, const Fingerprint* group) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_)
      ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // ReserveKeys' work, the same way (may throw bad_alloc, changing nothing
  // of the table it was building).
  void ReserveKeyTables(uint64_t keys) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // Touches the slots an event will update, without tables_lock_: the writer
  // (apply_mu_) is the only thread that changes the tables, so it may read
  // them unlocked. The analysis cannot know that; see the definition.
  void WarmUp(const KeyName& key, const Fingerprint* group) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_)
      ABSL_NO_THREAD_SAFETY_ANALYSIS;

  const uint64_t max_entries_;
  const Residency residency_;
  const MediumTiers tiers_;
  // TierOfMedia's table, by MediaSet.
  std::array<uint8_t, 256> tier_of_media_{};
  WarnOnce residency_mismatch_warning_;  // per-medium on a first-generation stream
  WarnOnce residency_mismatch_note_;     // the object rule on a second-generation stream
  const std::string head_group_prefix_;     // IndexOptions::head_group_prefix
  const std::string digest_key_separator_;  // IndexOptions::digest_key_separator

  // Guards every table below: see "Concurrency" above.
  mutable TableLock tables_lock_;
  std::array<KeyTable, kShards> key_shards_ ABSL_GUARDED_BY(tables_lock_);
  // Groups are one table: 16 times fewer than keys (tp8), it is a few MiB,
  // so it gets huge pages (the fast path probes one line per page), and its
  // rebuild is no longer than a key shard's.
  GroupTable groups_ ABSL_GUARDED_BY(tables_lock_);
  // The page summary (page_tails.h), by head, two heads to a line: about a
  // sixteenth as many entries as keys (tp8), one table like the groups.
  using PageTailsTable = FingerprintTable<PageTails, 2>;
  PageTailsTable page_tails_ ABSL_GUARDED_BY(tables_lock_);
  // Tail numbers: never taken back, not even by a clear (tail_interner.h).
  TailInterner tails_ ABSL_GUARDED_BY(tables_lock_);
  // Digests of keys ending "<digest_key_separator_><digest>", by their low
  // 64 bits (event_hash_digests.h).
  EventHashDigests event_digests_ ABSL_GUARDED_BY(tables_lock_);
  // Stray keys by their head's group (stray_keys.h); 1 MiB, apart.
  StrayKeyCounts strays_ ABSL_GUARDED_BY(tables_lock_);

  // Writer only (apply_mu_), never read by queries: what each ref stands
  // for, and the refs of erased groups, for reuse. A ref is reused only
  // once no key refers to it. A deque grows in small blocks: no copy of the
  // whole array, and no doubling slack. One entry per ref holds both of its
  // facts, so a failed allocation cannot leave them a ref apart; free_refs_
  // has room for every ref (reserved as refs are made), so giving one back
  // never allocates.
  struct RefInfo {
    Fingerprint group;       // the group the ref stands for
    Fingerprint named_head;  // the head part its group is named after (zero: none), for IsStray
  };
  std::deque<RefInfo> refs_ ABSL_GUARDED_BY(apply_mu_) = {RefInfo{}};  // [kNoGroup] unused
  std::vector<GroupRef> free_refs_ ABSL_GUARDED_BY(apply_mu_);
  // HeadGroupOf's last group-id prefix (head_group_prefix_ and what the
  // head holds before its digits), with its secret.
  std::string head_group_name_ ABSL_GUARDED_BY(apply_mu_);
  HashEndSecret head_group_secret_ ABSL_GUARDED_BY(apply_mu_){};
  uint64_t head_group_seed_ ABSL_GUARDED_BY(apply_mu_) = 0;
  // SummarisePage's FingerprintPart of each numbered tail, for one tenant
  // (nearly always the only one): 16 XXH3 passes less per tp8 page.
  std::array<Fingerprint, TailInterner::kCapacity> tail_parts_ ABSL_GUARDED_BY(apply_mu_);
  uint64_t tail_parts_seed_ ABSL_GUARDED_BY(apply_mu_) = 0;
  uint32_t tail_parts_known_ ABSL_GUARDED_BY(apply_mu_) = 0;  // tail_parts_[0, this) are for tail_parts_seed_
  bool tail_numbers_warned_ ABSL_GUARDED_BY(apply_mu_) = false;
  // Medium numbers, for the per-medium rule.
  MediaNames media_names_ ABSL_GUARDED_BY(apply_mu_);
  // Present keys by tenant tag (fingerprint.h): a tenant's clear walks the
  // key tables only when its tag holds some keys, and empties them whole
  // when it holds them all.
  std::array<uint64_t, 256> keys_by_tag_ ABSL_GUARDED_BY(apply_mu_) = {};

  // Sizes, kept beside the tables so stats and capacity checks need no lock.
  std::atomic<uint64_t> key_count_{0};
  // Present keys by tier (TierOfMedia): the keys_tier<t> gauges. Written by
  // the writer alone (apply_mu_), so a load and a store, no locked add.
  std::array<std::atomic<uint64_t>, MediumTiers::kMax> keys_at_tier_{};
  void CountKeyAtTier(uint8_t tier, bool add) ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_) {
    std::atomic<uint64_t>& n = keys_at_tier_[tier];
    n.store(add ? n.load(std::memory_order_relaxed) + 1 : n.load(std::memory_order_relaxed) - 1,
            std::memory_order_relaxed);
  }
  std::atomic<uint64_t> group_count_{0};
  std::atomic<uint64_t> summarised_count_{0};  // page_tails_.size()
  std::atomic<uint64_t> tail_number_count_{0};  // tails_.size()

  // High 32 bits: current verify epoch (starts at 1). Low 32 bits: how many
  // groups hold a verification of that epoch. One word, so that a bump
  // resets the count in the same store that invalidates the verifications.
  std::atomic<uint64_t> verify_state_{uint64_t{1} << 32};

  // Serialises writers; guards the cursor and the generation counter.
  // Taken before tables_lock_, never after it.
  mutable AnnotatedMutex apply_mu_ ABSL_ACQUIRED_BEFORE(tables_lock_);
  // The sequence rules and where the stream stands (stream_cursor.h).
  StreamCursor cursor_ ABSL_GUARDED_BY(apply_mu_);
  std::atomic<uint64_t> clear_epoch_{0};  // see clear_epoch()
  bool deferring_ ABSL_GUARDED_BY(apply_mu_) = false;  // DeferStores
  DeferredStores deferred_ ABSL_GUARDED_BY(apply_mu_);
  uint64_t next_generation_ ABSL_GUARDED_BY(apply_mu_) = 1;
  // See Hold(). Written by the writer; readers test it with tables_lock_
  // held, so a reader that can see a snapshot key also sees the hold.
  std::atomic<bool> concealed_{false};

  // Adoption requests from queries, and the writer's batch of them.
  AdoptionQueue adoption_queue_;
  std::unique_ptr<AdoptionQueue::Batch> adopting_ ABSL_GUARDED_BY(apply_mu_);

  Counters counters_;

  // The page store (object_store.h) kept beside the 1.3 tables, in the
  // builds that check invariants (SCI_DCHECK_ENABLED: the sanitizer, fuzz
  // and Debug builds) and null in others: the first step of moving the
  // index onto it (issue #43). Every write that changes the key tables
  // makes the same change to it, and reads check that both agree (I46):
  // the whole suite, the simulation and the fuzzers test the page store
  // against the index's own rules before any answer comes from it. A
  // member in every build, so the class is one size whatever the flags of
  // the file that includes it.
  std::unique_ptr<ObjectStore> shadow_ ABSL_GUARDED_BY(tables_lock_);
  // False from a shadow write that failed to allocate (then it may lack a
  // key) to the next full clear: nothing is checked meanwhile.
  bool shadow_valid_ ABSL_GUARDED_BY(tables_lock_) = true;
  // True while a clear walks the key tables over several holds of the lock:
  // they and the shadow differ until it ends, so reads check nothing.
  bool shadow_settling_ ABSL_GUARDED_BY(tables_lock_) = false;
  template <typename Write>
  void ShadowWrite(Write&& write) ABSL_EXCLUSIVE_LOCKS_REQUIRED(tables_lock_);
  // The shadow against the key tables, for one key or for the count: with
  // tables_lock_ held, shared or exclusive.
  void CheckShadowKey(uint64_t tenant_seed, std::string_view object_key) const
      ABSL_SHARED_LOCKS_REQUIRED(tables_lock_);
  void CheckShadowCount() const ABSL_SHARED_LOCKS_REQUIRED(tables_lock_);
};

// Inline: a page query probes a group per page, and a call returned the
// probe through memory, read back wider than it was written (a stalled
// store forward: a sixth of a verified page's lookup).
inline GroupProbe Index::ProbeGroupLocked(const Fingerprint& group, LayoutId layout) const {
  if (concealed_.load(std::memory_order_relaxed)) return GroupProbe{};
  const GroupState* state = groups_.find(PackedKey(group));
  GroupProbe probe;
  if (state == nullptr) {
    probe.strays_possible = strays_.MayHold(group);
    return probe;
  }
  probe.exists = true;
  probe.ref = state->ref;
  probe.generation = state->generation();
  probe.tier_counts = state->tier_counts();
  probe.verify_epoch = CurrentVerifyEpoch();
  probe.verified = layout != 0 && state->verification.word.load(std::memory_order_acquire) ==
                                      PackVerification(probe.verify_epoch, layout);
  return probe;
}

}  // namespace sci
