// The simulation's truth oracle (simulation_test.cpp): every metadata change
// of every master, in one order, and every listing a subscriber was served.
//
// One lock orders the world: a master changes what it holds (HeldKeys) under
// it, and a GET /get_all_keys takes its listing under it, so each listing
// has an exact position in the sequence of changes (`position`: changes made
// before it, all masters together). The event of a change is enqueued after
// the lock is released, as Mooncake enqueues after its metadata changed: a
// listing can be ahead of the stream, never behind it.
//
// The live rule (the test's header comment states it in full): a hit on K
// that a reader saw entirely while the latest listing served to the
// subscriber's download was L is false if K is not in L and no master stored
// K after L was taken (up to the end of the query).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "held_keys.h"
#include "publish_script.h"

namespace sci::testing::sim {

class Truth {
 public:
  using Clock = std::chrono::steady_clock;

  // What the subscriber's latest download was served: `master`'s listing at
  // `position`, or none (a leader change without a snapshot: the index
  // refills from the stream alone, and no listing says where it starts).
  struct Listing {
    bool none = true;
    int master = -1;
    uint64_t position = 0;
    Clock::time_point taken{};
    uint64_t tag = 0;  // what the tag source said when it was taken
    std::unordered_set<std::string> keys;
  };

  static constexpr int kMasters = 2;

  // `event` changes what `master` holds (its HeldKeys, kept in step here).
  void Apply(int master, tools::HeldKeys& held, const tools::ScriptEvent& event) {
    std::lock_guard<std::mutex> lock(mu_);
    held.Apply(event);
    ++position_;
    auto& mine = held_[master];
    if (event.cleared) {
      mine.clear();
    } else if (event.stored) {
      mine.insert(event.object_key);
      stores_[event.object_key].push_back(position_);
    } else {
      mine.erase(event.object_key);
    }
    position_now_.store(position_, std::memory_order_release);
  }

  // A promoted leader restores `from`'s objects (no event for them:
  // docs/wire-formats.md, section 4). Counted as stores: only ever lenient.
  void Restore(int master, tools::HeldKeys& held, int from) {
    std::lock_guard<std::mutex> lock(mu_);
    tools::ScriptEvent clear;
    clear.cleared = true;
    held.Apply(clear);
    held_[master].clear();
    for (const std::string& key : held_[from]) {
      tools::ScriptEvent store;
      store.object_key = key;
      held.Apply(store);
      held_[master].insert(key);
      ++position_;
      stores_[key].push_back(position_);
    }
    ++position_;
    position_now_.store(position_, std::memory_order_release);
  }

  // A master process restarted: it holds nothing any more.
  void Forget(int master, tools::HeldKeys& held) {
    tools::ScriptEvent clear;
    clear.cleared = true;
    Apply(master, held, clear);
  }

  // GET /get_all_keys on `master`: its listing, recorded as what the
  // subscriber loads if `master` is the one it follows.
  std::shared_ptr<const std::string> TakeListing(int master, const tools::HeldKeys& held) {
    std::lock_guard<std::mutex> lock(mu_);
    std::shared_ptr<const std::string> body = held.Listing();
    if (master == followed_) {
      Listing listing;
      listing.none = false;
      listing.master = master;
      listing.position = position_;
      listing.taken = Clock::now();
      if (tag_source_) listing.tag = tag_source_();
      listing.keys = held_[master];
      listings_.push_back(std::move(listing));
      epoch_.store(listings_.size(), std::memory_order_release);
    }
    return body;
  }

  // The subscriber is about to follow `master` (a leader change): listings
  // of the old one no longer count, and until the new one's is taken none
  // does.
  void Follow(int master) {
    std::lock_guard<std::mutex> lock(mu_);
    followed_ = master;
    listings_.emplace_back();
    epoch_.store(listings_.size(), std::memory_order_release);
  }

  // Listings recorded so far: read before and after a query; equal, the
  // query saw the index while the latest listing was listings_[epoch - 1].
  size_t epoch() const { return epoch_.load(std::memory_order_acquire); }
  uint64_t position() const { return position_now_.load(std::memory_order_acquire); }

  // Why a hit on `key` seen during `epoch`, ending at `position_after`, is
  // false; empty when the rule allows it.
  std::string JudgeHit(const std::string& key, size_t epoch, uint64_t position_after) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (epoch == 0) return {};
    const Listing& listing = listings_[epoch - 1];
    if (listing.none || listing.keys.contains(key)) return {};
    const auto it = stores_.find(key);
    if (it != stores_.end()) {
      for (const uint64_t at : it->second) {
        if (at > listing.position && at <= position_after) return {};
      }
    }
    return "absent from listing #" + std::to_string(epoch) + " (master " + std::to_string(listing.master) +
           ", at change " + std::to_string(listing.position) + ") and stored by no master since (changes up to " +
           std::to_string(position_after) + ")";
  }

  // Read when a listing is recorded (the test: how many resyncs were timed
  // so far). Set before any listing.
  void SetTagSource(std::function<uint64_t()> source) { tag_source_ = std::move(source); }
  uint64_t ListingTag(size_t epoch) const {
    std::lock_guard<std::mutex> lock(mu_);
    return epoch == 0 ? 0 : listings_[epoch - 1].tag;
  }

  bool Holds(int master, const std::string& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    return held_[master].contains(key);
  }
  bool EverStored(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    return stores_.contains(key);
  }
  Clock::time_point ListingTaken(size_t epoch) const {
    std::lock_guard<std::mutex> lock(mu_);
    return epoch == 0 ? Clock::time_point{} : listings_[epoch - 1].taken;
  }

 private:
  mutable std::mutex mu_;
  uint64_t position_ = 0;
  std::atomic<uint64_t> position_now_{0};
  std::unordered_set<std::string> held_[kMasters];
  std::unordered_map<std::string, std::vector<uint64_t>> stores_;  // each key's stores, by position
  int followed_ = 0;
  std::vector<Listing> listings_;
  std::atomic<size_t> epoch_{0};
  std::function<uint64_t()> tag_source_;
};

}  // namespace sci::testing::sim
