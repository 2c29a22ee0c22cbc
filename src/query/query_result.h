// What a page query answers, whichever family's layout it ran on. A vLLM
// layout's "pages" are the router's blocks (vllm/chunk_query.h).
#pragma once

#include <cstddef>

namespace sci {

struct PageQueryResult {
  size_t n_pages = 0;      // whole pages in the request
  size_t total_hits = 0;   // pages fully present
  size_t prefix_hits = 0;  // leading run of hit pages
  size_t fast_path = 0;    // pages answered by an already-verified group
  size_t pages_examined = 0;  // pages hashed and looked up (CheckPrefix stops early)
};

// Adds per-item answers, in item order, to a result's hit counts: all of
// them, and the leading run.
class HitTally {
 public:
  void Add(bool hit, PageQueryResult& result) {
    result.total_hits += hit ? 1 : 0;
    leading_run_ = leading_run_ && hit;
    result.prefix_hits += leading_run_ ? 1 : 0;
  }

 private:
  bool leading_run_ = true;
};

}  // namespace sci
