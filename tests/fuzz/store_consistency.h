// The page store's invariants, checked after every query of the harnesses
// that drive the index (Index::Inconsistency: every entry has a present
// slot, the counts are the entries', mixed media have their row, and the
// index's gauges are the store's). 1.3 checked here that a verified group
// had every key stored under it; 1.4 has no groups to verify.
#pragma once

#include <string>

#include "fuzz_check.h"
#include "index/index.h"

namespace sci::fuzz {

inline void ExpectTheStoreConsistent(const Index& index) {
  const std::string what = index.Inconsistency();
  SCI_FUZZ_CHECK(what.empty(), "the page store is inconsistent: %s", what.c_str());
}

}  // namespace sci::fuzz
