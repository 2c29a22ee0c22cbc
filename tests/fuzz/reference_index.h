// The index as docs/index-semantics.md states it, in plain maps, for
// index_differential_fuzzer.cpp: which (tenant, key) pairs are present and
// on which media, the sequence cursor and its rules, the production
// format's early-gap rule, tenant and all clears, a resync's concealment
// and deferred stores. Written for clarity, apart from the index: nothing
// here is shared with src/index but the tenant tag and TenantKeys::kListed
// (a tenant's clear takes its own keys when it holds at most that many, and
// every tenant of its tag when it holds more, as the index's does: a miss,
// never a false hit) and the enums the two speak in.
//
// It keeps neither groups nor verifications: a page is present exactly when
// its keys are, and the harness checks the fast path through the index's
// own verified groups (verified_pages.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "index/event.h"
#include "index/fingerprint.h"
#include "index/index.h"
#include "index/tenant_keys.h"

namespace sci::fuzz {

class ReferenceIndex {
 public:
  enum class Kind { kStored, kRemoved, kTenantCleared, kAllCleared };

  // An event as the index receives it (decoded, or from the C API).
  struct Event {
    Kind kind = Kind::kStored;
    std::string key, group, tenant, medium;
    PublisherGeneration generation = PublisherGeneration::kUnknown;
  };

  // A batch's event ids (known: every event carried one, not 0).
  struct EventIds {
    bool known = false;
    uint64_t first = 0;
    uint64_t last = 0;
  };

  struct Cursor {
    bool has_sequence = false;
    uint64_t last_sequence = 0;
    bool has_event_id = false;
    uint64_t last_event_id = 0;
    bool continuity_required = false;  // a connection was lost since the last batch with events
  };

  struct Counts {
    uint64_t duplicates = 0, gaps = 0, restarts = 0, stores_withheld = 0;
  };

  explicit ReferenceIndex(Residency residency) : residency_(residency) {}

  // "Applying one batch", rules 1-5.
  void ApplyBatch(uint64_t s, const std::vector<Event>& events, bool production, const EventIds& ids) {
    if (cursor_.has_sequence && s == cursor_.last_sequence) {  // 2: a duplicate
      ++counts_.duplicates;
      return;
    }
    const bool first = !cursor_.has_sequence;                    // 1: no cursor
    const bool gap = !first && s != cursor_.last_sequence + 1;   // 3: a gap or a restart
    // "A restart the sequence cannot show": a batch with events that
    // continues the sequence must continue the event ids; after a lost
    // connection one that cannot show them is read as a restart.
    bool restart = false;
    if (!first && !gap && !events.empty()) {
      restart = ids.known && cursor_.has_event_id ? ids.first != cursor_.last_event_id + 1
                                                  : cursor_.continuity_required;
      cursor_.continuity_required = false;
    }
    if (first || gap) cursor_.continuity_required = false;
    if (gap) ++counts_.gaps;
    if (restart) ++counts_.restarts;
    if (gap || restart) ClearAll();
    // The early-gap rule: a production batch that begins a run applies no
    // store, unless it is a publisher's first (sequence 1).
    const bool withhold = production && (first || gap || restart) && s != 1;
    for (const Event& e : events) {
      if (e.kind == Kind::kStored && !e.key.empty() && (withhold || deferring_)) {
        ++counts_.stores_withheld;
        if (!withhold) deferred_[{Tenant(e.tenant), e.key}] = e;  // each key's last store waits
        continue;
      }
      Apply(e);
    }
    cursor_.has_sequence = true;
    cursor_.last_sequence = s;
    if (!events.empty()) {  // an empty batch carries no id and breaks no chain
      cursor_.has_event_id = ids.known;
      cursor_.last_event_id = ids.last;
    }
  }

  // sci_index_clear: keys and cursor go (what a deferral holds too).
  void Clear() { ClearAll(); }

  void RequireEventContinuity() { cursor_.continuity_required = true; }

  // ---- a resync ----

  // Empty and answering miss; the cursor the stream had is kept for ResumeAt.
  void Conceal() {
    cursor_before_conceal_ = cursor_;
    ClearAll();
    concealed_ = true;
  }
  // A snapshot's key: the default tenant, media unknown.
  void LoadKey(const std::string& key) {
    const bool came = present_.count({"default", key}) == 0;
    present_[{"default", key}] = 0;
    if (came) NoteListing("default");
    NoteDigests();
  }
  void Reveal() { concealed_ = false; }
  // Nothing was buffered: the stream goes on after the batch that made the clear.
  bool CanResume() const { return cursor_before_conceal_.has_sequence && !cursor_.has_sequence; }
  void ResumeAt() {
    cursor_.has_sequence = true;
    cursor_.last_sequence = cursor_before_conceal_.last_sequence;
    cursor_.has_event_id = cursor_before_conceal_.has_event_id;
    cursor_.last_event_id = cursor_before_conceal_.last_event_id;
  }
  void DeferStores() { deferring_ = true; }
  // The index applies what waits in an order of its own: harmless, as no
  // two stores are of one key, except where their media would compete for
  // the last medium numbers (then which one gets a number depends on it).
  bool DeferralOrderMatters() const {
    if (residency_ != Residency::kPerMedium) return false;
    std::set<std::string> unnumbered;
    for (const auto& [id, e] : deferred_) {
      if (!e.medium.empty() && e.generation != PublisherGeneration::kFirst && !Numbered(e.medium)) {
        unnumbered.insert(e.medium);
      }
    }
    return unnumbered.size() > 1 && medium_names_.size() + unnumbered.size() > kMaxMedia;
  }
  void EndDeferral(bool apply) {
    deferring_ = false;
    if (apply) {
      for (const auto& [id, e] : deferred_) Apply(e);
    }
    deferred_.clear();
  }

  // ---- what a query may see ----

  bool Visible(const std::string& tenant, const std::string& key) const {
    return !concealed_ && present_.count({Tenant(tenant), key}) > 0;
  }
  // The default tier map: cpu (numbered first) is tier 0; any other medium,
  // and unknown media, tier 1.
  uint8_t Tier(const std::string& tenant, const std::string& key) const {
    const auto it = present_.find({Tenant(tenant), key});
    return it != present_.end() && (it->second & 1u) != 0 ? 0 : 1;
  }
  // The distinct digests that visible keys of `tenant` end with
  // ("@" and 64 lowercase hex digits) whose low 64 bits are `event_hash`.
  std::set<std::string> DigestsEndingKeys(const std::string& tenant, uint64_t event_hash) const {
    if (concealed_) return {};
    const auto it = digests_.find({Tenant(tenant), event_hash});
    return it == digests_.end() ? std::set<std::string>{} : it->second;
  }
  // Whether two digests of `tenant` shared `event_hash` at some moment
  // since the last time none was present. Such an event hash stays
  // unresolved until every key carrying it is gone (index-semantics.md,
  // "The event-hash digest map": the map counts keys, not digests): a miss,
  // never a false hit. The fuzzer first found the document promising more
  // (tests/fuzz/regressions/index_differential_fuzzer/).
  bool AmbiguousSinceEmpty(const std::string& tenant, uint64_t event_hash) const {
    return ambiguous_.count({Tenant(tenant), event_hash}) > 0;
  }
  bool concealed() const { return concealed_; }
  size_t size() const { return present_.size(); }
  const Cursor& cursor() const { return cursor_; }
  const Counts& counts() const { return counts_; }

 private:
  static constexpr size_t kMaxMedia = 8;
  using TenantKey = std::pair<std::string, std::string>;

  static std::string Tenant(const std::string& t) { return t.empty() ? "default" : t; }

  bool Numbered(const std::string& medium) const {
    for (const std::string& name : medium_names_) {
      if (name == medium) return true;
    }
    return false;
  }

  // Residency: a medium's bit, numbered at first sight, at most 8, never
  // taken back (not even by a clear); 0 = unknown. Under the object rule,
  // and for a first-generation event (its `stored cpu` proves no tier, its
  // `removed` means no replica is left), media are unknown.
  uint32_t MediumBit(const Event& e) {
    if (residency_ != Residency::kPerMedium || e.generation == PublisherGeneration::kFirst || e.medium.empty()) {
      return 0;
    }
    for (size_t i = 0; i < medium_names_.size(); ++i) {
      if (medium_names_[i] == e.medium) return 1u << i;
    }
    if (medium_names_.size() == kMaxMedia) return 0;
    medium_names_.push_back(e.medium);
    return 1u << (medium_names_.size() - 1);
  }

  void Apply(const Event& e) {
    ApplyToKeys(e);
    NoteDigests();
  }

  // The event-hash digest map's view of the present keys (index-semantics.md):
  // digests of "@<64 lowercase hex digits>" keys by (tenant, low 64 bits).
  void NoteDigests() {
    digests_.clear();
    for (const auto& [k, media] : present_) {
      const std::string& key = k.second;
      if (key.size() < 65 || key[key.size() - 65] != '@') continue;
      const std::string digest = key.substr(key.size() - 64);
      if (digest.find_first_not_of("0123456789abcdef") != std::string::npos) continue;
      digests_[{k.first, std::stoull(digest.substr(48), nullptr, 16)}].insert(digest);
    }
    std::erase_if(ambiguous_, [&](const auto& at) { return digests_.count(at) == 0; });
    for (const auto& [at, digests] : digests_) {
      if (digests.size() > 1) ambiguous_.insert(at);
    }
  }

  void ApplyToKeys(const Event& e) {
    if (e.kind == Kind::kAllCleared) {
      ClearAll();
      return;
    }
    if (e.kind == Kind::kTenantCleared) {
      // Its waiting stores by name; its keys by name while it is listed
      // (it has not held more than kListed keys or kListedBytes of names
      // since it last held none), else every key of its tag.
      const std::string tenant = Tenant(e.tenant);
      std::erase_if(deferred_, [&](const auto& d) { return d.first.first == tenant; });
      const bool by_tag = unlisted_.count(tenant) > 0;
      const uint32_t tag = TenantTag(TenantSeed(tenant));
      const auto cleared = [&](const std::string& t) { return by_tag ? TenantTag(TenantSeed(t)) == tag : t == tenant; };
      std::erase_if(present_, [&](const auto& p) { return cleared(p.first.first); });
      std::erase_if(unlisted_, cleared);
      return;
    }
    if (e.key.empty() || e.key.size() > kMaxObjectKeyBytes) return;  // ignored
    const TenantKey k{Tenant(e.tenant), e.key};
    const uint32_t bit = MediumBit(e);
    const auto held = present_.find(k);
    if (e.kind == Kind::kStored) {
      // A known medium joins the key's known media; otherwise the store's
      // medium (known or not) is all that is known.
      present_[k] = bit != 0 && held != present_.end() && held->second != 0 ? held->second | bit : bit;
      if (held == present_.end()) NoteListing(k.first);
      return;
    }
    deferred_.erase(k);  // a removal drops a waiting store, whatever its medium
    if (held == present_.end()) return;
    if (bit != 0 && held->second != 0 && (held->second & ~bit) != 0) {
      held->second &= ~bit;  // still on another medium
    } else {
      present_.erase(held);
      if (Holds(k.first) == 0) unlisted_.erase(k.first);  // counted afresh
    }
  }

  // The keys `tenant` holds, and their bytes.
  size_t Holds(const std::string& tenant, size_t* bytes = nullptr) const {
    size_t n = 0;
    for (const auto& [k, media] : present_) {
      if (k.first != tenant) continue;
      ++n;
      if (bytes != nullptr) *bytes += k.second.size();
    }
    return n;
  }
  // A key of `tenant` came: past either bound it is unlisted (index/tenant_keys.h).
  void NoteListing(const std::string& tenant) {
    size_t bytes = 0;
    if (Holds(tenant, &bytes) > TenantKeys::kListed || bytes > TenantKeys::kListedBytes) unlisted_.insert(tenant);
  }

  void ClearAll() {
    present_.clear();
    unlisted_.clear();
    deferred_.clear();
    cursor_ = Cursor{};
    NoteDigests();
  }

  const Residency residency_;
  std::map<TenantKey, uint32_t> present_;  // -> media bits (0: unknown)
  std::set<std::string> unlisted_;  // tenants whose clear goes by tag
  std::vector<std::string> medium_names_ = {"cpu", "disk"};  // the tier map's, numbered first
  std::map<TenantKey, Event> deferred_;
  using DigestsAt = std::pair<std::string, uint64_t>;  // (tenant, event hash)
  std::map<DigestsAt, std::set<std::string>> digests_;
  std::set<DigestsAt> ambiguous_;
  bool deferring_ = false;
  bool concealed_ = false;
  Cursor cursor_;
  Cursor cursor_before_conceal_;
  Counts counts_;
};

}  // namespace sci::fuzz
