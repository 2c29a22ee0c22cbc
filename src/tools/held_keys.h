// The objects a stand-in master holds: the keys of the default tenant that
// are present now, as the Mooncake master's GET /get_all_keys lists them
// (docs/wire-formats.md, section 4: default tenant only, no groups).
//
// Thread-safe: the publishing thread applies events while the admin
// server's threads take snapshots. An event is applied BEFORE it is sent,
// so a snapshot never lists a key whose removal a subscriber has already
// been sent (that would be a false hit); it may list a key whose stored
// event is still queued, which is true (the object is stored).
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "publish_script.h"

namespace sci::tools {

class HeldKeys {
 public:
  static constexpr char kDefaultTenant[] = "default";

  // `per_medium`: the master holds an object while some medium does (the
  // second generation: a `removed cpu` may leave the disk copy). Otherwise
  // any removal is the object's end (the first generation).
  explicit HeldKeys(bool per_medium = false) : per_medium_(per_medium) {}

  // stored adds the key on its medium, removed drops it (from that medium
  // alone with per_medium), a `cleared` of the default tenant drops every
  // key; other tenants are not listed. Media follow the index's rule
  // (index-semantics.md, "Residency"): a store on no named medium makes
  // them unknown (empty), and a key whose media are unknown falls to any
  // removal.
  void Apply(const ScriptEvent& event) {
    if (event.tenant_id != kDefaultTenant) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (event.cleared) {
      keys_.clear();
      return;
    }
    if (event.stored) {
      auto [it, added] = keys_.try_emplace(event.object_key);
      if (event.medium.empty() || (!added && it->second.empty())) {
        it->second.clear();
        if (!event.medium.empty()) it->second.insert(event.medium);
      } else {
        it->second.insert(event.medium);
      }
      return;
    }
    const auto it = keys_.find(event.object_key);
    if (it == keys_.end()) return;
    if (!per_medium_ || event.medium.empty() || it->second.empty()) {
      keys_.erase(it);
      return;
    }
    it->second.erase(event.medium);
    if (it->second.empty()) keys_.erase(it);
  }

  // The body of GET /get_all_keys: every key followed by '\n', taken at
  // one instant (under the lock), in no particular order.
  std::shared_ptr<const std::string> Listing() const {
    auto body = std::make_shared<std::string>();
    std::lock_guard<std::mutex> lock(mu_);
    size_t bytes = 0;
    for (const auto& [key, media] : keys_) bytes += key.size() + 1;
    body->reserve(bytes);
    for (const auto& [key, media] : keys_) {
      body->append(key);
      body->push_back('\n');
    }
    return body;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return keys_.size();
  }

 private:
  const bool per_medium_;
  mutable std::mutex mu_;
  // Each key with the media holding it (empty: unknown).
  absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>> keys_;
};

}  // namespace sci::tools
