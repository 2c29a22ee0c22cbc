// The page summary: for each head of a split key ("<prefix><64 hex page
// hash>", index/fingerprint.h), which tails are present, as one word of
// tail numbers (index/tail_interner.h), and whether the keys present under
// it were all stored under one group.
//
// Why: a page's keys share their head and differ only by tail (a tp8
// page of eight ranks' K and V: "<hash>_0_k" ... "<hash>_7_v"). Checked key by key, a page not
// verified by its group reads 16 scattered table lines; on a prompt the
// router never saw, with the tables out of the core's caches, those lines
// cost as much as hashing the page (bench/README.md, sixth pass). Checked
// here, it reads one.
//
// Exact: while a head has an entry, the writer keeps its tail bit set
// exactly while the key "<head><tail>" is in the key table (both change
// under the same exclusive hold of the table lock), so "every tail the page
// needs is set" and "every key the page needs is present" are the same
// statement. An entry is made when a store brings the page's group to three
// keys, from the key table itself (the head looked up with every numbered
// tail), and goes with the page's last key. Pages without one -- of one or
// two keys (MLA, tp1: an entry would cost them more memory than the lines
// it saves), or whose keys carry no group (snapshot keys) -- are checked key
// by key, as are pages needing a tail that got no number (past 64 distinct).
// An entry is half a cache line, 40-58 bytes with the table's slack: 2.5-3.6
// bytes a key for tp8 (3.1 measured at 10M keys).
#pragma once

#include <cstdint>

namespace sci {

// A page gets an entry once its group holds this many keys, and a query
// reads the summary only for pages that need this many: pages of one or two
// keys (MLA, tp1) read as many lines key by key, and an entry per page would
// cost them 20-60 bytes a key.
inline constexpr uint32_t kPageTailsMinKeys = 3;

struct PageTails {
  // Bit n: the key with tail number n is present. Two halves: 4-byte
  // alignment packs two entries and their fingerprints into one cache line.
  uint32_t low = 0;
  uint32_t high = 0;
  // The group (a GroupRef) every present key of the head was stored under;
  // 0 if one was stored under none; kMixedGroups if they differ (then it
  // stays so until the head's last key goes, or until a group its keys are
  // stored under holds as many keys as the head has tails, when the writer
  // works the entry out again from the key table: Index::AddTail. Mixed only
  // costs the page its verification by this path, never an answer).
  uint32_t group = 0;

  static constexpr uint32_t kMixedGroups = UINT32_MAX;

  uint64_t tails() const { return (uint64_t{high} << 32) | low; }
  bool empty() const { return (low | high) == 0; }

  // A key with tail number `n`, stored under `group`, is now present.
  void Add(int n, uint32_t key_group) {
    const uint64_t bit = uint64_t{1} << n;
    const uint64_t before = tails();
    if ((before & ~bit) == 0) {
      group = key_group;  // the only key present: its group is the page's
    } else if (group != key_group) {
      group = kMixedGroups;
    }
    Set(before | bit);
  }
  // The key with tail number `n` is gone.
  void Remove(int n) { Set(tails() & ~(uint64_t{1} << n)); }

 private:
  void Set(uint64_t tails) {
    low = static_cast<uint32_t>(tails);
    high = static_cast<uint32_t>(tails >> 32);
  }
};

}  // namespace sci
