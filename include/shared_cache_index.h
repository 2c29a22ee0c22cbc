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
 *     same handle; also from the log callback, and while the calling thread
 *     exits (from the destructor of a thread_local or of a pthread key).
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
 * if none has failed yet (or the call failed while the thread was exiting,
 * after the library's per-thread state was freed). Valid until the next
 * failing call on this thread; never NULL, never free it. */
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
    /* Most object keys present at once; 0 = default (33554432). Beyond it
     * new keys are refused and counted (capacity_refusals); the index keeps
     * serving and never wipes itself. (1.0-1.3 counted keys + groups.) */
    uint64_t max_entries;
    /* ---- 1.2 (read only when struct_size covers them) ---- */
    /* When a key stops being present: SCI_RESIDENCY_OBJECT (0, the default)
     * or SCI_RESIDENCY_PER_MEDIUM. Any other value: SCI_ERR_INVALID_ARGUMENT. */
    uint32_t residency;
    /* ---- 1.3 (read only when struct_size covers them) ---- */
    /* Storage tiers for sci_index_check_tiers: "cpu=0,disk=1" (the default,
     * also when empty): medium name = tier, fastest tier 0, at most
     * SCI_TIERS_MAX tiers, every tier from 0 to the slowest named, at most 8
     * media. A medium not named, and a key whose media are unknown (loaded
     * from a snapshot, stored with no medium, or any key under
     * SCI_RESIDENCY_OBJECT, which keeps no media), count at the slowest tier.
     * Anything else: SCI_ERR_INVALID_ARGUMENT naming the item. */
    sci_str medium_tiers;
} sci_index_options;
/* Any `removed` drops the key, whatever its medium. Exact for masters that
 * announce a removal once no replica is left (Mooncake main, the first
 * generation); for a per-medium master it can only cost hits (a key evicted
 * from memory but kept on disk reads absent). Safe on both: the default. */
#define SCI_RESIDENCY_OBJECT 0
/* A key is present while some medium holds it: `stored` adds its medium,
 * `removed` takes that medium away (medium names compared as bytes, up to 8
 * per index; a key stored with an empty medium, or loaded from a snapshot,
 * has unknown media and any removal drops it). Exact for per-medium masters
 * (the second generation). Since 1.3 also safe on a first-generation master,
 * whose removal means "no replica left" whatever medium it names: each
 * decoded event shows its generation (the event map's dp_rank: nil on
 * Mooncake main, an integer on the conductor line), and a first-generation
 * removal drops the whole key, counted in residency_mismatches and warned
 * of once. Events given through sci_index_apply_events are taken as the
 * caller's rule says. Not the default (1.x keeps its meaning). */
#define SCI_RESIDENCY_PER_MEDIUM 1
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

/* 1.3.0. For a caller that feeds sci_index_apply_message from its own
 * socket: that socket lost its connection (and may have reconnected). A
 * publisher that restarted meanwhile can resume at the cursor + 1, so the
 * next batch with events that continues the sequence must show the same
 * publisher: its first event id continues the last one applied; a batch
 * without event ids, or after one, cannot show it. Otherwise the index is
 * cleared (restarts_suspected) and that batch begins a run. (The ids of
 * every batch that continues the sequence are checked in any case; this
 * adds the batches that carry none.) A restart whose sequence and event
 * ids both continue is invisible on the wire: a caller who cannot rule one
 * out should clear instead (sci_index_clear), as the library's own
 * subscriber does by default (reconnect_policy). NULL is a no-op. */
void sci_index_note_reconnect(sci_index *index);

typedef int32_t sci_event_kind;
#define SCI_EVENT_STORED 1      /* object_key is now stored */
#define SCI_EVENT_REMOVED 2     /* object_key is gone (on whatever medium) */
#define SCI_EVENT_ALL_CLEARED 3 /* every object is gone */
#define SCI_EVENT_TENANT_CLEARED 4 /* 1.2: every object of tenant_id is gone (other tenants stay) */

typedef struct sci_event {
    sci_event_kind kind;  /* any other value is ignored and counted */
    sci_str object_key;   /* empty: the event is ignored and counted */
    sci_str group_id;     /* empty = none */
    sci_str tenant_id;    /* empty = "default" */
    sci_str medium;       /* may be empty; read under SCI_RESIDENCY_PER_MEDIUM only */
} sci_event;

/* Applies one batch of events published under `sequence`, in order:
 *   - the first batch (or the first after a clear) is accepted at any
 *     sequence, including 0;
 *   - `sequence` equal to the last one applied: a duplicate, ignored;
 *   - any other sequence than last + 1 (a gap, or a publisher restart):
 *     everything is cleared first, then the batch is applied.
 * Each present key remembers the group it was stored under (the group id of
 * its latest stored event, or none). A stored event invalidates the
 * verification of the group it names and of the group the key leaves; a
 * removal invalidates the group its key was stored under and the group it
 * names, nothing else; a group is forgotten with its last key. A page query
 * marks a group verified only when every key of the page is stored under
 * it, so no removal can leave a verified page with a key gone
 * (docs/index-semantics.md). Returns SCI_ERR_INVALID_ARGUMENT (nothing
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
 * pointer with a non-zero length; an empty frame may have a NULL pointer.
 * Sequence rules as for sci_index_apply_events, with one addition for the
 * Mooncake production format, whose publisher signals a loss one batch
 * early (docs/index-semantics.md): the batch that begins a run (it reveals
 * a gap or a restart, or is the first after a clear or on a new index),
 * unless its sequence is 1, applies only its removals and all-cleared
 * events; its stored events are withheld and counted in stores_withheld.
 * Mooncake v1 and engine messages keep the plain rules. */
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
    size_t prefix_hits; /* the usable prefix: the leading run of hit pages (SGLang); on a vLLM
                           layout sci_index_check_prefix's answer (Dynamo's), which may differ
                           from the leading run of hits[] (hybrid and window-only layouts) */
    size_t fast_path;   /* SGLang: page hits answered by one page entry each -- since 1.4 every
                           hit (1.3: by an already-verified group); vLLM: 0 */
    /* ---- 1.4 (written only when struct_size covers it) ---- */
    size_t prefix_tokens; /* the leading prompt tokens the engine will load from the pool:
                             SGLang prefix_hits * page_size (at most the whole pages before
                             the prompt's last token); vLLM the usable prefix at the
                             layout's own granularity (see "Credit in tokens" below), so
                             >= prefix_hits * block_size */
} sci_page_result;
#define SCI_PAGE_RESULT_INIT SCI_STRUCT_INIT_(sci_page_result)

/* The router's query: for each whole page of `tokens` (u32 token ids),
 * hits[i] = 1 when every physical object of page i is present, else 0.
 * `hits` may be NULL only when hits_cap is 0 and the request has no whole
 * page; hits_cap >= n_tokens / page_size always suffices, a smaller one
 * returns SCI_ERR_BUFFER_TOO_SMALL. A `block_size` other than the layout's
 * page size answers SCI_OK with zero pages (n_pages 0, nothing written to
 * `hits`) and is counted in `queries` only. `index` is not const: a query
 * records verified groups so later queries take the fast path (a page whose
 * keys are all stored under its group; a page with a key stored under no
 * group or another one is answered by its keys every time).
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
 * No page after it is looked up (the next one may be hashed, while the
 * page before is fetched), and a prompt whose first page is absent costs
 * one page hash and one lookup, however long it is
 * (SGLang loads only a contiguous prefix, so that is all the router credits).
 * The same answer as sci_index_check_pages' prefix_hits (both families). A `block_size` other
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
/* 1.2: layouts from the JSON a worker publishes, and the vLLM family       */
/* ------------------------------------------------------------------------ */

/* Builds a layout from the runtime config a worker publishes, as given:
 *   - vLLM's MooncakeStoreConnector descriptor (the `vllm_mooncake_store`
 *     object Dynamo's worker extension publishes, bare or wrapped as
 *     {"vllm_mooncake_store": {...}}; docs/vllm-family.md), or
 *   - SGLang's HiCache runtime config ({"page_size": 64, "tp_size": 8, ...},
 *     the fields of sci_layout_spec; docs/sglang-hicache.md).
 * Unknown fields are ignored (newer configs stay readable); since 1.3 each
 * is named in one warning through the log callback, with the known field
 * it most likely meant ("did you mean ...?").
 * SCI_ERR_INVALID_ARGUMENT, naming the field by its JSON path
 * ("groups[1].kind: ..."), for text that is not a JSON object, a required
 * field missing, a field of the wrong type, or a value the library cannot
 * honour; then *out is NULL. Release the layout with sci_layout_free. */
sci_status sci_layout_new_json(sci_str json, sci_layout **out);

typedef int32_t sci_layout_family;
#define SCI_LAYOUT_SGLANG 0 /* SGLang HiCache pages */
#define SCI_LAYOUT_VLLM 1   /* vLLM MooncakeStoreConnector chunks */

/* The family of `layout` (SCI_LAYOUT_SGLANG for NULL), and the block size a
 * router must query it with: SGLang's page_size, vLLM's
 * main_event_block_size (0 for NULL). */
sci_layout_family sci_layout_get_family(const sci_layout *layout);
uint32_t sci_layout_block_size(const sci_layout *layout);

/* On a vLLM layout the queries above keep their meaning, with the family's
 * rules (docs/vllm-family.md, "Chunks, groups and the answer"); `block_size` must be the
 * descriptor's main_event_block_size (otherwise 0 pages, as for SGLang):
 *   - sci_index_check_pages: hits[i] = 1 when router block i (tokens
 *     [i*b, (i+1)*b)) lies, for every full-attention group, in chunks that
 *     are wholly inside the request and have every object present; a layout
 *     with no full-attention group has no block hit. fast_path is 0.
 *   - sci_index_check_prefix: Dynamo's answer, in blocks: the longest
 *     prefix L, a multiple of the layout's alignment (lcm of the block
 *     sizes), that never includes the request's last token and at which
 *     every group holds (full attention: every chunk ending at or before L;
 *     sliding window: the last ceil((window - 1) / block_size) of them;
 *     Mamba: the chunk ending exactly at L).
 *   - sci_index_check_page_hashes answers SCI_ERR_INVALID_ARGUMENT: use
 *     sci_index_check_block_hashes.
 * No vLLM answer trusts an event's group_id. */

/* What a request adds to its block hashes beyond its tokens (vLLM's extra
 * keys): a LoRA adapter's name on every block, a cache salt on the first.
 * A NULL ptr means none; {"", 0} with a non-NULL ptr is the empty string. */
typedef struct sci_request_extras {
    uint32_t struct_size;
    sci_str lora_name;
    sci_str cache_salt;
} sci_request_extras;
#define SCI_REQUEST_EXTRAS_INIT SCI_STRUCT_INIT_(sci_request_extras)

/* sci_index_check_pages and sci_index_check_prefix for a request with
 * extras (NULL `extras`: none). On an SGLang layout, whose page hashes
 * carry no extras, a request with any answers no hit. */
sci_status sci_index_check_pages_with_extras(sci_index *index, const sci_layout *layout,
                                             const uint32_t *tokens, size_t n_tokens,
                                             uint32_t block_size,
                                             const sci_request_extras *extras,
                                             uint8_t *hits, size_t hits_cap,
                                             sci_page_result *result);
sci_status sci_index_check_prefix_with_extras(sci_index *index, const sci_layout *layout,
                                              const uint32_t *tokens, size_t n_tokens,
                                              uint32_t block_size,
                                              const sci_request_extras *extras,
                                              size_t *prefix_pages);

/* A vLLM request by the block hashes the caller already holds, one per
 * whole hash block (hash_block_size tokens) in order: either the full
 * 32-byte digests, or the engine's 64-bit event hashes (the digests' low
 * 64 bits, as vLLM's KV events carry them), which are resolved through the
 * digests of the keys the index holds (an event hash no present key's
 * digest has, or that two digests share, is a missing block). */
typedef struct sci_block_hashes {
    uint32_t struct_size;
    const uint8_t *digests;       /* n_hashes x 32 bytes; or NULL, then: */
    const uint64_t *event_hashes; /* n_hashes event hashes */
    size_t n_hashes;
    size_t n_tokens; /* the request's length; 0 = n_hashes x hash_block_size + 1 */
} sci_block_hashes;
#define SCI_BLOCK_HASHES_INIT SCI_STRUCT_INIT_(sci_block_hashes)

/* *prefix_blocks = Dynamo's answer (as sci_index_check_prefix) for the
 * request `hashes` describes. SCI_ERR_INVALID_ARGUMENT when a handle or
 * pointer is NULL, both or neither of digests / event_hashes is set with
 * n_hashes > 0, n_tokens is shorter than the hashes, or `layout` is an
 * SGLang layout (use sci_index_check_page_hashes); then *prefix_blocks is
 * not written. Counted as one query of the chunks it looked up. */
sci_status sci_index_check_block_hashes(sci_index *index, const sci_layout *layout,
                                        const sci_block_hashes *hashes,
                                        uint32_t block_size, size_t *prefix_blocks);

/* ------------------------------------------------------------------------ */
/* 1.3: answers per storage tier                                            */
/* ------------------------------------------------------------------------ */

#define SCI_TIERS_MAX 4
#define SCI_TIER_ABSENT 0xFF

typedef struct sci_tier_result {
    uint32_t struct_size;
    uint32_t n_tiers;                    /* tiers in the index's map (sci_index_options.medium_tiers) */
    size_t n_pages;                      /* as sci_page_result.n_pages */
    size_t prefix_pages[SCI_TIERS_MAX];  /* L[t]: the longest prefix fully present at tier <= t;
                                            L[n_tiers - 1] = sci_index_check_prefix's answer;
                                            entries from n_tiers on are 0 */
    size_t pages_at[SCI_TIERS_MAX];      /* how many pages have their best tier = t */
    /* ---- 1.4 (written only when struct_size covers it) ---- */
    size_t prefix_tokens[SCI_TIERS_MAX]; /* sci_page_result.prefix_tokens, loadable from tier <= t;
                                            entries from n_tiers on are 0 */
} sci_tier_result;
#define SCI_TIER_RESULT_INIT SCI_STRUCT_INIT_(sci_tier_result)

/* Which tier each page of a request is in, and the usable prefix per tier,
 * in one call. page_tier[i] = the best tier at which page (or vLLM router
 * block) i is fully present, SCI_TIER_ABSENT if it is not: a page is at tier
 * t when every object it needs has a replica on a medium of tier <= t,
 * read at one instant like its presence (a writer moving an object between
 * media never makes a page look faster than it was at some instant).
 *   - SGLang: pages as sci_index_check_pages; prefix_pages[t] is the
 *     leading run of pages at tier <= t. A page verified through its group
 *     reads the group's tier: the slowest of the keys stored under it,
 *     which are the page's own unless workers of another layout store more
 *     under the same group id (then slower, never faster).
 *   - vLLM: page_tier follows sci_index_check_pages' per-block meaning (the
 *     slowest full-attention chunk covering the block); prefix_pages[t] is
 *     Dynamo's answer (aligned, the last token never credited) with
 *     "present" read as "present at tier <= t".
 * So prefix_pages never decreases with t, and at the slowest tier it is
 * the plain answer. Under SCI_RESIDENCY_OBJECT every present page is at the
 * slowest tier. The same argument rules as sci_index_check_pages
 * (`page_tier_cap` for `hits_cap`; a `block_size` other than the layout's
 * answers zero pages, n_tiers still set); `extras` may be NULL
 * (sci_request_extras; on an SGLang layout a request with extras has no
 * hit). `result` needs struct_size covering pages_at. Counted as one
 * query. Once warm, a call allocates no memory. */
sci_status sci_index_check_tiers(sci_index *index, const sci_layout *layout,
                                 const uint32_t *tokens, size_t n_tokens, uint32_t block_size,
                                 const sci_request_extras *extras,
                                 uint8_t *page_tier, size_t page_tier_cap,
                                 sci_tier_result *result);

/* ------------------------------------------------------------------------ */
/* 1.4: credit in tokens                                                    */
/* ------------------------------------------------------------------------ */

/* Since 1.4, sci_page_result.prefix_tokens and sci_tier_result.prefix_tokens
 * say how many leading prompt tokens the engine will load from the pool:
 *   - SGLang: prefix_hits * page_size, whole pages, at most those before
 *     the prompt's last token (SGLang computes it: a prompt of exactly k
 *     pages loads at most k - 1); sci_index_check_page_hashes, not told the
 *     prompt's length, counts as if it ended with its last page;
 *   - vLLM: with every KV-cache group full attention, the longest run of
 *     whole chunks of every group (a multiple of the lcm of their
 *     block_size) whose objects are all present, past the last whole router
 *     block if the pool holds it, never the prompt's last token; a layout
 *     with a sliding-window or Mamba group loads only at its alignment, so
 *     there it is prefix_hits * block_size. Always >= prefix_hits *
 *     block_size (docs/vllm-family.md, "Credit in tokens"). */

/* The prefix query (sci_index_check_prefix_with_extras) answering in pages
 * and in tokens at once, for a router that credits tokens but, unlike
 * sci_index_check_pages, wants the walk that stops at the first missing
 * page. Either output pointer may be NULL (not written), not both;
 * `extras` may be NULL. SCI_ERR_INVALID_ARGUMENT as for
 * sci_index_check_prefix, and then neither output is written. */
sci_status sci_index_check_prefix_tokens(sci_index *index, const sci_layout *layout,
                                         const uint32_t *tokens, size_t n_tokens,
                                         uint32_t block_size,
                                         const sci_request_extras *extras,
                                         size_t *prefix_pages, size_t *prefix_tokens);

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

    /* ---- 1.1: resync and HA following (read only when struct_size covers them) ---- */
    /* Snapshot of the master's keys, e.g. "http://mooncake-master:9003/get_all_keys"
     * (http:// or https://). Empty = no resync: after a clear the index
     * refills only from new stored events (1.0). Set: every start and every
     * clear refills the index from it (see "Resync" below). */
    sci_str snapshot_url;
    uint32_t resync_min_interval_ms; /* at most one snapshot download per interval; 0 = 5000 */
    uint32_t snapshot_timeout_ms;    /* one whole download, connection included; 0 = 60000 */
    /* etcd endpoints, "http://etcd-a:2379,http://etcd-b:2379". Empty =
     * connect to `endpoint` as given. Set: follow the Mooncake HA leader;
     * `endpoint` and `snapshot_url` must then be empty (they come from the
     * leader view). */
    sci_str etcd_endpoints;
    sci_str cluster_id;   /* etcd key "mooncake-store/<cluster_id>/master_view"; empty = "mooncake_cluster" */
    uint32_t event_port;  /* with etcd: the leader's event publisher port (required, 1..65535) */
    uint32_t admin_port;  /* with etcd: the leader's admin HTTP port; 0 = 9003 */

    /* ---- 1.2 (read only when struct_size covers it) ---- */
    sci_str redis_endpoint;   /* "redis://[:password@]host:port[/db]"; set (with `endpoint`,
                                 `snapshot_url` and `etcd_endpoints` empty): follow the Mooncake HA
                                 leader whose view is the Redis hash mooncake-store/{<cluster_id>}/master_view
                                 (fields leader_address, view_version), with cluster_id, event_port and
                                 admin_port as for etcd */

    /* ---- 1.3 (read only when struct_size covers them) ---- */
    sci_str status_url;       /* the master's GET /kv_events/status; empty = derived from snapshot_url
                                 (same scheme, host and port, path /kv_events/status), or from the
                                 leader's with HA following; ignored when neither is set. Read while
                                 connected and quiet: if the master has published more batches than
                                 the last sequence applied and nothing comes within a grace period
                                 (max(status_poll_ms, 250 ms)), the tail of the stream was lost: the
                                 index is cleared (tail_losses). Read again after each resync's
                                 snapshot: its catch-up ends at the first batch of fewer than 64
                                 events beyond published_batches + dropped_events + 1
                                 (resyncs_anchored). A master without the endpoint is followed as in
                                 1.2 (status_unavailable, one warning; the catch-up on its 100 ms
                                 timer, resyncs_timed) */
    uint32_t status_poll_ms;  /* how often a connected, quiet subscriber reads it; 0 = 1000 ms;
                                 UINT32_MAX = never (no tail watch, every catch-up timed) */

    /* ---- 1.3.0 (read only when struct_size covers them; older callers get the defaults) ---- */
    uint32_t reconnect_policy; /* what a real disconnect does (see "Reconnects" below):
                                  SCI_RECONNECT_RESYNC (0, the default): the index is cleared, the
                                  receive queue dropped (a new socket) and a resync started
                                  (disconnect_clears); SCI_RECONNECT_EVENT_IDS: 1.3's rule, the state is
                                  kept if the next batch continues the sequence and the event ids.
                                  Any other value: SCI_ERR_INVALID_ARGUMENT */
    uint32_t resync_catch_up_max_ms; /* a resync released before its catch-up is anchored defers stored
                                        events until the anchor, at most this long after it serves
                                        while batches flow (catch_ups_unanchored); 0 = 30000 */
} sci_subscriber_options;
#define SCI_RECONNECT_RESYNC 0
#define SCI_RECONNECT_EVENT_IDS 1
#define SCI_SUBSCRIBER_OPTIONS_INIT SCI_STRUCT_INIT_(sci_subscriber_options)

/* Starts a background thread that connects a ZeroMQ SUB socket to
 * `endpoint` (tcp:// or ipc://) and applies every message it receives to
 * `index`, in arrival order, as sci_index_apply_message would. On success
 * *out owns the subscriber; release it with sci_subscriber_stop. The index
 * must outlive the subscriber (stop it before freeing the index).
 *
 * Errors: SCI_ERR_INVALID_ARGUMENT for a NULL index / opts / out, a
 * struct_size too small for stale_after_ms, an endpoint that is not
 * tcp://host:port or ipc://path (the message says so: "127.0.0.1:5557",
 * "http://..."), one with a NUL byte or one ZeroMQ rejects, an interval above INT32_MAX,
 * an index that already has a subscriber (see below);
 * SCI_ERR_IO when the socket or thread cannot be created. An unreachable
 * tcp endpoint is not an error: ZeroMQ keeps reconnecting, and
 * subscriber_connected in sci_stats says whether it is connected.
 * A subscriber stuck -- not connected, no leader known, or a resync
 * waiting for a first message -- logs a warning once that has lasted
 * stale_after_ms, then again after twice as long each time (up to 64
 * times the grace), and an info line when it is over; a resync failure
 * is logged each time (its retries back off, see Resync).
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
 * Resync (1.1, with snapshot_url or etcd_endpoints). At start and after
 * every clear (a gap, a publisher restart, a stale clear, an all-cleared
 * event, sci_index_clear) the subscriber waits for a message on the
 * connection (it proves the subscription live; the batch that made the clear
 * counts), buffers the stream from there (at most 64 MiB; more during the
 * download fails the resync), and as soon as the back-off below allows --
 * without waiting for a further message -- downloads the snapshot with
 * libcurl (streamed, never held whole;
 * no redirect followed; no proxy from the environment), loads it (default
 * tenant, no group), replays the buffer (the first buffered message begins
 * a run, as after a gap), then serves. Until then every query answers miss
 * and sci_stats.resyncing is true. A failure (HTTP status other than 200,
 * time-out, a body cut short or whose last line lacks its '\n', a line
 * longer than 65536 bytes, buffer overflow, a gap inside the buffer) is
 * counted in resync_failures and logged, leaves the index empty and
 * answering miss, and is retried no more often than resync_min_interval_ms,
 * doubling per consecutive failure up to 16 times that. Snapshot keys carry
 * no group, and since 1.4 none is needed: they load straight into page
 * entries, so the first query of a resynced page costs what any query
 * costs (1.3 proved it key by key and adopted its group).
 *
 * HA following (1.1, with etcd_endpoints; 1.2, with redis_endpoint). The
 * subscriber reads the leader's RPC address "ip:port" from etcd (v3 JSON
 * gateway) or from Redis (HMGET leader_address view_version of the hash
 * mooncake-store/{<ns>}/master_view, <ns> being cluster_id without a
 * trailing '/' and with '{' and '}' replaced by '_'; a hash with only one of
 * the two fields is no view), polled every 500 ms, each read bounded by 2 s;
 * connects to tcp://ip:event_port and resyncs from
 * http://ip:admin_port/get_all_keys, and follows every change of the view
 * (a new address or a new election -- etcd's create_revision, Redis'
 * view_version -- is a new sequence space: clear, then resync; counted in
 * leader_changes). The store unreachable: the current leader is kept
 * (logged once per outage); a malformed view is ignored (logged). etcd_endpoints and redis_endpoint together are
 * SCI_ERR_INVALID_ARGUMENT, as is a redis_endpoint that is not
 * redis://[:password@]host[:port][/db] (rediss:// is not supported). A
 * Kubernetes Lease is not read: an application that finds the leader
 * itself calls sci_subscriber_retarget (docs/operations.md, "HA (etcd;
 * Redis)").
 *
 * One subscriber per index: the index has a single sequence cursor, so a
 * second subscriber to the same publisher would only add duplicates, and
 * one to another publisher would make every batch look like a gap (constant
 * clears). A second start on an index whose subscriber is not stopped is
 * therefore refused; after sci_subscriber_stop the index takes a new one.
 * Log lines (connects, disconnects, stale clears, malformed messages,
 * resyncs) come from the subscriber's thread through sci_set_log_callback,
 * and, with etcd_endpoints or redis_endpoint, those about the leader view from its leader
 * follower's thread (a callback may stop the subscriber from either). */
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

/* Moves a running subscriber to another publisher, for an application that
 * discovers the Mooncake leader itself: closes the current connection,
 * connects to `endpoint`, clears the index and resyncs from `snapshot_url`
 * (empty = no resync: the index refills from new stored events). Returns
 * once the subscriber's thread has switched (the resync itself goes on in
 * the background; sci_stats.resyncing says when it is done).
 * SCI_ERR_INVALID_ARGUMENT (nothing changes) for a NULL `sub`, an empty or
 * unusable endpoint, a snapshot_url that is not http:// or https://; SCI_ERR_IO
 * when the socket cannot be set up; SCI_ERR_NO_MEMORY (1.3) when memory ran
 * out part-way: the index is cleared and follows no snapshot until a call
 * succeeds, so call again. Must not race with sci_subscriber_stop
 * on the same handle, nor be called from the log callback. With
 * etcd_endpoints, the next change of the leader view overrides it. */
sci_status sci_subscriber_retarget(sci_subscriber *sub, sci_str endpoint, sci_str snapshot_url);

/* ------------------------------------------------------------------------ */
/* Counters                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct sci_stats {
    uint32_t struct_size;
    uint64_t keys;               /* gauge: object keys present */
    uint64_t groups;             /* gauge: page entries (1.4; 1.3: groups known) */
    uint64_t verified_groups;    /* gauge: 0 since 1.4, every page is one entry (1.3: groups verified) */
    uint64_t batches_applied;    /* batches applied (duplicates excluded) */
    uint64_t events_applied;     /* stored / removed / all-cleared events applied */
    uint64_t duplicate_batches;  /* batches ignored: same sequence as the last one */
    uint64_t sequence_gaps;      /* gaps or regressions (while a resync waits or runs too) */
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
    uint64_t fast_path_hits;     /* page hits answered by one page entry (every SGLang hit since 1.4) */
    /* ---- 1.1 (written only when struct_size covers them) ---- */
    uint64_t resyncs;            /* snapshots loaded and caught up with the stream */
    uint64_t resync_failures;    /* downloads failed, timed out, malformed, or aborted by a gap/overflow */
    uint64_t snapshot_keys;      /* keys loaded by the last completed resync */
    bool resyncing;              /* gauge: a resync is under way (queries answer miss) */
    uint64_t leader_changes;     /* new leader views followed (etcd) */
    uint64_t stores_withheld;    /* stored events not applied: their Mooncake batch began a run
                                    right after a possible loss (docs/index-semantics.md) */
    /* The next four are 0 since 1.4: the page store retired the mechanisms
     * they counted (docs/operations.md, "Counters"). */
    uint64_t summarised_pages;   /* 1.3: gauge, pages in the page summary */
    uint64_t tail_numbers;       /* 1.3: gauge, key tails numbered for the page summary */
    uint64_t groups_adopted;     /* 1.3: pages given their group back after a snapshot */
    uint64_t stray_keys;         /* 1.3: gauge, page keys present outside their page's group */
    /* ---- 1.2 (written only when struct_size covers them) ---- */
    uint64_t tenant_clears;      /* tenants emptied by a `cleared` event (or by an event of an
                                    unknown type that names no key) */
    uint64_t medium_removals_kept; /* per-medium residency: removals that left the key present
                                    on another medium */
    /* ---- 1.3 (written only when struct_size covers them) ---- */
    uint64_t block_size_mismatches; /* queries whose block size is not the layout's (answered with no pages) */
    uint64_t tail_losses; /* losses at the tail of a quiet stream, found through the master's status
                             (status_url): each cleared the index */
    uint64_t restarts_suspected; /* reconnects whose next batch continued the sequence but not the event
                                    ids: a restarted publisher (cleared, resynced if configured) */
    uint64_t resyncs_anchored; /* resyncs whose catch-up ended at a batch the publisher's counters anchor
                                  (or on a quiet master's two agreeing status reads) */
    uint64_t resyncs_timed; /* resyncs whose catch-up ended on the 100 ms timer: no status endpoint */
    uint64_t status_unavailable; /* reads of the publisher's status endpoint that failed or found none */
    uint64_t removals_per_medium; /* removals applied to one medium of their key (per-medium rule) */
    uint64_t removals_whole_key; /* removals applied to the whole key (object rule, first-generation
                                    removals, removals on no known medium) */
    uint64_t stream_generation; /* gauge: publisher generation the stream has shown (0 unknown, 1, 2) */
    uint64_t residency_mismatches; /* removals whose publisher generation contradicts the residency
                                      option (first-generation under per-medium: applied to the whole
                                      key; second-generation under object: may cost a hit) */
    uint64_t subscriber_failures; /* failures of the subscriber's loop, each clearing the index: out of memory
                                     or no thread (it resumes, resyncing if configured), or a socket error (it
                                     stops, logged at error level) */
    uint64_t keys_tier0; /* gauges: present keys by the tier of their fastest medium
                            (sci_index_options.medium_tiers; unknown media: the slowest tier) */
    uint64_t keys_tier1;
    uint64_t keys_tier2;
    uint64_t keys_tier3;
    /* ---- 1.3.0 (written only when struct_size covers them) ---- */
    uint64_t status_refused; /* publisher status answers refused: a bound below a sequence the stream had
                                shown (another master's, or counters reset), or values out of range */
    uint64_t resyncs_withholding; /* resyncs released before their catch-up was anchored (a quiet master,
                                     or the hold's 1 s limit): stored events are withheld until the anchor */
    uint64_t catch_ups_unanchored; /* catch-ups that met no anchor within resync_catch_up_max_ms while
                                      batches flowed: stored events applied again without it (warned once) */
    uint64_t disconnect_clears; /* disconnects that cleared the index because a restart behind them could
                                   not be ruled out (reconnect_policy SCI_RECONNECT_RESYNC) */
    /* ---- 1.4 (written only when struct_size covers it) ---- */
    uint64_t stores_past_slot_capacity; /* keys stored whole (exact, about 20 B each instead of a bit) because
                                           every page slot number was taken: some writer names its keys with a
                                           new prefix or suffix around the digest per page (warned once) */
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
