#include "sglang/page_query.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "index/fingerprint.h"
#include "query/query_accounting.h"
#include "query/round_pipeline.h"
#include "sglang/page_hash.h"

namespace sci {
namespace {

// Keys fingerprinted before any of them is looked up: their table lines are
// then prefetched together, under one lock hold, so the cache misses of a
// page's keys overlap instead of queueing.
constexpr uint32_t kKeysPerRound = 16;

// Pages per round. CheckPages runs the shared pipeline's three steps
// (query/round_pipeline.h, PageRounds below); each
//   - hashes round r (SHA-256, the bulk of the work) and prefetches its
//     groups' lines,
//   - probes round r-1's groups (their lines arrived while r was hashed),
//     and prefetches what its exact-path pages need: the page summary's
//     line of each page (index/page_tails.h), or, for tails the summary
//     does not hold, the page's keys,
//   - checks round r-2's summaries and keys (they arrived meanwhile) and
//     answers its pages.
// So the DRAM round trips hide behind hashing instead of adding to it, and
// each round costs two short reader-lock holds.
constexpr size_t kPagesPerRound = 16;

// A page between its hash and its answer.
struct PendingPage {
  size_t page = 0;
  const Layout::Level* level = nullptr;
  bool checkable = false;  // the page needs at least one key
  char hash[kPageHashHexLength];
  Fingerprint group;
  GroupProbe probe;
  Fingerprint head;  // its keys' head part, once an exact check by the summary needs it
};

// How a round's page not verified by its group is checked.
enum class ExactCheck : uint8_t {
  kOneByOne,   // Answer, after the round's batched checks
  kSummary,    // its head's present tails, one line (prefetched a step ahead)
  kKeys,       // its keys, prefetched a step ahead (an unknown group's too,
               // after a hit of one: see last_unknown_group_hit_)
  kFirstKey,   // an unknown group: its first key (prefetched a step ahead),
               // then, if present, Answer for the rest
  kAbsent,     // a tail it needs was never stored: a miss, nothing to read
};

// The keys of a round's exact-path pages (a tp8 round: 16 pages x 16 keys).
constexpr uint32_t kRoundKeys = kPagesPerRound * kKeysPerRound;

// A round of pages in the pipeline (PageRounds).
struct PageRound {
  size_t n = 0;  // pages in the round (0: none, as the pipeline fills or drains)
  PendingPage pages[kPagesPerRound];
  // How each page is checked if its group is not verified; kKeys pages
  // have their keys fingerprinted at keys[first_key[i]...] once probed,
  // kFirstKey pages their first key.
  ExactCheck check[kPagesPerRound] = {};
  uint32_t first_key[kPagesPerRound] = {};
  // A kFirstKey page found present goes to Answer with this check made.
  KeyCheck first_key_check[kPagesPerRound];
  bool hit[kPagesPerRound];  // from Check to Answer
  uint8_t tier[kPagesPerRound];  // with a hit, in a tier query: the page's tier
  uint32_t n_keys = 0;
  // Written before it is read: left uninitialized, since zeroing three
  // rounds' 4 KiB would cost every query (an unrelated prompt's prefix
  // query costs less than that).
  union Keys {
    Keys() {}
    Fingerprint at[kRoundKeys];
  } keys;
};

// One query's state and steps, whatever the source of the page hashes.
// `write_hash(page, out)` writes page `page`'s 64 hex characters to `out`
// (pages come in order). kTiers: a tier query's, which also reads each
// page's tier; a plain query's instantiation has none of that code (it cost
// the plain rows 3-4% when it only sat beside them, paired).
template <typename WriteHash, bool kTiers = false>
class PageQuery {
 public:
  // `tiers`: a tier query's, one byte a page.
  PageQuery(Index& index, const Layout& layout, size_t n_pages, WriteHash& write_hash, const PageQueryHooks* hooks,
        std::span<uint8_t> tiers = {})
      : index_(index),
        tiers_(tiers),
        layout_(layout),
        n_pages_(n_pages),
        write_hash_(write_hash),
        hooks_(hooks),
        key_(layout.key_prefix()),
        groups_named_by_heads_(layout.groups_named_by_key_heads() && index.HeadNamedGroupsCounted(kGroupIdPrefix)) {}

  // Every page, through the shared pipeline of rounds (check_pages).
  PageQueryResult AllPages(std::span<uint8_t> hits) {
    PageQueryResult result;
    result.n_pages = n_pages_;
    PageRounds rounds(*this, hits, result);
    RunRounds(index_, rounds);
    return result;
  }

  // The leading run of hit pages, one page at a time: nothing past the
  // first miss is hashed or looked up (check_prefix).
  PageQueryResult Prefix() {
    PageQueryResult result;
    result.n_pages = n_pages_;
    PendingPage pending;
    for (size_t page = 0; page < n_pages_; ++page) {
      HashPage(page, pending);
      ++result.pages_examined;
      if (!pending.checkable) break;
      Fingerprint first_key;
      // Most prefix queries are of prompts nobody stored: their first
      // page's first key is absent, and that alone answers them, before the
      // group is fingerprinted or probed. (A present key is checked again
      // below, under the group probe's hold: that check is the one that counts.)
      if (page == 0) {
        first_key = FirstKeyOf(pending);
        if (!index_.ContainsKey(first_key)) break;
      }
      FingerprintGroup(pending);
      // The group's line and the summary's are asked for together, so a
      // hit by either costs one memory round trip. The page's first key is
      // not: a prefix ends once, and nearly every page before it is
      // answered by its group, but prefetching that key for every page
      // walked the key tables' page tables all along the prefix (cold, they
      // made a half-stored prompt's query 15% dearer: 2.25 vs 1.96x hashing
      // with an 8 MiB sweep before each call; no change without it). The
      // page that ends a prefix, if nobody stored it, looks its first key
      // up once its group is known to be unknown: one more round trip.
      // The page's head is hashed while its group's line comes.
      KeyCheck first_key_check{true, false};
      {
        Index::Reader reader(index_);
        reader.PrefetchGroup(pending.group);
        if (page > 0) first_key = FirstKeyOf(pending);
        const RequiredTails& tails = TailsFor(reader, *pending.level);
        const bool by_summary = tails.state == RequiredTails::State::kSummarised;
        if (by_summary) reader.PrefetchPageTails(key_head_);
        pending.probe = reader.ProbeGroup(pending.group, pending.level->id);
        if (!pending.probe.verified) {
          if (tails.state == RequiredTails::State::kNeverStored) break;
          if (ProvedAbsentByItsGroup(pending.probe)) break;
          // An unknown group: most likely a page nobody stored, answered by
          // its first key (as in ChooseExactChecks).
          const SummaryAnswer answer = by_summary && pending.probe.exists
                                           ? CheckBySummary(reader, pending, key_head_, tails.mask)
                                           : SummaryAnswer::kNoEntry;
          if (answer == SummaryAnswer::kMiss) break;
          if (answer == SummaryAnswer::kHit) {
            ++result.total_hits;
            ++result.prefix_hits;
            continue;
          }
          first_key_check = reader.CheckKeys(std::span<const Fingerprint>(&first_key, 1), pending.probe.ref);
        }
      }
      if (!first_key_check.all_present) break;
      if (!Answer(pending, &result, &first_key_check)) break;
      ++result.total_hits;
      ++result.prefix_hits;
    }
    return result;
  }

 private:
  // Hashes page `page` and fingerprints its group id.
  void Prepare(size_t page, PendingPage& pending) {
    HashPage(page, pending);
    if (pending.checkable) FingerprintGroup(pending);
  }
  // The two halves of Prepare: a prefix query fingerprints its first
  // page's group only once that page's first key was found.
  void HashPage(size_t page, PendingPage& pending) {
    pending.page = page;
    pending.level = &layout_.LevelFor(page, n_pages_);
    pending.probe = GroupProbe{};
    write_hash_(page, pending.hash);
    pending.checkable = pending.level->n_suffixes > 0;
  }
  void FingerprintGroup(PendingPage& pending) { pending.group = layout_.GroupFingerprint(pending.hash); }
  // A page whose group is unknown, of a layout naming its groups after its
  // keys' head, with no stray key counted for it (stray_keys.h): none of
  // its keys is present, or its group would be known.
  bool ProvedAbsentByItsGroup(const GroupProbe& probe) const {
    return !probe.exists && !probe.strays_possible && groups_named_by_heads_;
  }
  // The fingerprint of the page's first key (and its head, for the summary).
  Fingerprint FirstKeyOf(const PendingPage& pending) {
    SetKeyHash(pending.hash);
    return KeyFingerprint(pending.level->first_suffix);
  }

  // Chooses how each page of a probed round not verified by its group is
  // checked (the exact path), and computes what that check needs: for a
  // known group, the page's head for the summary, or else its keys'
  // fingerprints; for an unknown group, its first key's. They are
  // prefetched together and checked a round later.
  void ChooseExactChecks(PageRound& round) {
    round.n_keys = 0;
    for (size_t i = 0; i < round.n; ++i) {
      PendingPage& page = round.pages[i];
      round.check[i] = ExactCheck::kOneByOne;
      if (!page.checkable || page.probe.verified) continue;
      const RequiredTails& tails = CachedTails(*page.level);
      if (tails.state == RequiredTails::State::kNeverStored) {
        round.check[i] = ExactCheck::kAbsent;
        continue;
      }
      // A page whose group is unknown was most likely never stored (a
      // prompt nobody sent before): it has no entry either, and its first
      // key's lookup alone answers it, so it reads no summary. That lookup
      // is prefetched with the round's: one after the other, a prompt
      // nobody stored paid a memory round trip per page on top of hashing.
      // But after a hit of such a page (a prompt loaded from a snapshot,
      // whose pages all are so), its keys are fetched a round ahead, as a
      // known group's: a present first key would cost a round trip more.
      if (!page.probe.exists) {
        if (ProvedAbsentByItsGroup(page.probe)) {
          round.check[i] = ExactCheck::kAbsent;
          continue;
        }
        if (last_unknown_group_hit_ && TakeKeys(round, i, page)) continue;
        if (round.n_keys == kRoundKeys) continue;
        round.check[i] = ExactCheck::kFirstKey;
        round.first_key[i] = round.n_keys;
        round.keys.at[round.n_keys++] = FirstKeyOf(page);
        continue;
      }
      if (tails.state == RequiredTails::State::kSummarised) {
        round.check[i] = ExactCheck::kSummary;
        SetKeyHash(page.hash);
        page.head = key_head_;
        continue;
      }
      TakeKeys(round, i, page);
    }
  }

  // Makes page i of `round` a kKeys page: its keys fingerprinted into the
  // round's, to be prefetched with them (and its head kept, for its
  // adoption). False, and nothing changed, if the round has no room left.
  bool TakeKeys(PageRound& round, size_t i, PendingPage& page) {
    const uint32_t n_keys = page.level->n_suffixes;
    if (round.n_keys + n_keys > kRoundKeys) return false;
    round.check[i] = ExactCheck::kKeys;
    SetKeyHash(page.hash);
    page.head = key_head_;
    round.first_key[i] = round.n_keys;
    for (uint32_t k = 0; k < n_keys; ++k) {
      round.keys.at[round.n_keys + k] = KeyFingerprint(page.level->first_suffix + k);
    }
    round.n_keys += n_keys;
    return true;
  }

  // Every hook of a round runs before any key of it is looked up.
  void RunHooks(const PageRound& round) {
    if (hooks_ == nullptr || hooks_->after_group_probe == nullptr) return;
    for (size_t i = 0; i < round.n; ++i) {
      if (round.pages[i].checkable) hooks_->after_group_probe(hooks_->user, round.pages[i].page);
    }
  }

  // Checks a round's exact-path pages by what was prefetched for them; a
  // page the summary has no entry for goes to Answer, key by key.
  void CheckExact(const Index::Reader& reader, PageRound& round, bool* hit) {
    for (size_t i = 0; i < round.n; ++i) {
      const PendingPage& page = round.pages[i];
      switch (round.check[i]) {
        case ExactCheck::kOneByOne:
          continue;
        case ExactCheck::kAbsent:
          hit[i] = false;
          continue;
        case ExactCheck::kSummary: {
          const SummaryAnswer answer =
              CheckBySummary(reader, page, page.head, CachedTails(*page.level).mask, &round.tier[i]);
          // No entry, or (a tier query) a hit whose tier the group cannot
          // give: key by key.
          if (answer == SummaryAnswer::kNoEntry) round.check[i] = ExactCheck::kOneByOne;
          hit[i] = answer == SummaryAnswer::kHit;
          continue;
        }
        case ExactCheck::kFirstKey:
          // Absent: a miss. Present: Answer checks the rest (nothing proves
          // a page of an unknown group but every one of its keys).
          round.first_key_check[i] =
              reader.CheckKeys(std::span<const Fingerprint>(round.keys.at + round.first_key[i], 1), page.probe.ref);
          hit[i] = round.first_key_check[i].all_present;
          continue;
        case ExactCheck::kKeys: {
          const KeyCheck keys = CheckKeys(
              reader, std::span<const Fingerprint>(round.keys.at + round.first_key[i], page.level->n_suffixes),
              page.probe.ref);
          hit[i] = keys.all_present;
          round.tier[i] = keys.tier;
          // Marked only if every key was stored under the group; refused if
          // the group changed since the probe (see ProveByKeys).
          if (keys.all_under_group) reader.MarkVerified(page.group, page.probe, page.level->id);
          continue;
        }
      }
    }
  }

  // A page's keys, looked up in `reader`'s hold; with their tier in a tier query.
  KeyCheck CheckKeys(const Index::Reader& reader, std::span<const Fingerprint> keys, GroupRef group) const {
    if constexpr (kTiers) return reader.CheckKeysWithTier(keys, group);
    return reader.CheckKeys(keys, group);
  }

  // Whether every key of a page not verified by its group is present, by
  // the summary's line of its head; marks the group verified as a key
  // check would (every key stored under it, unchanged since the probe).
  // A tier query's hit also needs its tier (`tier`): the summary holds
  // none, but when every present key of the head is stored under the
  // page's group, the group's tier, read in the same hold, is the slowest
  // of a set of keys that holds the page's (the same set, unless the group
  // holds more: then slower, never faster). Otherwise kNoEntry: key by key.
  enum class SummaryAnswer { kHit, kMiss, kNoEntry };
  SummaryAnswer CheckBySummary(const Index::Reader& reader, const PendingPage& page, const Fingerprint& head,
                               uint64_t required, uint8_t* tier = nullptr) {
    const PageTailsCheck check = reader.CheckPageTails(head, required, page.probe.ref);
    if (!check.summarised) return SummaryAnswer::kNoEntry;
    if (check.keys.all_under_group) reader.MarkVerified(page.group, page.probe, page.level->id);
    if (!check.keys.all_present) return SummaryAnswer::kMiss;
    if constexpr (kTiers) {
      *tier = check.keys.all_under_group ? reader.GroupTier(page.group, page.probe.ref) : MediumTiers::kAbsent;
      if (*tier == MediumTiers::kAbsent) return SummaryAnswer::kNoEntry;
    }
    return SummaryAnswer::kHit;
  }

  // The summary's numbers for the tails `level` needs, looked up once per
  // query (tail numbers never change meaning: tail_interner.h). Layouts
  // whose keys do not split after the hash are checked key by key.
  const RequiredTails& TailsFor(const Index::Reader& reader, const Layout::Level& level) {
    const size_t i = layout_.LevelIndex(level);
    if (i >= kCachedLevels) return kUnsummarised;
    if (!tails_known_[i]) {
      tails_[i] = layout_.split_keys() ? reader.FindRequiredTails(layout_.TailIds(level)) : RequiredTails{};
      tails_known_[i] = true;
    }
    return tails_[i];
  }
  // ... as TailsFor found them (it ran for the level, under an earlier hold).
  const RequiredTails& CachedTails(const Layout::Level& level) const {
    const size_t i = layout_.LevelIndex(level);
    return i < kCachedLevels && tails_known_[i] ? tails_[i] : kUnsummarised;
  }

  // Whether a probed page is a hit: its group verified, else every key
  // present (which verifies the group if every key was stored under it,
  // unless it changed since the probe). `first_key`: the check of the
  // page's first key, when the caller already made it.
  // `tier`: with a hit, the page's tier (the group's, read in the probe's
  // hold, on the fast path; the keys' otherwise).
  bool Answer(const PendingPage& pending, PageQueryResult* result, const KeyCheck* first_key = nullptr,
              bool hooked = false, uint8_t* tier = nullptr) {
    if (!pending.checkable) return false;
    if (!hooked && hooks_ != nullptr && hooks_->after_group_probe != nullptr) {
      hooks_->after_group_probe(hooks_->user, pending.page);
    }
    if (pending.probe.verified) {
      ++result->fast_path;
      if constexpr (kTiers) *tier = pending.probe.tier();
      return true;
    }
    return ProveByKeys(pending, first_key, tier);
  }

  // Looks every key of the page up, all within one hold of the reader
  // lock: a page is present only if all its keys were present at one
  // instant (index-semantics.md, "Concurrency"), so a key the caller found
  // in an earlier hold (`first_key`) is looked up again here -- between two
  // holds a writer may have removed it and stored the next. An unknown
  // group (SGLang most likely never stored the page) whose first key was
  // not looked up yet looks it up alone first: a missing page then costs
  // one fingerprint and one lookup instead of the page's. The group is
  // marked verified in the same hold, and only if every key was stored
  // under it (its removal then reaches the group) -- refused if it changed
  // since the probe: then the keys seen may not be the group's whole object
  // set, but the page itself was proven present just now, so it still
  // counts as a hit.
  bool ProveByKeys(const PendingPage& pending, const KeyCheck* first_key, uint8_t* tier) {
    const Layout::Level& level = *pending.level;
    SetKeyHash(pending.hash);
    if (first_key == nullptr && !pending.probe.exists && !index_.ContainsKey(KeyFingerprint(level.first_suffix))) {
      return false;
    }
    for (uint32_t k = 0; k < level.n_suffixes; ++k) page_keys_.at[k] = KeyFingerprint(level.first_suffix + k);
    const std::span<const Fingerprint> keys(page_keys_.at, level.n_suffixes);
    if (hooks_ != nullptr && hooks_->before_page_keys != nullptr) hooks_->before_page_keys(hooks_->user, pending.page);
    {
      Index::Reader reader(index_);
      for (const Fingerprint& key : keys) reader.PrefetchKey(key);
      const KeyCheck check = CheckKeys(reader, keys, pending.probe.ref);
      if (!check.all_present) return false;
      if (check.all_under_group) reader.MarkVerified(pending.group, pending.probe, level.id);
      if constexpr (kTiers) *tier = check.tier;
    }
    if (!pending.probe.exists) AskAdoption(pending, keys, key_head_);
    return true;
  }

  // A page just proven present key by key whose group is unknown (nearly
  // always a page loaded from a snapshot: its keys carry no group) is asked
  // to be adopted into its group, so that its next queries take the fast
  // path (index.h, "Adoption"). `keys`: all of its keys; `head` their
  // head, with split keys. With no lock held (the queue may wake the writer).
  void AskAdoption(const PendingPage& pending, std::span<const Fingerprint> keys, const Fingerprint& head) {
    index_.RequestAdoption(pending.group, pending.level->id, keys, layout_.split_keys() ? &head : nullptr,
                           layout_.tenant_seed(), groups_named_by_heads_);
  }

  // Sets the page whose keys KeyFingerprint derives. With split keys its
  // head (prefix and hash) is hashed here, once for all the page's keys.
  void SetKeyHash(const char* hash) {
    key_.SetHash(std::string_view(hash, kPageHashHexLength));
    if (layout_.split_keys()) key_head_ = FingerprintPart(layout_.tenant_seed(), key_.Bare());
  }
  // The fingerprint of the key with suffix `suffix` of the page SetKeyHash
  // set: exactly what the writer computes from the whole key.
  Fingerprint KeyFingerprint(uint32_t suffix) {
    if (layout_.split_keys()) {
      return CombineFingerprintParts(layout_.tenant_seed(), key_head_, layout_.SuffixPart(suffix));
    }
    return FingerprintOf(layout_.tenant_seed(), key_.With(layout_.Suffix(suffix)));
  }

  // AllPages' steps in the shared pipeline (query/round_pipeline.h): a
  // round of pages is hashed and its groups' lines prefetched; probed a
  // round later, which decides its exact checks (ChooseExactChecks) and
  // prefetches what they read; checked and answered a round after that.
  class PageRounds {
   public:
    static constexpr bool kProbes = true;
    using Round = PageRound;

    PageRounds(PageQuery& query, std::span<uint8_t> hits, PageQueryResult& result)
        : query_(query), hits_(hits), result_(result) {}

    void Init(Round&, size_t) {}
    bool empty(const Round& round) const { return round.n == 0; }
    size_t Prepare(Round& round) {
      round.n = std::min(kPagesPerRound, query_.n_pages_ - next_page_);
      for (size_t i = 0; i < round.n; ++i) query_.Prepare(next_page_ + i, round.pages[i]);
      next_page_ += round.n;
      return round.n;
    }
    void Prefetch(const Index::Reader& reader, const Round& round) {
      for (size_t i = 0; i < round.n; ++i) {
        if (round.pages[i].checkable) reader.PrefetchGroup(round.pages[i].group);
      }
    }
    void Probe(const Index::Reader& reader, Round& round) {
      for (size_t i = 0; i < round.n; ++i) {
        PendingPage& page = round.pages[i];
        if (!page.checkable) continue;
        page.probe = reader.ProbeGroup(page.group, page.level->id);
        if (!page.probe.verified) query_.TailsFor(reader, *page.level);  // for ChooseExactChecks
      }
    }
    void Plan(Round& round) { query_.ChooseExactChecks(round); }
    void BeforeCheck(const Round& round) { query_.RunHooks(round); }
    void PrefetchPlanned(const Index::Reader& reader, const Round& round) {
      for (size_t i = 0; i < round.n; ++i) {
        if (round.check[i] == ExactCheck::kSummary) reader.PrefetchPageTails(round.pages[i].head);
      }
      for (uint32_t k = 0; k < round.n_keys; ++k) reader.PrefetchKey(round.keys.at[k]);
    }
    void Check(const Index::Reader& reader, Round& round) { query_.CheckExact(reader, round, round.hit); }
    bool Answer(Round& round) {
      for (size_t i = 0; i < round.n; ++i) {
        const PendingPage& page = round.pages[i];
        bool& hit = round.hit[i];
        if (round.check[i] == ExactCheck::kOneByOne) {
          hit = query_.Answer(page, &result_, /*first_key=*/nullptr, /*hooked=*/true, TierOut(round, i));
        } else if (round.check[i] == ExactCheck::kFirstKey && hit) {
          hit = query_.Answer(page, &result_, &round.first_key_check[i], /*hooked=*/true, TierOut(round, i));
        }
        if (page.checkable && !page.probe.exists) {
          query_.last_unknown_group_hit_ = hit;
          // Proven by its keys, prefetched a round ahead: its adoption is
          // asked for here, with no lock held (ProveByKeys asks for its own).
          if (hit && round.check[i] == ExactCheck::kKeys) {
            query_.AskAdoption(
                page, std::span<const Fingerprint>(round.keys.at + round.first_key[i], page.level->n_suffixes),
                page.head);
          }
        }
        if constexpr (kTiers) {
          query_.tiers_[page.page] = hit ? round.tier[i] : MediumTiers::kAbsent;
        } else {
          hits_[page.page] = hit ? 1 : 0;
        }
        tally_.Add(hit, result_);
      }
      return true;
    }

   private:
    // Where Answer writes page i's tier: nowhere in a plain query.
    static uint8_t* TierOut(Round& round, size_t i) { return kTiers ? &round.tier[i] : nullptr; }

    PageQuery& query_;
    std::span<uint8_t> hits_;
    PageQueryResult& result_;
    HitTally tally_;
    size_t next_page_ = 0;
  };

  Index& index_;
  const std::span<uint8_t> tiers_;
  const Layout& layout_;
  const size_t n_pages_;
  WriteHash& write_hash_;
  const PageQueryHooks* hooks_;
  KeyBuffer key_;
  // The layout names its groups after its keys' heads, and the index counts
  // strays under that convention (index.h, HeadNamedGroupsCounted).
  const bool groups_named_by_heads_;
  Fingerprint key_head_;  // with split keys: the part every key of the page shares
  // The last page answered whose group was unknown was a hit: the prompt is
  // most likely one loaded from a snapshot (ChooseExactChecks).
  bool last_unknown_group_hit_ = false;
  // TailsFor's answers, by level (layouts have one level, or a few with
  // trailing pools; any beyond these are checked key by key).
  static constexpr size_t kCachedLevels = 8;
  static constexpr RequiredTails kUnsummarised{};
  RequiredTails tails_[kCachedLevels];
  bool tails_known_[kCachedLevels] = {};
  // ProveByKeys' keys of one page (64 KiB at most), written before they
  // are read (uninitialized: see Round::keys).
  union PageKeys {
    PageKeys() {}
    Fingerprint at[Layout::kMaxKeysPerPage];
  } page_keys_;
};

// The tokens SGLang will load for a leading run of `pages` hit pages of a
// request of `n_tokens`: whole pages, and never the request's last token
// (its scheduler matches at most n - 1 tokens, schedule_batch.py's
// max_prefix_len, then whole pages of them): a request of exactly k pages
// loads at most k - 1 of them.
size_t TokensOf(const Layout& layout, size_t pages, size_t n_tokens) {
  const size_t loadable_pages = n_tokens == 0 ? 0 : (n_tokens - 1) / layout.page_size();
  return std::min(pages, loadable_pages) * layout.page_size();
}

template <typename WriteHash, bool kTiers = false>
PageQueryResult RunAllPages(Index& index, const Layout& layout, size_t n_pages, WriteHash write_hash,
                            std::span<uint8_t> hits, const PageQueryHooks* hooks, std::span<uint8_t> tiers = {}) {
  if (hits.size() < n_pages) throw std::length_error("page query: hits buffer shorter than the page count");
  PageQuery<WriteHash, kTiers> query(index, layout, n_pages, write_hash, hooks, tiers);
  PageQueryResult result = query.AllPages(hits);
  result.pages_examined = n_pages;
  CountQuery(index, result, n_pages);
  return result;
}

bool BlockSizeMatches(Index& index, const Layout& layout, uint32_t block_size) {
  return sci::BlockSizeMatches(index, block_size, layout.page_size(), layout.block_size_warning(), "page query",
                              "page size");
}

// Page hashes of a request of tokens, from the thread's digest memo: a
// prefix this thread has hashed before is not hashed again (page_hash.h).
// With `look_ahead` (every page will be asked for), each page's memo entry
// is prefetched a round of pages before it is hashed.
class TokenHashes {
 public:
  TokenHashes(const Layout& layout, std::span<const uint32_t> tokens, bool look_ahead)
      : hasher_(tokens, layout.page_size(), layout.is_eagle(), &PageDigestMemo::ForThisThread()),
        look_ahead_(look_ahead) {}
  size_t pages() const { return hasher_.pages(); }
  void operator()(size_t page, char* out) {
    // A prefix query looks nothing ahead; its first page most often belongs
    // to a prompt nobody stored (or this thread never hashed).
    ToHex(!look_ahead_ && page == 0 ? hasher_.NextHashingFirst() : hasher_.Next(), out);
    if (look_ahead_) hasher_.LookAhead(kPagesPerRound);
  }

 private:
  PageHasher hasher_;
  const bool look_ahead_;
};

}  // namespace

size_t PagesToCheck(const Layout& layout, size_t n_tokens, uint32_t block_size) {
  if (block_size != layout.page_size()) return 0;
  return WholePages(n_tokens, layout.page_size(), layout.is_eagle());
}

PageQueryResult CheckPages(Index& index, const Layout& layout, std::span<const uint32_t> tokens,
                           uint32_t block_size, std::span<uint8_t> hits, const PageQueryHooks* hooks) {
  if (!BlockSizeMatches(index, layout, block_size)) return PageQueryResult{};
  TokenHashes hashes(layout, tokens, /*look_ahead=*/true);
  PageQueryResult result = RunAllPages(index, layout, hashes.pages(), std::ref(hashes), hits, hooks);
  result.prefix_tokens = TokensOf(layout, result.prefix_hits, tokens.size());
  return result;
}

PageQueryResult CheckTiers(Index& index, const Layout& layout, std::span<const uint32_t> tokens, uint32_t block_size,
                           std::span<uint8_t> tiers, TierAnswer* answer, const PageQueryHooks* hooks) {
  answer->n_tiers = index.tiers().n_tiers();
  if (!BlockSizeMatches(index, layout, block_size)) {
    SummariseTiers({}, MediumTiers::kAbsent, true, answer);
    return PageQueryResult{};
  }
  TokenHashes hashes(layout, tokens, /*look_ahead=*/true);
  const size_t n_pages = hashes.pages();
  if (tiers.size() < n_pages) throw std::length_error("tier query: tiers buffer shorter than the page count");
  // A tier query writes each page's tier instead of its hit (the hits'
  // span only sizes the answer).
  PageQueryResult result =
      RunAllPages<decltype(std::ref(hashes)), /*kTiers=*/true>(index, layout, n_pages, std::ref(hashes), tiers, hooks, tiers);
  result.prefix_tokens = TokensOf(layout, result.prefix_hits, tokens.size());
  SummariseTiers(tiers.first(n_pages), MediumTiers::kAbsent, /*leading_run=*/true, answer);
  for (int t = 0; t < answer->n_tiers; ++t) {
    const size_t tier = static_cast<size_t>(t);
    answer->prefix_tokens[tier] = TokensOf(layout, answer->prefix_pages[tier], tokens.size());
  }
  return result;
}

PageQueryResult CheckPrefix(Index& index, const Layout& layout, std::span<const uint32_t> tokens,
                            uint32_t block_size, const PageQueryHooks* hooks) {
  if (!BlockSizeMatches(index, layout, block_size)) return PageQueryResult{};
  TokenHashes hashes(layout, tokens, /*look_ahead=*/false);
  auto write_hash = std::ref(hashes);
  PageQuery<decltype(write_hash)> query(index, layout, hashes.pages(), write_hash, hooks);
  PageQueryResult result = query.Prefix();
  result.prefix_tokens = TokensOf(layout, result.prefix_hits, tokens.size());
  CountQuery(index, result, result.pages_examined);
  return result;
}

PageQueryResult CheckPageHashes(Index& index, const Layout& layout, size_t n_pages,
                                absl::FunctionRef<std::string_view(size_t page)> page_hash,
                                std::span<uint8_t> hits, const PageQueryHooks* hooks) {
  PageQueryResult result = RunAllPages(
      index, layout, n_pages,
      [page_hash](size_t page, char* out) {
        const std::string_view hash = page_hash(page);
        assert(IsPageHashHex(hash));  // validated at the boundary (see the header)
        std::memcpy(out, hash.data(), kPageHashHexLength);
      },
      hits, hooks);
  // The request's length is not given: as if it ended with its last page
  // (whose last token is then not loaded), never more.
  result.prefix_tokens = TokensOf(layout, result.prefix_hits, n_pages * layout.page_size());
  return result;
}

}  // namespace sci
