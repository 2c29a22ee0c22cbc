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

#include "absl/container/flat_hash_set.h"
#include "publish_script.h"

namespace sci::tools {

class HeldKeys {
 public:
  static constexpr char kDefaultTenant[] = "default";

  // stored adds the key, removed drops it; other tenants are not listed.
  void Apply(const ScriptEvent& event) {
    if (event.tenant_id != kDefaultTenant) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (event.stored) {
      keys_.insert(event.object_key);
    } else {
      keys_.erase(event.object_key);
    }
  }

  // The body of GET /get_all_keys: every key followed by '\n', taken at
  // one instant (under the lock), in no particular order.
  std::shared_ptr<const std::string> Listing() const {
    auto body = std::make_shared<std::string>();
    std::lock_guard<std::mutex> lock(mu_);
    size_t bytes = 0;
    for (const std::string& key : keys_) bytes += key.size() + 1;
    body->reserve(bytes);
    for (const std::string& key : keys_) {
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
  mutable std::mutex mu_;
  absl::flat_hash_set<std::string> keys_;
};

}  // namespace sci::tools
