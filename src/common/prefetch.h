// Starting a cache line on its way, as a side effect the compiler keeps.
//
// GCC gives __builtin_prefetch no effect in its model of the program, so
// its analysis of pure functions marks a function that only prefetches (a
// pipeline step that prefetches a round's lines, say) as pure, and a call
// of a pure function whose result is unused is dead: GCC 12 deleted every
// such call, and with them every prefetch of the query, while the code
// looked the same (measured 2026-12-02: fresh cold prompts 15-25% slower,
// each probe waiting on the line its prefetch should have brought). The
// empty volatile asm after the prefetch is a side effect that names the
// address: it emits nothing, and keeps the prefetch and every caller.
// docs/architecture.md, "Invariants", names the test that catches it.
#pragma once

namespace sci {

// For a read soon (every cache level).
inline void PrefetchForRead(const void* line) {
  __builtin_prefetch(line, 0, 3);
  asm volatile("" : : "r"(line));
}

// For a write soon.
inline void PrefetchForWrite(const void* line) {
  __builtin_prefetch(line, 1, 3);
  asm volatile("" : : "r"(line));
}

}  // namespace sci
