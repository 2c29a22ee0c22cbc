// The slots a layout needs of every page, resolved to slot numbers once, so
// that a page query reads one entry per page and bank (ObjectStore::PageHas)
// instead of hashing and looking up each slot's name for each page.
//
// A layout names its keys for a page as prefix + the page's digest in
// lowercase hex + suffix (key_shape.h). Each such (prefix, suffix) is one of
// four kinds here:
//   - numbered: its slot has a number (slot_names.h): the page entry of the
//     number's bank answers it, all of a bank's slots in one word;
//   - never stored: no number while numbers remain, which proves that no
//     key of that slot was ever stored (I1) -- no page is present;
//   - whole: no number once numbers ran out, or its id taken by another
//     name (slot_names.h): its keys are stored whole, so the query builds
//     each page's key and looks it up (exact, slower);
//   - not a slot: the key's shape is not (prefix, digest, suffix) -- the
//     prefix ends in a hex digit, or holds 64 of them, so ShapeOf finds
//     another digest or none, and the slot would differ from page to page.
//     Such keys are looked up one by one (ObjectStore::Contains), exactly.
//
// A plan is made and used under the index's table lock (shared is enough)
// and holds for as long as no slot gets a new number: numbers are never
// taken back, but a slot "never stored" or "whole" may get one later, and
// numbers running out turns "never stored" into "whole". current() says
// whether the plan may still be used; if not, resolve it again. A plan
// records the serial of the names it was resolved against, so it is never
// current on another index (a review found one that was, read another
// index's bits under its numbering, and gave a false hit); the store checks
// current() in every build and answers a stale plan with a miss.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "index/key_shape.h"
#include "index/slot_names.h"

namespace sci {

struct SlotName {
  std::string prefix;
  std::string suffix;
  // What Resolve needs of the name, worked out once by Named() (a layout's
  // names are made with it, so that resolving a plan hashes nothing):
  // SlotId(prefix, suffix) and IsSlot. Without them Resolve works them out.
  bool named = false;
  bool is_slot = false;
  Fingerprint id{};

  static SlotName Named(std::string prefix, std::string suffix);
};

class SlotPlan {
 public:
  // One page entry to read: the bank and the bits the page must have in it.
  struct Bank {
    uint32_t bank = 0;
    uint64_t required = 0;
  };

  SlotPlan() = default;  // unresolved: answers no page
  // A moved-from plan is unresolved again, so that it answers no page (a
  // review found one that kept `current()` with its lists emptied: every
  // page a hit).
  SlotPlan(SlotPlan&& other) noexcept { *this = std::move(other); }
  SlotPlan& operator=(SlotPlan&& other) noexcept {
    resolved_ = std::exchange(other.resolved_, false);
    names_serial_ = other.names_serial_;
    numbers_seen_ = other.numbers_seen_;
    never_present_ = other.never_present_;
    banks_ = std::move(other.banks_);
    whole_ = std::move(other.whole_);
    by_key_ = std::move(other.by_key_);
    other.banks_.clear();
    other.whole_.clear();
    other.by_key_.clear();
    return *this;
  }
  SlotPlan(const SlotPlan&) = default;
  SlotPlan& operator=(const SlotPlan&) = default;

  // May throw bad_alloc (a plan is the reader's own memory).
  static SlotPlan Resolve(const SlotNames& names, const std::vector<SlotName>& slots) {
    SlotPlan plan;
    ResolveInto(names, slots, plan);
    return plan;
  }
  // The same into `plan`, whose lists keep their room: a plan resolved
  // again allocates nothing unless it needs more (a query's warm path). May
  // throw bad_alloc, and then `plan` is unresolved (answers no page).
  static void ResolveInto(const SlotNames& names, const std::vector<SlotName>& slots, SlotPlan& plan) {
    plan.resolved_ = false;
    plan.never_present_ = false;
    plan.banks_.clear();
    plan.whole_.clear();
    plan.by_key_.clear();
    plan.names_serial_ = names.serial();
    plan.numbers_seen_ = names.size();
    for (const SlotName& slot : slots) {
      if (!(slot.named ? slot.is_slot : IsSlot(slot))) {
        plan.by_key_.push_back(slot);
        continue;
      }
      const uint32_t number = names.Find(slot.named ? slot.id : SlotId(slot.prefix, slot.suffix), slot.prefix,
                                         slot.suffix);
      if (number == SlotNames::kNone && !names.full()) {
        plan.never_present_ = true;
      } else if (number == SlotNames::kNone || number == SlotNames::kTakenByAnother) {
        plan.whole_.push_back(slot);
      } else {
        plan.Require(number);
      }
    }
    std::sort(plan.banks_.begin(), plan.banks_.end(),
              [](const Bank& a, const Bank& b) { return a.bank < b.bank; });
    plan.resolved_ = true;  // last: a throw above leaves it unresolved
  }

  // Whether the plan still says where every slot is: resolved against these
  // names, and no slot numbered since.
  bool current(const SlotNames& names) const {
    return resolved_ && names_serial_ == names.serial() && names.size() == numbers_seen_;
  }

  // Some slot was never stored: no page is present.
  bool never_present() const { return never_present_; }
  // Whether a page can be proven present by this plan at all: resolved,
  // and naming at least one key (a plan of no names proves nothing).
  bool proves_something() const { return resolved_ && (!banks_.empty() || !whole_.empty() || !by_key_.empty()); }
  const std::vector<Bank>& banks() const { return banks_; }
  const std::vector<SlotName>& whole() const { return whole_; }
  const std::vector<SlotName>& by_key() const { return by_key_; }

  // Whether ShapeOf(prefix + digest + suffix) gives back this prefix and
  // suffix for every digest. It does for the all-zero digest exactly when
  // the prefix neither ends in a hex digit nor holds a run of 64 of them
  // (else the run ShapeOf finds starts before the digest); and then the run
  // starts at the digest whatever its digits.
  static bool IsSlot(const SlotName& slot) {
    std::string sample = slot.prefix;
    sample.append(2 * sizeof(PageDigest), '0');
    sample += slot.suffix;
    const KeyShape shape = ShapeOf(sample);
    return shape.decomposes && shape.prefix == slot.prefix && shape.suffix == slot.suffix;
  }

 private:
  void Require(uint32_t number) {
    const uint32_t bank = SlotNames::BankOf(number);
    for (Bank& b : banks_) {
      if (b.bank == bank) {
        b.required |= SlotNames::BitOf(number);
        return;
      }
    }
    banks_.push_back(Bank{bank, SlotNames::BitOf(number)});
  }

  bool resolved_ = false;
  uint64_t names_serial_ = 0;  // SlotNames::serial() of the names resolved against
  uint32_t numbers_seen_ = 0;
  bool never_present_ = false;
  std::vector<Bank> banks_;
  std::vector<SlotName> whole_;
  std::vector<SlotName> by_key_;
};

inline SlotName SlotName::Named(std::string prefix, std::string suffix) {
  SlotName name{std::move(prefix), std::move(suffix)};
  name.is_slot = SlotPlan::IsSlot(name);
  name.id = SlotId(name.prefix, name.suffix);
  name.named = true;
  return name;
}

}  // namespace sci
