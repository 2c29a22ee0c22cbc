// The harnesses' assertion: a broken invariant is a finding, so it stops the
// process the way a sanitizer report does (libFuzzer saves the input as a
// crash reproducer; a replay test fails).
#pragma once

#include <cstdio>
#include <cstdlib>

#define SCI_FUZZ_CHECK(condition, ...)                                                    \
  do {                                                                                    \
    if (!(condition)) {                                                                   \
      std::fprintf(stderr, "%s:%d: invariant broken: %s\n  ", __FILE__, __LINE__, #condition); \
      std::fprintf(stderr, __VA_ARGS__);                                                  \
      std::fprintf(stderr, "\n");                                                         \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)
