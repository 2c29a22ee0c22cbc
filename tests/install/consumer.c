/* A C program built against an *installed* shared-cache-index, through
 * pkg-config or find_package, shared or static. */
#include <stdio.h>
#include <string.h>

#include <shared_cache_index.h>

int main(void) {
    sci_index *index = NULL;
    sci_event e;
    bool present = false;
    memset(&e, 0, sizeof e);
    e.kind = SCI_EVENT_STORED;
    e.object_key.ptr = "installed-key";
    e.object_key.len = strlen("installed-key");
    if (sci_index_new(NULL, &index) != SCI_OK) return 1;
    if (sci_index_apply_events(index, 1, &e, 1) != SCI_OK) return 1;
    if (sci_index_contains(index, e.tenant_id, e.object_key, &present) != SCI_OK || !present) return 1;
    sci_index_free(index);
    printf("consumer OK: shared-cache-index %s\n", sci_version());
    return 0;
}
