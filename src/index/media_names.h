// Numbers for the medium names a master sends ("cpu", "disk", ...), so that
// a key's media fit the 8 bits of its entry (key_entry.h). Names are
// compared as bytes and numbered in order of first sight, up to kCapacity;
// a name beyond them gets none, and its events are applied as under the
// object rule (a removal drops the key; a store leaves its media unknown).
// Numbers are never taken back, not even by a clear: a key's media bits must
// keep their meaning for as long as the key is there.
//
// Writer only (the index's apply_mu_): queries never read media.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "index/key_entry.h"

namespace sci {

class MediaNames {
 public:
  static constexpr int kCapacity = 8;  // bits of a MediaSet

  // The bit of `medium`, numbering it on first sight; 0 (unknown) for an
  // empty name or when every number is taken. May throw std::bad_alloc
  // before changing anything.
  MediaSet BitOf(std::string_view medium) {
    if (medium.empty()) return 0;
    for (int i = 0; i < count_; ++i) {
      if (names_[i] == medium) return static_cast<MediaSet>(1u << i);
    }
    if (count_ == kCapacity) return 0;
    names_[count_] = std::string(medium);  // the copy first: a failed one numbers nothing
    return static_cast<MediaSet>(1u << count_++);
  }

 private:
  std::array<std::string, kCapacity> names_;
  int count_ = 0;
};

}  // namespace sci
