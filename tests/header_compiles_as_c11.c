/* The public header is plain C11: this file includes it under
 * -std=c11 -Wall -Wextra -Werror -pedantic and touches every type. */
#include "shared_cache_index.h"

int main(void) {
    sci_index_options options = {sizeof(sci_index_options), 0};
    sci_event event = {SCI_EVENT_STORED, {"k", 1}, {0, 0}, {0, 0}, {0, 0}};
    sci_stats stats = {sizeof(sci_stats), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, false, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, 0};
    sci_bytes frame = {0, 0};
    sci_index *index = 0;
    int ok = sci_index_new(&options, &index) == SCI_OK && sci_index_apply_events(index, 1, &event, 1) == SCI_OK &&
             sci_index_stats(index, &stats) == SCI_OK && stats.keys == 1 && frame.len == 0;
    sci_index_free(index);
    return ok && sci_abi_version() == SCI_ABI_VERSION ? 0 : 1;
}
