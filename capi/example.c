/*
 * A C caller of shared-cache-index: builds an index, feeds it a few batches
 * (one of them after a sequence gap), asks which object keys are present and
 * prints the counters. Compiled as strict C11; exits 0 when everything
 * behaved as documented, 1 otherwise.
 */
#include <stdio.h>
#include <string.h>

#include "shared_cache_index.h"

static sci_str str(const char *s) {
    sci_str out;
    out.ptr = s;
    out.len = strlen(s);
    return out;
}

static sci_event event(sci_event_kind kind, const char *key, const char *group) {
    sci_event e;
    memset(&e, 0, sizeof e);
    e.kind = kind;
    e.object_key = str(key);
    e.group_id = str(group);
    return e;
}

static void print_log(void *user, int32_t level, const char *msg, size_t len) {
    (void)user;
    printf("log[%d]: %.*s\n", (int)level, (int)len, msg);
}

static int check(sci_status status, const char *what) {
    if (status != SCI_OK) {
        fprintf(stderr, "%s failed (%d): %s\n", what, (int)status, sci_last_error());
        return 0;
    }
    return 1;
}

static int present(const sci_index *index, const char *key) {
    bool found = false;
    if (!check(sci_index_contains(index, str(""), str(key), &found), "sci_index_contains")) return -1;
    printf("  %-12s %s\n", key, found ? "present" : "absent");
    return found ? 1 : 0;
}

int main(void) {
    sci_index *index = NULL;
    sci_index_options options = SCI_INDEX_OPTIONS_INIT; /* struct_size set, the rest 0 = defaults */
    sci_event batch1[3], batch2[1], batch3[1];
    sci_stats stats = SCI_STATS_INIT;
    int ok = 1;

    if (sci_abi_version() != SCI_ABI_VERSION) {
        fprintf(stderr, "header ABI %u, library ABI %u\n", SCI_ABI_VERSION, sci_abi_version());
        return 1;
    }
    printf("shared-cache-index %s (ABI %u)\n", sci_version(), sci_abi_version());
    sci_set_log_callback(print_log, NULL);

    options.max_entries = 1000;
    if (!check(sci_index_new(&options, &index), "sci_index_new")) return 1;

    /* Batch 1: two objects of one page group, and one without a group. */
    batch1[0] = event(SCI_EVENT_STORED, "page-a_0_k", "sglang-hicache:page-a");
    batch1[1] = event(SCI_EVENT_STORED, "page-a_0_v", "sglang-hicache:page-a");
    batch1[2] = event(SCI_EVENT_STORED, "loose-key", "");
    ok &= check(sci_index_apply_events(index, 1, batch1, 3), "apply batch 1");
    /* Batch 2: a removal. */
    batch2[0] = event(SCI_EVENT_REMOVED, "loose-key", "");
    ok &= check(sci_index_apply_events(index, 2, batch2, 1), "apply batch 2");

    printf("after batches 1-2:\n");
    ok &= present(index, "page-a_0_k") == 1;
    ok &= present(index, "page-a_0_v") == 1;
    ok &= present(index, "loose-key") == 0;

    /* Batch 5: batches 3 and 4 were lost. The index cannot know what they
     * removed, so it forgets everything before applying batch 5. */
    batch3[0] = event(SCI_EVENT_STORED, "page-b_0_k", "sglang-hicache:page-b");
    ok &= check(sci_index_apply_events(index, 5, batch3, 1), "apply batch 5");

    printf("after a gap (batch 5 follows batch 2):\n");
    ok &= present(index, "page-a_0_k") == 0;
    ok &= present(index, "page-b_0_k") == 1;

    /* A bad argument is refused with a message, and changes nothing. */
    if (sci_index_apply_events(NULL, 6, batch3, 1) != SCI_ERR_INVALID_ARGUMENT) ok = 0;
    printf("bad argument: %s\n", sci_last_error());

    ok &= check(sci_index_stats(index, &stats), "sci_index_stats");
    printf("stats: keys=%llu groups=%llu batches_applied=%llu events_applied=%llu "
           "sequence_gaps=%llu clears=%llu last_sequence=%llu\n",
           (unsigned long long)stats.keys, (unsigned long long)stats.groups,
           (unsigned long long)stats.batches_applied, (unsigned long long)stats.events_applied,
           (unsigned long long)stats.sequence_gaps, (unsigned long long)stats.clears,
           (unsigned long long)stats.last_sequence);
    ok &= stats.keys == 1 && stats.sequence_gaps == 1 && stats.last_sequence == 5;

    sci_set_log_callback(NULL, NULL);
    sci_index_free(index);
    printf("%s\n", ok ? "c example: OK" : "c example: FAILED");
    return ok ? 0 : 1;
}
