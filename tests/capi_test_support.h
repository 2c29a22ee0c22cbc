// Helpers for the suites that see only the public header: an index handle
// freed at scope exit, and a stats snapshot.
#pragma once

#include <gtest/gtest.h>

#include "shared_cache_index.h"

namespace sci_test {

struct IndexHandle {
  IndexHandle() { EXPECT_EQ(sci_index_new(nullptr, &index), SCI_OK); }
  ~IndexHandle() { sci_index_free(index); }
  IndexHandle(const IndexHandle&) = delete;
  IndexHandle& operator=(const IndexHandle&) = delete;
  sci_index* index = nullptr;
};

inline sci_stats Stats(const sci_index* index) {
  sci_stats stats{};
  stats.struct_size = sizeof stats;
  EXPECT_EQ(sci_index_stats(index, &stats), SCI_OK);
  return stats;
}

}  // namespace sci_test
