// The pipeline every family's query runs its lookups through, whatever
// it hashes and however it answers: items (SGLang's pages, vLLM's chunks)
// go in rounds, so that the memory round trips of one round's table lines
// overlap the hashing of the next instead of following it, and one
// reader-lock hold serves a round, not an item (a hold is two locked
// instructions, each a full barrier that stops the core overlapping the
// lookups with the SHA-256 around them).
//
// Two steps (Family::kProbes false). For round r = 0, 1, ...:
//   - Prepare(r) with no lock held: hash, fingerprint; returns the round's
//     item count, 0 once there are no more;
//   - BeforeCheck(r-1): test seams, with no lock held;
//   - one hold: Prefetch(r)'s lines, then Check(r-1), whose lines travelled
//     while r was prepared;
//   - Answer(r-1): false stops the pipeline (a prefix that ended).
//
// Three steps (kProbes true): an item is first probed by a line of its own
// (SGLang's group), which decides what else it needs. For round r:
//   - Prepare(r), as above;
//   - one hold: Prefetch(r)'s first lines, Probe(r-1) (they came meanwhile);
//   - Plan(r-1) with no lock held: what the probe left to look up;
//   - BeforeCheck(r-2);
//   - one hold: PrefetchPlanned(r-1), Check(r-2);
//   - Answer(r-2).
//
// The pipeline keeps the rounds, the family's Round type, in kDepth (2 or
// 3) locals on its stack, set up once by Init(round, slot), and hands each
// step the round it works on; a round is reused once it is answered. The
// pipeline ends when Prepare has no more and every round in flight is
// empty (empty(round)), or when an Answer says stop. Everything is
// inlined: the pipeline costs what the family's steps cost, written out by
// hand (paired against the hand-written loops it replaced: the same).
//
// A Prefetch step does nothing but prefetch, which GCC takes for no effect
// at all: it would delete the step, and every prefetch of the query with
// it, unless the prefetches go through common/prefetch.h (as the index's
// Reader::Prefetch* do). tests/check_prefetches.sh catches it.
#pragma once

#include <cstddef>

#include "index/index.h"

namespace sci {

template <typename Family>
constexpr size_t RoundDepth() {
  return Family::kProbes ? 3 : 2;
}

template <typename Family>
void RunRounds(Index& index, Family& family) {
  using Round = typename Family::Round;
  constexpr size_t kDepth = RoundDepth<Family>();
  Round rounds[kDepth];
  for (size_t slot = 0; slot < kDepth; ++slot) family.Init(rounds[slot], slot);
  if constexpr (Family::kProbes) {
    Round* prepared = &rounds[0];  // round r
    Round* probed = &rounds[1];    // round r-1
    Round* checked = &rounds[2];   // round r-2
    while (true) {
      const size_t n = family.Prepare(*prepared);
      if (n == 0 && family.empty(*probed) && family.empty(*checked)) return;
      {
        Index::Reader reader(index);
        family.Prefetch(reader, *prepared);
        family.Probe(reader, *probed);
      }
      family.Plan(*probed);
      family.BeforeCheck(*checked);
      {
        Index::Reader reader(index);
        family.PrefetchPlanned(reader, *probed);
        family.Check(reader, *checked);
      }
      if (!family.Answer(*checked)) return;
      Round* answered = checked;
      checked = probed;
      probed = prepared;
      prepared = answered;
    }
  } else {
    Round* prepared = &rounds[0];  // round r
    Round* checked = &rounds[1];   // round r-1
    while (true) {
      const size_t n = family.Prepare(*prepared);
      if (n == 0 && family.empty(*checked)) return;
      family.BeforeCheck(*checked);
      {
        Index::Reader reader(index);
        family.Prefetch(reader, *prepared);
        family.Check(reader, *checked);
      }
      if (!family.Answer(*checked)) return;
      Round* answered = checked;
      checked = prepared;
      prepared = answered;
    }
  }
}

}  // namespace sci
