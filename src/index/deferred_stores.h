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
#include <functional>
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

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  // Keeps `event` (a store with a key) as its key's last store; false when
  // full (then it is dropped).
  bool Add(const Event& event) {
    const std::string_view tenant = Tenant(event.tenant_id);
    auto t = tenants_.find(tenant);
    if (t == tenants_.end()) {
      if (size_ >= kMaxKeys) return false;
      t = tenants_.try_emplace(std::string(tenant)).first;
    }
    Keys& keys = t->second;
    auto it = keys.find(event.object_key);
    if (it == keys.end()) {
      if (size_ >= kMaxKeys) return false;
      try {
        it = keys.try_emplace(std::string(event.object_key)).first;
      } catch (...) {
        if (keys.empty()) tenants_.erase(t);
        throw;
      }
      ++size_;
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
  void Remove(std::string_view tenant, std::string_view key) {
    const auto t = tenants_.find(Tenant(tenant));
    if (t == tenants_.end()) return;
    const auto it = t->second.find(key);
    if (it == t->second.end()) return;
    t->second.erase(it);
    --size_;
    if (t->second.empty()) tenants_.erase(t);
  }

  // What waits of one tenant, in one erase: filed by tenant, a clear costs
  // that tenant's stores, not every store (an outside review timed 33 ms a
  // clear of a tenant holding nothing, with 200k stores of others waiting).
  void ClearTenant(std::string_view tenant) {
    const auto t = tenants_.find(Tenant(tenant));
    if (t == tenants_.end()) return;
    size_ -= t->second.size();
    tenants_.erase(t);
  }

  void Clear() {
    tenants_.clear();
    size_ = 0;
  }

  struct Stored {
    std::string tenant, key, group, medium;
    PublisherGeneration generation = PublisherGeneration::kUnknown;
  };
  // SipHash-1-3 under a key of its own (common/process_secret.h), as
  // Rust's and Python's tables hash strings against flooding.
  struct IdHash {
    using is_transparent = void;  // found by a string_view, no copy
    size_t operator()(std::string_view id) const {
      static const SipKey key = ProcessSubkey("deferred stores");
      return static_cast<size_t>(SipHash13(key, id));
    }
  };
  using Keys = std::unordered_map<std::string, Stored, IdHash, std::equal_to<>>;  // by object key

  // The kept stores, by tenant, each to apply as an event (AsEvent views
  // its strings): for (auto& [t, keys] : by_tenant()) for (auto& [k, s] :
  // keys) Apply(AsEvent(s)), then Clear().
  const auto& by_tenant() const { return tenants_; }
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

 private:
  // "" and "default" are one tenant.
  static std::string_view Tenant(std::string_view tenant) {
    return tenant.empty() ? std::string_view("default") : tenant;
  }

  std::unordered_map<std::string, Keys, IdHash, std::equal_to<>> tenants_;
  size_t size_ = 0;  // stores kept, over every tenant
};

}  // namespace sci
