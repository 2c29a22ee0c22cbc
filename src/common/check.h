// SCI_DCHECK(condition, why): what the code relies on, stated where it is
// relied on, and checked in the builds that run the tests under the
// sanitizers (scripts/test-sanitizers.sh configures -DSCI_DEBUG_CHECKS=ON)
// and in Debug builds; compiled out of release builds, where the condition
// is not evaluated at all (so it may cost a walk). A broken check prints
// the condition, the reason and the place, and aborts: the tests then fail
// where the invariant broke, not where a wrong answer surfaced.
//
// Whole-structure checks (a store against its own invariants) are
// functions returning what is inconsistent (an empty string when nothing
// is), which tests call after every step: PageStore::Inconsistency.
#pragma once

#include <cstdio>
#include <cstdlib>

#if defined(SCI_DEBUG_CHECKS) || !defined(NDEBUG)
#define SCI_DCHECK_ENABLED 1
#define SCI_DCHECK(condition, why)                                                                     \
  do {                                                                                                 \
    if (!(condition)) {                                                                                \
      std::fprintf(stderr, "%s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #condition, why);    \
      std::abort();                                                                                    \
    }                                                                                                  \
  } while (0)
#else
#define SCI_DCHECK_ENABLED 0
// sizeof: the condition is not evaluated, but what it names counts as used
// (no unused-variable warning for a value kept only to be checked).
#define SCI_DCHECK(condition, why) \
  do {                             \
    (void)sizeof(!(condition));    \
    (void)sizeof(why);             \
  } while (0)
#endif
