// What every family's query counts, once per query with totals (each
// counter's Add is a locked read-modify-write, ~20 cycles: a prefix query
// of a prompt nobody stored, a few hundred nanoseconds in all, adds only
// what it must).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/log.h"
#include "common/warn_once.h"
#include "index/index.h"
#include "query/query_result.h"

namespace sci {

// One query that checked `checked` pages (or router blocks), with its hits.
inline void CountQuery(Index& index, const PageQueryResult& result, size_t checked) {
  QueryCounters& counters = index.query_counters();
  counters.queries.Add();
  counters.pages_checked.Add(checked);
  if (result.total_hits > 0) counters.page_hits.Add(result.total_hits);
  if (result.fast_path > 0) counters.fast_path_hits.Add(result.fast_path);
}

// Whether a query's block size is the one its layout answers for. If not,
// nothing can be looked up: the query answers no page (the 1.x meaning, no
// error), counted as a query that checked nothing and in
// block_size_mismatches, and the layout's first such query warns through the
// log callback, so a router asking with the wrong block size is seen rather
// than read as a cold cache. `query` and `field` name them in the log
// ("page query", "page size").
inline bool BlockSizeMatches(Index& index, uint32_t block_size, uint32_t layout_block_size, const WarnOnce& warning,
                             const char* query, const char* field) {
  if (block_size == layout_block_size) return true;
  index.query_counters().queries.Add();
  index.query_counters().block_size_mismatches.Add();
  const LogLevel level = warning.First() ? LogLevel::kWarn : LogLevel::kDebug;
  Logf(level, "%s: block size %d is not the layout's %s %d; nothing checked (counted in block_size_mismatches)", query,
       block_size, field, layout_block_size);
  return false;
}

}  // namespace sci
