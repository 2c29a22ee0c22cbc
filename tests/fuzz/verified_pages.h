// The 1.1 rule behind the fast path, checked after every query of both
// harnesses: a page whose group is verified for the page's key set has every
// one of those keys present AND stored under that group -- else the removal
// of a key stored elsewhere would not reach the group, and the fast path
// would answer hit for a page missing it (docs/index-semantics.md, Queries).
#pragma once

#include <string>
#include <vector>

#include "fuzz_check.h"
#include "index/fingerprint.h"
#include "index/index.h"
#include "sglang/layout.h"

namespace sci::fuzz {

// `hashes`: the request's page hashes (hex); pages are judged under the level
// each needs in a request of hashes.size() pages.
inline void ExpectVerifiedPagesHaveEveryKeyUnderTheirGroup(const Index& index, const Layout& layout,
                                                         const std::vector<std::string>& hashes) {
  const uint64_t seed = layout.tenant_seed();
  for (size_t page = 0; page < hashes.size(); ++page) {
    const Layout::Level& level = layout.LevelFor(page, hashes.size());
    const GroupProbe probe = index.ProbeGroup(FingerprintOf(seed, layout.GroupId(hashes[page])), level.id);
    if (!probe.verified) continue;
    std::vector<Fingerprint> keys;
    for (const std::string& key : layout.KeysFor(hashes[page], page, hashes.size())) {
      keys.push_back(FingerprintOf(seed, key));
    }
    const KeyCheck check = index.CheckKeys(keys, probe.ref);
    SCI_FUZZ_CHECK(check.all_present && check.all_under_group,
                   "page %zu is verified but its %zu keys are not all present (%d) under its group (%d)", page,
                   keys.size(), check.all_present, check.all_under_group);
  }
}

}  // namespace sci::fuzz
