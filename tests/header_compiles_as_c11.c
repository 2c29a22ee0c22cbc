/* The public header is plain C11: this file includes it under
 * -std=c11 -Wall -Wextra -Werror -pedantic, touches every type, and checks
 * that each SCI_*_INIT initialiser sets struct_size and zeroes the rest. */
#include "shared_cache_index.h"

int main(void) {
    sci_index_options options = SCI_INDEX_OPTIONS_INIT;
    sci_subscriber_options subscriber = SCI_SUBSCRIBER_OPTIONS_INIT;
    sci_layout_spec spec = SCI_LAYOUT_SPEC_INIT;
    sci_page_result result = SCI_PAGE_RESULT_INIT;
    sci_stats stats = SCI_STATS_INIT;
    sci_event event = {SCI_EVENT_STORED, {"k", 1}, {0, 0}, {0, 0}, {0, 0}};
    sci_bytes frame = {0, 0};
    sci_index *index = 0;
    int ok;

    if (options.struct_size != sizeof options || options.max_entries != 0) return 1;
    if (subscriber.struct_size != sizeof subscriber || subscriber.endpoint.ptr != 0 ||
        subscriber.stale_after_ms != 0)
        return 1;
    if (spec.struct_size != sizeof spec || spec.page_size != 0 || spec.pools != 0 || spec.is_eagle) return 1;
    if (result.struct_size != sizeof result || result.n_pages != 0 || result.fast_path != 0) return 1;
    if (stats.struct_size != sizeof stats || stats.keys != 0 || stats.fast_path_hits != 0) return 1;

    ok = sci_index_new(&options, &index) == SCI_OK && sci_index_apply_events(index, 1, &event, 1) == SCI_OK &&
         sci_index_stats(index, &stats) == SCI_OK && stats.keys == 1 && frame.len == 0;
    sci_index_free(index);
    return ok && sci_abi_version() == SCI_ABI_VERSION ? 0 : 1;
}
