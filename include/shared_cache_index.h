/*
 * shared_cache_index.h — which pages of a prompt are already in the shared
 * Mooncake KV-cache pool?
 *
 * The library keeps an exact index of the physical objects a Mooncake master
 * reports as stored / removed (object keys, scoped by tenant) and of the
 * logical groups (SGLang pages) those objects belong to. Its one promise:
 * every uncertainty (a lost message, a stale publisher, a full index) turns
 * into a miss, never into a false hit.
 *
 * Conventions, for every function below:
 *   - Functions returning sci_status return SCI_OK (0) on success. On failure
 *     sci_last_error() describes what went wrong on the calling thread, and
 *     nothing was changed, with one exception: when memory runs out in the
 *     middle of applying a batch (SCI_ERR_NO_MEMORY from
 *     sci_index_apply_events / sci_index_apply_message), the index is
 *     cleared, since it cannot vouch for a half-applied batch.
 *   - Strings are sci_str (pointer + length, not NUL-terminated); `ptr` may be
 *     NULL only when `len` is 0. The library never keeps a caller's pointer
 *     after a call returns: it copies what it needs.
 *   - Every options / stats / result struct starts with `struct_size`, which
 *     the caller sets to sizeof(the struct) as compiled. The library reads or
 *     writes only that many bytes, so callers built against an older header
 *     keep working when fields are appended. Each has an initialiser macro
 *     that sets struct_size and zeroes the rest (zero means "default"):
 *         sci_index_options opts = SCI_INDEX_OPTIONS_INIT;
 *   - Every function may be called concurrently from any number of threads,
 *     except *_free and *_stop, which must not race with other uses of the
 *     same handle.
 *   - No C++ exception and no abort() ever crosses this boundary.
 *
 * ABI contract: docs/c-api.md in the source tree (version SCI_ABI_VERSION).
 */
#ifndef SHARED_CACHE_INDEX_H
#define SHARED_CACHE_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Versions and errors                                                      */
/* ------------------------------------------------------------------------ */

/* Bumped only on an incompatible change to this header. */
#define SCI_ABI_VERSION 1u

/* SCI_ABI_VERSION of the library actually loaded; compare it with the
 * macro to detect a header / library mismatch. */
uint32_t sci_abi_version(void);

/* Library version as "MAJOR.MINOR.PATCH". Static storage: never free it. */
const char *sci_version(void);

typedef int32_t sci_status;
#define SCI_OK 0
#define SCI_ERR_INVALID_ARGUMENT 1 /* NULL / too-small struct_size / bad value */
#define SCI_ERR_DECODE 2           /* malformed wire message (nothing applied) */
#define SCI_ERR_IO 3               /* socket or thread could not be set up */
#define SCI_ERR_NO_MEMORY 4        /* allocation failed (mid-batch: the index is cleared) */
#define SCI_ERR_BUFFER_TOO_SMALL 5 /* an output buffer cannot hold the answer */
#define SCI_ERR_INTERNAL 6         /* a bug: please report the message */

/* Message of the last call on this thread that did not return SCI_OK, or ""
 * if none has failed yet. Valid until the next failing call on this thread;
 * never NULL, never free it. */
const char *sci_last_error(void);

/* Byte strings crossing the boundary. */
typedef struct sci_str {
    const char *ptr;
    size_t len;
} sci_str;

typedef struct sci_bytes {
    const uint8_t *ptr;
    size_t len;
} sci_bytes;

/* The value of a struct with a leading struct_size: struct_size set to the
 * size this caller was compiled with, every other field zero. Used by the
 * SCI_*_INIT macros below; valid C (a designated initialiser) and C++ (an
 * expression, so it also works where C++ wants one). */
#ifdef __cplusplus
#define SCI_STRUCT_INIT_(type) \
    ([] { type sci_init_{}; sci_init_.struct_size = sizeof(type); return sci_init_; }())
#else
#define SCI_STRUCT_INIT_(type) {.struct_size = sizeof(type)}
#endif

/* ------------------------------------------------------------------------ */
/* The index                                                                */
/* ------------------------------------------------------------------------ */

typedef struct sci_index sci_index;

typedef struct sci_index_options {
    uint32_t struct_size;
    /* Most entries (present keys + groups) held at once; 0 = default
     * (33554432). Beyond it new keys and groups are refused and counted
     * (capacity_refusals); the index keeps serving and never wipes itself. */
    uint64_t max_entries;
} sci_index_options;
#define SCI_INDEX_OPTIONS_INIT SCI_STRUCT_INIT_(sci_index_options)

/* Creates an empty index. `opts` may be NULL for defaults. On success *out
 * owns a new index that the caller releases with sci_index_free. */
sci_status sci_index_new(const sci_index_options *opts, sci_index **out);

/* Releases an index. NULL is a no-op. No other call may use `index`
 * concurrently, and no subscriber may still be feeding it. */
void sci_index_free(sci_index *index);

/* Forgets every key, group and the sequence cursor (the next batch is
 * accepted at any sequence). Counts one clear. NULL is a no-op. */
void sci_index_clear(sci_index *index);

typedef int32_t sci_event_kind;
#define SCI_EVENT_STORED 1      /* object_key is now stored */
#define SCI_EVENT_REMOVED 2     /* object_key is gone (on whatever medium) */
#define SCI_EVENT_ALL_CLEARED 3 /* every object is gone */

typedef struct sci_event {
    sci_event_kind kind;  /* any other value is ignored and counted */
    sci_str object_key;   /* empty: the event is ignored and counted */
    sci_str group_id;     /* empty = none */
    sci_str tenant_id;    /* empty = "default" */
    sci_str medium;       /* may be empty; informational */
} sci_event;

/* Applies one batch of events published under `sequence`, in order:
 *   - the first batch (or the first after a clear) is accepted at any
 *     sequence, including 0;
 *   - `sequence` equal to the last one applied: a duplicate, ignored;
 *   - any other sequence than last + 1 (a gap, or a publisher restart):
 *     everything is cleared first, then the batch is applied.
 * A stored event with a group id invalidates that group's verification; a
 * removal with a group id forgets the group; a removal without one drops the
 * verification of every group, and so does a removal whose group id is not
 * the one of the removed key's own SGLang page ("sglang-hicache:" + the
 * key's prefix + the 64-hex page hash in the key): a mislabelled removal
 * must not leave the key's real page verified. Returns SCI_ERR_INVALID_ARGUMENT (nothing
 * applied) when `index` is NULL or `events` is NULL with n_events > 0, or a
 * string has a NULL pointer with a non-zero length. SCI_ERR_NO_MEMORY when
 * memory runs out mid-batch: the index is then cleared, since it cannot
 * vouch for a half-applied batch. Concurrent calls are serialised; queries
 * go on meanwhile and see each event either wholly applied or not at all. */
sci_status sci_index_apply_events(sci_index *index, uint64_t sequence,
                                  const sci_event *events, size_t n_events);

/* Decodes one ZeroMQ multipart message (`n_frames` frames) in any supported
 * wire format (Mooncake production map events, Mooncake v1 arrays, engine
 * worker events) and applies it as one batch. A malformed message returns
 * SCI_ERR_DECODE, is counted in malformed_messages and changes nothing: no
 * key, no group, no sequence cursor. A Mooncake event of an unknown type
 * is not malformed: it is counted in ignored_events and, if it names an
 * object key, that key is dropped (its state is unknown: a miss, never a
 * stale hit). Returns SCI_ERR_INVALID_ARGUMENT (not counted) when `index`
 * is NULL, `frames` is NULL with n_frames > 0, or a frame has a NULL
 * pointer with a non-zero length; an empty frame may have a NULL pointer. */
sci_status sci_index_apply_message(sci_index *index, const sci_bytes *frames,
                                   size_t n_frames);

/* Sets *present to whether `object_key` is stored for `tenant_id` (empty =
 * "default"). */
sci_status sci_index_contains(const sci_index *index, sci_str tenant_id,
                              sci_str object_key, bool *present);

/* ------------------------------------------------------------------------ */
/* SGLang HiCache layouts and the page query (the router's hot path)        */
/* ------------------------------------------------------------------------ */

typedef struct sci_layout sci_layout;

typedef int32_t sci_hit_policy;
#define SCI_HIT_ALL_PAGES 0      /* the pool covers every page */
#define SCI_HIT_TRAILING_PAGES 1 /* only the last `trailing_pages` pages */

/* An advertised object pool: page keys are "<logical><suffix>" for each
 * suffix, in order, on the pages the pool covers. */
typedef struct sci_pool {
    const sci_str *suffixes;
    size_t n_suffixes;
    sci_hit_policy hit_policy;
    uint32_t trailing_pages;
} sci_pool;

/* How one model's SGLang workers name their pages (the runtime config they
 * publish). Fields as in docs/sglang-hicache.md; empty strings mean unset. */
typedef struct sci_layout_spec {
    uint32_t struct_size;
    uint32_t page_size;   /* tokens per page; must be > 0 */
    uint32_t tp_size;     /* 0 behaves as 1 */
    uint32_t pp_size;     /* 0 behaves as 1 */
    uint32_t tp_lcm_size; /* 0 = unset */
    bool is_mla_model;
    bool is_eagle;
    bool should_split_heads;
    sci_str extra_backend_tag;
    sci_str key_prefix;
    sci_str tenant_id; /* tenant the pages are stored under; empty = "default" */
    const sci_pool *pools; /* NULL / 0 = no advertised pools */
    size_t n_pools;
} sci_layout_spec;
#define SCI_LAYOUT_SPEC_INIT SCI_STRUCT_INIT_(sci_layout_spec)

/* Validates `spec` and builds an immutable layout (it copies everything it
 * needs; `spec` may be freed afterwards). The layout may be shared by any
 * number of threads and indexes; release it with sci_layout_free.
 * SCI_ERR_INVALID_ARGUMENT, naming the field, when `spec` or `out` is NULL,
 * spec->struct_size is too small, page_size is 0, tp_size / pp_size /
 * tp_lcm_size exceed 1024, a page would need more than 4096 keys, a pool has
 * no suffix or an empty one, a hit_policy is unknown, a pointer is NULL with
 * a non-zero count, or a key would exceed 1024 bytes. Layouts deriving the
 * same keys share the groups they verify; layouts deriving different keys
 * never trust each other's verifications. */
sci_status sci_layout_new(const sci_layout_spec *spec, sci_layout **out);

/* Releases a layout. NULL is a no-op. */
void sci_layout_free(sci_layout *layout);

typedef struct sci_page_result {
    uint32_t struct_size;
    size_t n_pages;     /* whole pages in the request */
    size_t total_hits;  /* pages fully present */
    size_t prefix_hits; /* leading run of hit pages */
    size_t fast_path;   /* pages answered by an already-verified group */
} sci_page_result;
#define SCI_PAGE_RESULT_INIT SCI_STRUCT_INIT_(sci_page_result)

/* The router's query: for each whole page of `tokens` (u32 token ids),
 * hits[i] = 1 when every physical object of page i is present, else 0.
 * `hits` may be NULL only when hits_cap is 0 and the request has no whole
 * page; hits_cap >= n_tokens / page_size always suffices, a smaller one
 * returns SCI_ERR_BUFFER_TOO_SMALL. A `block_size` other than the layout's
 * page size answers SCI_OK with zero pages (n_pages 0, nothing written to
 * `hits`) and is counted in `queries` only. `index` is not const: a query
 * records verified groups so later queries take the fast path.
 * SCI_ERR_INVALID_ARGUMENT when `index`, `layout` or `result` is NULL,
 * result->struct_size is too small, or `tokens` is NULL with n_tokens > 0.
 * On any error neither `hits` nor `result` is written. Once warm, a call
 * allocates no memory. */
sci_status sci_index_check_pages(sci_index *index, const sci_layout *layout,
                                 const uint32_t *tokens, size_t n_tokens,
                                 uint32_t block_size, uint8_t *hits,
                                 size_t hits_cap, sci_page_result *result);

/* The router's prefix query (1.1): *prefix_pages = the leading run of pages
 * of `tokens` that are fully present, stopping at the first page that is not.
 * Pages after it are neither hashed nor looked up, so a prompt whose first
 * page is absent costs one page hash and one lookup, however long it is
 * (SGLang loads only a contiguous prefix, so that is all the router credits).
 * The same answer as sci_index_check_pages' prefix_hits. A `block_size` other
 * than the layout's page size answers SCI_OK with 0. Counted as one query of
 * the pages it examined (the run, plus the miss that ended it).
 * SCI_ERR_INVALID_ARGUMENT when `index`, `layout` or `prefix_pages` is NULL,
 * or `tokens` is NULL with n_tokens > 0; then *prefix_pages is not written.
 * Once warm, a call allocates no memory. */
sci_status sci_index_check_prefix(sci_index *index, const sci_layout *layout,
                                  const uint32_t *tokens, size_t n_tokens,
                                  uint32_t block_size, size_t *prefix_pages);

/* The same query for a caller that already holds the request's page hashes
 * (as SGLang computes them: 64 lowercase hex characters each, in page
 * order), so nothing is hashed again. n_pages = `n_page_hashes`; `hits` needs
 * that many bytes (SCI_ERR_BUFFER_TOO_SMALL otherwise). A hash that is not
 * 64 lowercase hex characters, or a NULL `page_hashes` with a non-zero count,
 * returns SCI_ERR_INVALID_ARGUMENT naming it, and nothing is checked. */
sci_status sci_index_check_page_hashes(sci_index *index, const sci_layout *layout,
                                       const sci_str *page_hashes, size_t n_page_hashes,
                                       uint8_t *hits, size_t hits_cap,
                                       sci_page_result *result);

/* ------------------------------------------------------------------------ */
/* Live subscription                                                        */
/* ------------------------------------------------------------------------ */

typedef struct sci_subscriber sci_subscriber;

typedef struct sci_subscriber_options {
    uint32_t struct_size;
    sci_str endpoint;          /* publisher endpoint, e.g. "tcp://127.0.0.1:5557" */
    sci_str topic;             /* subscription prefix; empty = every topic */
    uint32_t reconnect_ms;     /* first reconnect interval; 0 = 100 ms */
    uint32_t reconnect_max_ms; /* reconnect back-off ceiling; 0 = 5000 ms */
    uint32_t stale_after_ms;   /* disconnected longer => cleared, answers miss; 0 = 10000 ms */
} sci_subscriber_options;
#define SCI_SUBSCRIBER_OPTIONS_INIT SCI_STRUCT_INIT_(sci_subscriber_options)

/* Starts a background thread that connects a ZeroMQ SUB socket to
 * `endpoint` (tcp:// or ipc://) and applies every message it receives to
 * `index`, in arrival order, as sci_index_apply_message would. On success
 * *out owns the subscriber; release it with sci_subscriber_stop. The index
 * must outlive the subscriber (stop it before freeing the index).
 *
 * Errors: SCI_ERR_INVALID_ARGUMENT for a NULL index / opts / out, a
 * struct_size too small for stale_after_ms, an empty endpoint, one with a
 * NUL byte or one ZeroMQ rejects ("bogus://x"), an interval above INT32_MAX,
 * an index that already has a subscriber (see below);
 * SCI_ERR_IO when the socket or thread cannot be created. An unreachable
 * tcp endpoint is not an error: ZeroMQ keeps reconnecting, and
 * subscriber_connected in sci_stats says whether it is connected.
 *
 * Staleness. The index is trusted while connected and after a message on
 * the current connection has shown (through the sequence rule) that nothing
 * was lost. A disconnect, and the start itself, open a doubt: the index keeps
 * answering from what it has, and if no message settles the doubt within
 * stale_after_ms it is cleared (it then answers miss) and the clear is
 * logged. So a short reconnect whose next batch is last + 1 keeps the state;
 * a reconnect followed by silence longer than the grace clears it, as does
 * a long disconnect. After such a clear the next batch is accepted at any
 * sequence. A silently dead peer is detected by ZMTP heartbeats.
 *
 * One subscriber per index: the index has a single sequence cursor, so a
 * second subscriber to the same publisher would only add duplicates, and
 * one to another publisher would make every batch look like a gap (constant
 * clears). A second start on an index whose subscriber is not stopped is
 * therefore refused; after sci_subscriber_stop the index takes a new one.
 * Log lines (connects, disconnects, stale clears, malformed messages) come
 * from the subscriber's thread through sci_set_log_callback. */
sci_status sci_subscriber_start(sci_index *index,
                                const sci_subscriber_options *opts,
                                sci_subscriber **out);

/* Stops the thread, closes the socket (dropping anything still queued) and
 * frees the subscriber. Returns promptly even when the publisher is silent
 * or gone. The index keeps its contents but no longer follows the publisher;
 * subscriber_connected drops to false. NULL is a no-op.
 *
 * It may be called from the log callback, on the subscriber's own thread
 * too: `sub` is consumed and must not be used again whichever thread calls
 * it. On its own thread it cannot wait for that thread, so it returns at
 * once; after the callback returns, the thread finishes the step it was in
 * (at most the message being applied, then subscriber_connected drops to
 * false), receives nothing more and frees itself. The index may be freed
 * right after this call even then: the library keeps what the exiting
 * thread still touches alive until it is gone. */
void sci_subscriber_stop(sci_subscriber *sub);

/* ------------------------------------------------------------------------ */
/* Counters                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct sci_stats {
    uint32_t struct_size;
    uint64_t keys;               /* gauge: object keys present */
    uint64_t groups;             /* gauge: groups (pages) known */
    uint64_t verified_groups;    /* gauge: groups whose pages answer with one lookup */
    uint64_t batches_applied;    /* batches applied (duplicates excluded) */
    uint64_t events_applied;     /* stored / removed / all-cleared events applied */
    uint64_t duplicate_batches;  /* batches ignored: same sequence as the last one */
    uint64_t sequence_gaps;      /* gaps or regressions; each cleared the index */
    uint64_t clears;             /* index emptied: gap, all-cleared, stale, sci_index_clear, OOM */
    uint64_t malformed_messages; /* messages dropped as malformed (nothing applied) */
    uint64_t ignored_events;     /* no object key, or a type the object index does not use */
    uint64_t capacity_refusals;  /* keys / groups not stored because the index was full */
    uint64_t last_sequence;      /* sequence of the last batch; valid when has_sequence */
    bool has_sequence;           /* false on a new or just-cleared index */
    bool subscriber_connected;   /* gauge: the subscriber's connection is up */
    uint64_t subscriber_connects;    /* connections established */
    uint64_t subscriber_disconnects; /* connections lost */
    uint64_t messages_received;  /* multipart messages received by the subscriber */
    uint64_t queries;            /* page queries (a block-size mismatch counts here only) */
    uint64_t pages_checked;      /* pages examined by page queries */
    uint64_t page_hits;          /* pages found fully present */
    uint64_t fast_path_hits;     /* page hits answered by a verified group */
} sci_stats;
#define SCI_STATS_INIT SCI_STRUCT_INIT_(sci_stats)

/* Fills `stats` with a snapshot of the counters. Each counter is read
 * atomically; the set is not one atomic snapshot. Never blocks writers. */
sci_status sci_index_stats(const sci_index *index, sci_stats *stats);

/* Renders the counters of sci_stats in the Prometheus text exposition format
 * (0.0.4): HELP, TYPE and one sample per counter, named "sci_<counter>" with
 * "_total" on monotonic counters (e.g. sci_sequence_gaps_total, sci_keys).
 * `labels` is added to every sample: empty, or a label list body such as
 * `pool="mooncake-a",model="llama"` (invalid syntax: SCI_ERR_INVALID_ARGUMENT).
 * Writes the text and a terminating NUL into `buf` (`buf_cap` bytes) and its
 * length, without the NUL, into *written. When `buf_cap` is too small nothing
 * is written to `buf`, *written receives the length needed (without the NUL)
 * and SCI_ERR_BUFFER_TOO_SMALL is returned; `buf` may be NULL with a
 * `buf_cap` of 0 to ask for the size. */
sci_status sci_stats_format_prometheus(const sci_index *index, sci_str labels,
                                       char *buf, size_t buf_cap, size_t *written);

/* ------------------------------------------------------------------------ */
/* Logging                                                                  */
/* ------------------------------------------------------------------------ */

#define SCI_LOG_DEBUG 0
#define SCI_LOG_INFO 1
#define SCI_LOG_WARN 2
#define SCI_LOG_ERROR 3

/* Receives one log line (`msg`, `len` bytes, NUL-terminated as well) at
 * `level`. May be called from any thread, including the subscriber's, and
 * from several at once. It may call any function of the library, including
 * sci_subscriber_stop (of any subscriber, its own included) and
 * sci_set_log_callback (which then takes effect once this callback has
 * returned). It must not free a handle that the library call it was
 * logged from is using (the index of the sci_index_apply_message that
 * logged, for instance), except that a subscriber's own lines may stop it
 * and then free its index. */
typedef void (*sci_log_fn)(void *user, int32_t level, const char *msg, size_t len);

/* Routes the library's log lines to `fn` (process-wide). The library prints
 * nothing by itself; NULL silences it (the default). Once this returns, the
 * previous callback is running on no thread and is never called again, so
 * its `user` may be freed. Called from inside a callback, it takes effect
 * when that callback returns instead (the last such call wins). */
void sci_set_log_callback(sci_log_fn fn, void *user);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SHARED_CACHE_INDEX_H */
