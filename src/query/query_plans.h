// The slot plans (index/slot_plan.h) of one query, one per part of its
// layout (an SGLang level, a vLLM group), kept by the querying thread from
// one query to the next: a thread asking the same index under the same
// layout again (a router's every query) finds its plans made, checks each
// is current (one compare under the hold that uses it), and resolves none.
//
// Why kept, and why per thread: resolving a tp8 level looks 16 slot names
// up (a few hundred nanoseconds), a quarter of hashing a page, on every
// query of a prompt nobody stored; and a plan resolved holds its lists'
// room, so resolving it again allocates nothing.
//
// Why several sets a thread: a router thread serves every model it routes
// for (a tokio worker, a Python event loop), so queries of two layouts, or
// of two indexes, come in turn on one thread. With one set, each query
// emptied the other's plans and resolved its own again: about 70 ns a
// query, a quarter of a one-page query (bench/README.md, "Layouts in
// turn"). A thread keeps kSetsPerThread sets, one per (index, layout) it
// asked last, and replaces the least recently used.
//
// Exactness rests on the keys: a plan is reused only for the same index
// (Index::serial) and layout (LayoutSerial below), both never reused in the
// process, and only while current (slot numbers are never taken back). A
// query nested in another on one thread (a log callback that queries)
// gets plans of its own, so it never replaces the plans the outer query is
// using.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/thread_owned.h"
#include "index/index.h"
#include "index/slot_plan.h"

namespace sci {

// A number for a layout handle, never another's in the process.
inline uint64_t NextLayoutSerial() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

class QueryPlans {
 public:
  // Plan sets a thread keeps: four layouts, or indexes, queried in turn
  // resolve nothing.
  static constexpr size_t kSetsPerThread = 4;

  // The plans of one query for `parts` parts of layout `layout_serial` on
  // `index`: the thread's set for them (kept from its last query of them)
  // unless a query of this thread is using it; else the thread's least
  // recently used set not in use, emptied; else (queries nested
  // kSetsPerThread deep, or the thread exiting) a set of its own. May
  // throw bad_alloc.
  class Lease {
   public:
    Lease(const Index& index, uint64_t layout_serial, size_t parts);
    ~Lease() { plans_->in_use_ = false; }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    QueryPlans& operator*() const { return *plans_; }
    QueryPlans* operator->() const { return plans_; }

   private:
    std::unique_ptr<QueryPlans> owned_;
    QueryPlans* plans_ = nullptr;
  };

  // Part `part`'s plan, made current under `reader` (resolved again if a
  // slot was numbered since it was made).
  const SlotPlan& Current(const Index::Reader& reader, size_t part, const std::vector<SlotName>& slots) {
    Part& p = parts_[part];
    if (reader.Refresh(p.plan, slots)) ++p.version;
    return p.plan;
  }
  // Part `part`'s plan as it was last made, maybe no longer current: for
  // computing, with no lock held, the entries a page will read (their
  // fingerprints are used only if version() has not moved by then).
  const SlotPlan& Last(size_t part) const { return parts_[part].plan; }
  // How many times part `part`'s plan was resolved (0: never).
  uint32_t version(size_t part) const { return parts_[part].version; }

 private:
  struct Part {
    SlotPlan plan;
    uint32_t version = 0;
  };

  class ThreadSets;

  void Begin(uint64_t index_serial, uint64_t layout_serial, size_t parts) {
    if (index_serial != index_serial_ || layout_serial != layout_serial_) {
      // Another index or layout: plans of neither may serve it.
      for (Part& p : parts_) p = Part{};
      index_serial_ = index_serial;
      layout_serial_ = layout_serial;
    }
    if (parts_.size() < parts) parts_.resize(parts);
  }

  uint64_t index_serial_ = 0;
  uint64_t layout_serial_ = 0;
  std::vector<Part> parts_;
  bool in_use_ = false;
  uint64_t last_taken_ = 0;  // ThreadSets' clock when last taken (0: never)
};

// A thread's sets, each with when it was last taken (the thread's own:
// ThreadOwned, which a query made while the thread exits finds gone).
class QueryPlans::ThreadSets {
 public:
  // The set kept for (index, layout) if one is not in use; else the
  // least recently taken set not in use (Begin empties it); null when
  // every set is in use.
  QueryPlans* Take(uint64_t index_serial, uint64_t layout_serial) {
    QueryPlans* oldest = nullptr;
    for (QueryPlans& set : sets_) {
      if (set.in_use_) continue;
      if (set.index_serial_ == index_serial && set.layout_serial_ == layout_serial) return Taken(set);
      if (oldest == nullptr || set.last_taken_ < oldest->last_taken_) oldest = &set;
    }
    return oldest == nullptr ? nullptr : Taken(*oldest);
  }

 private:
  QueryPlans* Taken(QueryPlans& set) {
    set.last_taken_ = ++clock_;
    return &set;
  }

  QueryPlans sets_[kSetsPerThread];
  uint64_t clock_ = 0;
};

inline QueryPlans::Lease::Lease(const Index& index, uint64_t layout_serial, size_t parts) {
  ThreadSets* mine = ThreadOwned<ThreadSets>::Get();
  if (mine != nullptr) plans_ = mine->Take(index.serial(), layout_serial);
  if (plans_ == nullptr) {
    owned_ = std::make_unique<QueryPlans>();
    plans_ = owned_.get();
  }
  plans_->Begin(index.serial(), layout_serial, parts);
  plans_->in_use_ = true;
}

}  // namespace sci
