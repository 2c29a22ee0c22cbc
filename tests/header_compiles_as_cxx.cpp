// The public header compiles as strict C++ (-Wall -Wextra -Werror -pedantic)
// and links with C linkage; each SCI_*_INIT initialiser sets struct_size and
// zeroes the rest, as in C.
#include "shared_cache_index.h"

#include <cstring>

int main() {
  const sci_index_options options = SCI_INDEX_OPTIONS_INIT;
  const sci_subscriber_options subscriber = SCI_SUBSCRIBER_OPTIONS_INIT;
  const sci_layout_spec spec = SCI_LAYOUT_SPEC_INIT;
  const sci_page_result result = SCI_PAGE_RESULT_INIT;
  sci_stats stats = SCI_STATS_INIT;
  if (options.struct_size != sizeof options || options.max_entries != 0) return 1;
  if (subscriber.struct_size != sizeof subscriber || subscriber.endpoint.ptr != nullptr) return 1;
  if (spec.struct_size != sizeof spec || spec.page_size != 0 || spec.pools != nullptr) return 1;
  if (result.struct_size != sizeof result || result.n_pages != 0) return 1;
  if (stats.struct_size != sizeof stats || stats.fast_path_hits != 0) return 1;

  sci_index* index = nullptr;
  if (sci_index_new(&options, &index) != SCI_OK) return 1;
  const bool ok = sci_index_stats(index, &stats) == SCI_OK && stats.keys == 0 &&
                  std::strlen(sci_version()) > 0;
  sci_index_free(index);
  return ok ? 0 : 1;
}
