/*
 * The C side of the Python package's cost bench (python/bench/overhead.py):
 * times `iterations` calls of sci_index_check_pages on handles the Python
 * package created, rotating over prompts the script prepared, so the
 * package's call and the bare C call are measured in one process, on the
 * same index, layout and prompts.
 *
 * The function is given the library's own sci_index_check_pages (its
 * address, read by ctypes from the library the package loaded), so this
 * module links nothing and can never bind to another copy of the library.
 * Loaded with ctypes.CDLL: the GIL is released for the whole loop, which is
 * what the thread-scaling half of the bench relies on.
 */
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <shared_cache_index.h>

typedef sci_status (*check_pages_fn)(sci_index *, const sci_layout *, const uint32_t *, size_t, uint32_t,
                                     uint8_t *, size_t, sci_page_result *);

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Calls check_pages `iterations` times, prompt i % n_prompts on call i, and
 * returns the elapsed nanoseconds; *total_hits sums the answers (so the
 * calls cannot be optimised away, and the caller can check them). A failed
 * call returns 0. `hits` holds hits_cap bytes, one buffer for the loop (as a
 * C router would reuse one). */
uint64_t sci_bench_check_pages(check_pages_fn check_pages, sci_index *index, const sci_layout *layout,
                               const uint32_t *const *prompts, const size_t *lengths, size_t n_prompts,
                               size_t iterations, uint32_t block_size, uint8_t *hits, size_t hits_cap,
                               uint64_t *total_hits) {
    sci_page_result result = SCI_PAGE_RESULT_INIT;
    uint64_t sum = 0;
    uint64_t start = now_ns();
    for (size_t i = 0; i < iterations; ++i) {
        size_t p = i % n_prompts;
        if (check_pages(index, layout, prompts[p], lengths[p], block_size, hits, hits_cap, &result) != SCI_OK) return 0;
        sum += result.total_hits;
    }
    uint64_t elapsed = now_ns() - start;
    *total_hits = sum;
    return elapsed;
}
