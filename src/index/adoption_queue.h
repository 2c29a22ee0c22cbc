// Pages a query proved present key by key although their group is unknown,
// waiting for the writer to adopt them: to record the page's group on its
// keys (and verify it), so that the page's next queries take the fast path.
//
// Why: keys loaded from a snapshot carry no group (the master's snapshot
// lists keys only), and a Mooncake master never announces an object again.
// After every resync -- a start, a gap, a failover -- each page in the pool
// would be checked key by key for as long as its objects live, although the
// live stream would have given it a group. A reader may not change a key
// (docs/index-semantics.md, "Queries"), so it only asks; the writer adopts
// between batches, in stream order, after checking the keys again itself
// (Index::AdoptRequestedGroups).
//
// Bounded and preallocated: a query never allocates here, and holds the
// mutex for a copy of one page's fingerprints. A request that finds the
// queue full is dropped (the page stays on the exact path until it is asked
// for again), as is one for a group already waiting.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>

#include "absl/base/thread_annotations.h"
#include "index/annotated_mutex.h"
#include "index/fingerprint.h"
#include "index/rw_lock.h"

namespace sci {

class AdoptionQueue {
 public:
  // Enough for three 169-page tp8 prompts between two turns of the writer;
  // a page needing more keys than kMaxKeysPerPage is never adopted.
  static constexpr size_t kMaxRequests = 512;
  static constexpr size_t kMaxKeys = 8192;
  static constexpr uint32_t kMaxKeysPerPage = 64;

  struct Request {
    Fingerprint group;
    Fingerprint head;       // the keys' common head (page_tails.h), if has_head
    uint64_t tenant_seed = 0;  // of the keys, with has_head
    bool has_head = false;
    bool group_named_by_head = false;  // `group` is "<head_group_prefix><head>" (stray_keys.h)
    uint32_t layout = 0;    // the LayoutId of the key set the query checked
    uint32_t first_key = 0; // the request's keys: keys[first_key, first_key + n_keys)
    uint32_t n_keys = 0;
  };

  // The requests taken together by the writer (about 160 KiB).
  struct Batch {
    size_t n_requests = 0;
    size_t n_keys = 0;
    Request requests[kMaxRequests];
    Fingerprint keys[kMaxKeys];
    // The low halves of the groups waiting (0 = free; a group whose low half
    // is 0 is stored as 1), open addressing: "already asked?" in O(1). Two
    // groups sharing a low half count as one: the second waits for a later
    // turn.
    uint64_t asked[2 * kMaxRequests];

    Batch() { Empty(); }
    void Empty() {
      n_requests = 0;
      n_keys = 0;
      std::memset(asked, 0, sizeof asked);
    }
    std::span<const Request> Requests() const { return std::span<const Request>(requests, n_requests); }
    std::span<const Fingerprint> KeysOf(const Request& r) const {
      return std::span<const Fingerprint>(keys + r.first_key, r.n_keys);
    }
    // Records `group` as asked; false if it was already.
    bool MarkAsked(const Fingerprint& group) {
      const uint64_t tag = group.low == 0 ? 1 : group.low;
      constexpr size_t kMask = 2 * kMaxRequests - 1;
      for (size_t i = (tag * 0x9E3779B97F4A7C15ull) >> (64 - 10);; i = (i + 1) & kMask) {
        if (asked[i] == tag) return false;
        if (asked[i] == 0) {
          asked[i] = tag;
          return true;
        }
      }
    }
  };
  static_assert(2 * kMaxRequests == size_t{1} << 10, "MarkAsked's mask and shift");

  AdoptionQueue() : pending_(std::make_unique<Batch>()) {}

  // Called, with no lock of the index held, each time a request arrives in
  // an empty queue: the writer's thread (a subscriber) wakes to adopt. One
  // listener at a time; nullptr removes it (after which it is never called).
  void SetListener(std::function<void()> listener) {
    WriterLock lock(mu_);
    listener_ = std::move(listener);
  }

  // Asks for `group` to be adopted with `keys` (all of them: the whole key
  // set of `layout`'s page). False if dropped (full, or already asked).
  bool Push(const Fingerprint& group, uint32_t layout, std::span<const Fingerprint> keys, const Fingerprint* head,
            uint64_t tenant_seed, bool group_named_by_head) {
    if (keys.empty() || keys.size() > kMaxKeysPerPage) return false;
    WriterLock lock(mu_);
    Batch& b = *pending_;
    if (b.n_requests == kMaxRequests || b.n_keys + keys.size() > kMaxKeys || !b.MarkAsked(group)) return false;
    Request& r = b.requests[b.n_requests++];
    r.group = group;
    r.has_head = head != nullptr;
    r.head = head != nullptr ? *head : Fingerprint{};
    r.tenant_seed = tenant_seed;
    r.group_named_by_head = head != nullptr && group_named_by_head;
    r.layout = layout;
    r.first_key = static_cast<uint32_t>(b.n_keys);
    r.n_keys = static_cast<uint32_t>(keys.size());
    for (const Fingerprint& key : keys) b.keys[b.n_keys++] = key;
    waiting_.store(true, std::memory_order_relaxed);
    // Under mu_, so that SetListener(nullptr) returning means no call is
    // under way (the subscriber's wake-up is one write to an eventfd).
    if (b.n_requests == 1 && listener_) listener_();
    return true;
  }

  // Whether a request may be waiting: a relaxed read, so that the writer's
  // every batch pays one load for this, not a lock. (A request pushed just
  // after it read false waits for the next batch.)
  bool maybe_waiting() const { return waiting_.load(std::memory_order_relaxed); }

  // Moves every waiting request into `out` (whose previous contents go),
  // leaving the queue empty: the buffers swap, nothing is copied.
  void TakeAll(std::unique_ptr<Batch>& out) {
    if (out == nullptr) {
      out = std::make_unique<Batch>();
    } else {
      out->Empty();
    }
    WriterLock lock(mu_);
    pending_.swap(out);
    waiting_.store(false, std::memory_order_relaxed);
  }

 private:
  AnnotatedMutex mu_;
  std::unique_ptr<Batch> pending_ ABSL_GUARDED_BY(mu_);
  std::function<void()> listener_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> waiting_{false};
};

}  // namespace sci
