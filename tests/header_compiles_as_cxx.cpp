// The public header compiles as strict C++ (-Wall -Wextra -Werror -pedantic)
// and links with C linkage.
#include "shared_cache_index.h"

#include <cstring>

int main() {
  sci_index* index = nullptr;
  if (sci_index_new(nullptr, &index) != SCI_OK) return 1;
  sci_stats stats{};
  stats.struct_size = sizeof stats;
  const bool ok = sci_index_stats(index, &stats) == SCI_OK && stats.keys == 0 &&
                  std::strlen(sci_version()) > 0;
  sci_index_free(index);
  return ok ? 0 : 1;
}
