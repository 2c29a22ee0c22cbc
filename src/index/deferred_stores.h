// Stored events a resync holds back while its catch-up waits for its
// anchor (feed/resync.h, "Where the catch-up ends"; index.h, DeferStores):
// each key's last store, dropped again by a later removal of the key, a
// clear of its tenant or of everything. At the end they are applied (the
// anchor came: everything older than the snapshot has been applied, so
// each key's last event is known) or dropped.
//
// Why not apply them at once: a store older than the snapshot whose
// removal is still on its way (a publisher worker paused with it) would
// show a key the snapshot knows removed. Why not drop them: a store newer
// than the snapshot is a key the pool holds, and dropping it would miss it
// until it is stored again. Removals are never deferred: they only ever
// turn hits into misses.
//
// The writer's only (Index, under apply_mu_). Exception-safe: a failed
// insert leaves the set as it was (std::unordered_map's single insert).
//
// Its hash is keyed (IdHash): keys are any bytes a writer chooses, and
// std::hash<std::string> is libstdc++'s MurmurHash2 under a fixed seed, so
// anyone could build keys that all share one bucket. An outside review made
// deferral quadratic that way (253 times slower at 16,000 keys).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/process_secret.h"
#include "common/siphash.h"
#include "index/event.h"

namespace sci {

class DeferredStores {
 public:
  // Beyond this many keys a further store is dropped (a miss, counted in
  // stores_withheld like every deferred store): the memory stays bounded
  // whatever the stream does while the anchor waits.
  static constexpr size_t kMaxKeys = size_t{1} << 20;

  bool empty() const { return stores_.empty(); }
  size_t size() const { return stores_.size(); }

  // Keeps `event` (a store with a key) as its key's last store; false when
  // full (then it is dropped).
  bool Add(const Event& event) {
    std::string id = Id(event.tenant_id, event.object_key);
    auto it = stores_.find(id);
    if (it == stores_.end()) {
      if (stores_.size() >= kMaxKeys) return false;
      it = stores_.emplace(std::move(id), Stored{}).first;
    }
    Stored& s = it->second;
    s.tenant.assign(event.tenant_id);
    s.key.assign(event.object_key);
    s.group.assign(event.group_id);
    s.medium.assign(event.medium);
    s.generation = event.generation;
    return true;
  }

  // A removal of the key (on any medium: a later store may be lost, never
  // a removal).
  void Remove(std::string_view tenant, std::string_view key) { stores_.erase(Id(tenant, key)); }

  void ClearTenant(std::string_view tenant) {
    const std::string_view wanted = tenant.empty() ? std::string_view("default") : tenant;
    for (auto it = stores_.begin(); it != stores_.end();) {
      const std::string_view has = it->second.tenant.empty() ? std::string_view("default") : it->second.tenant;
      it = has == wanted ? stores_.erase(it) : std::next(it);
    }
  }

  void Clear() { stores_.clear(); }

  struct Stored {
    std::string tenant, key, group, medium;
    PublisherGeneration generation = PublisherGeneration::kUnknown;
  };
  // The kept stores, each as the event to apply (it views the set's
  // strings): for (const auto& [id, s] : set) Apply(AsEvent(s)), then Clear().
  auto begin() const { return stores_.begin(); }
  auto end() const { return stores_.end(); }
  static Event AsEvent(const Stored& s) {
    Event event;
    event.kind = EventKind::kStored;
    event.tenant_id = s.tenant;
    event.object_key = s.key;
    event.group_id = s.group;
    event.medium = s.medium;
    event.generation = s.generation;
    return event;
  }

  // SipHash-1-3 under a key of its own (common/process_secret.h), as
  // Rust's and Python's tables hash strings against flooding.
  struct IdHash {
    size_t operator()(std::string_view id) const {
      static const SipKey key = ProcessSubkey("deferred stores");
      return static_cast<size_t>(SipHash13(key, id));
    }
  };

 private:
  // The tenant ("" and "default" are one) and the key, apart: the tenant's
  // length first, so no two pairs share an id whatever bytes they hold.
  static std::string Id(std::string_view tenant, std::string_view key) {
    const std::string_view t = tenant.empty() ? std::string_view("default") : tenant;
    std::string id = std::to_string(t.size());
    id.reserve(id.size() + 1 + t.size() + key.size());
    id.push_back(':');
    id.append(t).append(key);
    return id;
  }

  std::unordered_map<std::string, Stored, IdHash> stores_;
};

}  // namespace sci
