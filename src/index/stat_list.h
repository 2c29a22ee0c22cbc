// The one list of the index's counters. Every C++ copy is generated from it:
// the Stats snapshot and the live Counters (stats.h), Index::GetStats, the
// copy into the C struct sci_stats (checked against it at compile time), the
// Prometheus text and the tools' JSON line. A new counter is one line here,
// plus its field in include/shared_cache_index.h (appended, in this order)
// and in the Rust crate's Stats.
//
// SCI_STAT_LIST(X) calls X(name, type, kind, keeper, help) once per counter,
// in the order of the fields of sci_stats:
//   name    the field name everywhere (C, C++, JSON; Prometheus adds "sci_")
//   type    uint64_t, or bool for a yes/no gauge
//   kind    COUNTER (monotonic: Prometheus adds "_total") or GAUGE
//   keeper  who keeps it up to date:
//             TABLES      the index, beside its tables and cursor (GetStats
//                         reads it there; no Counters member)
//             WRITER      the apply path (ApplyBatch, Clear, ApplyMessage)
//             SUBSCRIBER  the subscriber's thread
//             READERS     page queries; each querying thread adds to its
//                         own stripe (stats.h), so readers share no line
//   help    one line for humans (the Prometheus HELP text)
// Meanings: docs/index-semantics.md ("Observability").
#pragma once

#define SCI_STAT_LIST(X)                                                                                           \
  X(keys, uint64_t, GAUGE, TABLES, "Object keys present in the index.")                                          \
  X(groups, uint64_t, GAUGE, TABLES, "Page entries in the page store (1.4; 1.3: groups known).")                \
  X(verified_groups, uint64_t, GAUGE, TABLES, "Always 0 since 1.4 (every page is one entry; 1.3: groups verified).") \
  X(batches_applied, uint64_t, COUNTER, WRITER, "Event batches applied in sequence.")                            \
  X(events_applied, uint64_t, COUNTER, WRITER, "Object events applied.")                                         \
  X(duplicate_batches, uint64_t, COUNTER, WRITER, "Batches ignored because their sequence repeated the last one.") \
  X(sequence_gaps, uint64_t, COUNTER, WRITER, "Sequence gaps or regressions: each cleared the index.")           \
  X(clears, uint64_t, COUNTER, WRITER,                                                                           \
    "Times the index was emptied (gap, all-cleared event, stale publisher, API).")                              \
  X(malformed_messages, uint64_t, COUNTER, WRITER, "Messages dropped as malformed (nothing applied).")            \
  X(ignored_events, uint64_t, COUNTER, WRITER,                                                                   \
    "Events ignored: no object key, or a type the index does not use.")                                          \
  X(capacity_refusals, uint64_t, COUNTER, WRITER, "Keys or groups not stored because the index was full.")       \
  X(last_sequence, uint64_t, GAUGE, TABLES, "Sequence number of the last batch applied (0 when none).")          \
  X(has_sequence, bool, GAUGE, TABLES, "1 when a batch has been applied since the last clear.")                  \
  X(subscriber_connected, bool, GAUGE, SUBSCRIBER, "1 while the subscriber is connected to its publisher.")      \
  X(subscriber_connects, uint64_t, COUNTER, SUBSCRIBER, "Subscriber connections established.")                   \
  X(subscriber_disconnects, uint64_t, COUNTER, SUBSCRIBER, "Subscriber connections lost.")                       \
  X(messages_received, uint64_t, COUNTER, SUBSCRIBER, "Messages received by the subscriber.")                    \
  X(queries, uint64_t, COUNTER, READERS, "Page queries answered.")                                               \
  X(pages_checked, uint64_t, COUNTER, READERS, "Pages examined by page queries.")                                \
  X(page_hits, uint64_t, COUNTER, READERS, "Pages found fully present.")                                         \
  X(fast_path_hits, uint64_t, COUNTER, READERS, "Page hits answered from page entries alone (one read a page and bank).")          \
  X(resyncs, uint64_t, COUNTER, SUBSCRIBER, "Snapshots loaded and caught up with the stream.")                   \
  X(resync_failures, uint64_t, COUNTER, SUBSCRIBER,                                                              \
    "Resyncs failed: download error, time-out, malformed snapshot, buffer overflow or gap.")                     \
  X(snapshot_keys, uint64_t, GAUGE, SUBSCRIBER, "Keys loaded by the last completed resync.")                     \
  X(resyncing, bool, GAUGE, SUBSCRIBER, "1 while a resync is under way (queries answer miss).")                  \
  X(leader_changes, uint64_t, COUNTER, SUBSCRIBER, "New Mooncake leader views followed (etcd).")                 \
  X(stores_withheld, uint64_t, COUNTER, WRITER,                                                                  \
    "Stored events not applied: their Mooncake batch began a run right after a possible loss.")               \
  X(summarised_pages, uint64_t, GAUGE, TABLES,                                                                   \
    "Always 0 since 1.4 (1.3: pages in the page summary).")                                                   \
  X(tail_numbers, uint64_t, GAUGE, TABLES,                                                                       \
    "Always 0 since 1.4 (1.3: key tails numbered for the page summary).")                                     \
  X(groups_adopted, uint64_t, COUNTER, WRITER,                                                                   \
    "Always 0 since 1.4 (1.3: snapshot pages given their group back).")                                       \
  X(stray_keys, uint64_t, GAUGE, TABLES,                                                                         \
    "Always 0 since 1.4 (1.3: page keys present outside their page's group).")                                \
  X(tenant_clears, uint64_t, COUNTER, WRITER,                                                                    \
    "Tenants emptied by a cleared event (or an event of an unknown type naming no key).")                       \
  X(medium_removals_kept, uint64_t, COUNTER, WRITER,                                                             \
    "Per-medium residency: removals that left their key present on another medium.") \
  X(block_size_mismatches, uint64_t, COUNTER, READERS, "Page queries whose block size is not the layout's (answered with 0 pages).") \
  X(tail_losses, uint64_t, COUNTER, SUBSCRIBER, "Gaps found through the publisher's counters while the stream was quiet: each cleared and resynced.") \
  X(restarts_suspected, uint64_t, COUNTER, WRITER, "Reconnects after which the batch that continued the sequence did not continue the event ids (a publisher restart): each cleared the index.") \
  X(resyncs_anchored, uint64_t, COUNTER, SUBSCRIBER, "Resyncs whose catch-up ended at a batch anchored by the publisher's counters.") \
  X(resyncs_timed, uint64_t, COUNTER, SUBSCRIBER, "Resyncs whose catch-up ended on the timer (no status endpoint).") \
  X(status_unavailable, uint64_t, COUNTER, SUBSCRIBER, "Reads of the publisher's status endpoint that failed or found none.") \
  X(removals_per_medium, uint64_t, COUNTER, WRITER, "Removals applied to one medium of their key (per-medium residency).") \
  X(removals_whole_key, uint64_t, COUNTER, WRITER, "Removals applied to their whole key (object residency, or a stream not shown second-generation).") \
  X(stream_generation, uint64_t, GAUGE, WRITER, "Publisher generation the stream has shown: 0 unknown, 1 first, 2 second.") \
  X(residency_mismatches, uint64_t, COUNTER, WRITER, "Events that contradict the residency option the index runs under.") \
  X(subscriber_failures, uint64_t, COUNTER, SUBSCRIBER, "Failures of the subscriber's loop, each of which cleared the index: allocation or thread creation (recovered from: the loop resumes, with a resync if configured), or a socket error (the subscriber stops; logged at error level).") \
  X(keys_tier0, uint64_t, GAUGE, TABLES, "Keys whose fastest medium is at tier 0 (medium_tiers; media unknown: the slowest tier).") \
  X(keys_tier1, uint64_t, GAUGE, TABLES, "Keys whose fastest medium is at tier 1.")                                 \
  X(keys_tier2, uint64_t, GAUGE, TABLES, "Keys whose fastest medium is at tier 2.")                                 \
  X(keys_tier3, uint64_t, GAUGE, TABLES, "Keys whose fastest medium is at tier 3.")                                 \
  X(status_refused, uint64_t, COUNTER, SUBSCRIBER, "Publisher status answers refused: a bound below what the stream showed (another publisher's or reset counters), or values out of range.") \
  X(resyncs_withholding, uint64_t, COUNTER, SUBSCRIBER, "Resyncs released before their catch-up was anchored (a quiet master, or the hold's limit): stored events withheld until the anchor.") \
  X(catch_ups_unanchored, uint64_t, COUNTER, SUBSCRIBER, "Catch-ups whose anchor never came within resync_catch_up_max_ms: stored events applied again without it.") \
  X(disconnect_clears, uint64_t, COUNTER, SUBSCRIBER, "Disconnects that cleared the index because a publisher restart behind them could not be ruled out (reconnect_policy resync): each resynced if configured.") \
  X(stores_past_slot_capacity, uint64_t, COUNTER, TABLES, "Keys stored whole (exact, about 20 B instead of a bit) because all page slot numbers were taken (1.4).")

// Helpers for the generated code, selected by pasting a column onto a
// prefix: each expands to its arguments for the rows it names, to nothing
// for the others.
//   SCI_STAT_IN_COUNTERS_<keeper>      rows with a live Counters member
//   SCI_STAT_ON_READER_LINE_<keeper>   rows bumped by page queries
//   SCI_STAT_BY_WRITER_<keeper>        rows bumped by the apply path
//   SCI_STAT_BY_SUBSCRIBER_<keeper>    rows bumped by the subscriber's thread
#define SCI_STAT_IN_COUNTERS_TABLES(...)
#define SCI_STAT_IN_COUNTERS_WRITER(...) __VA_ARGS__
#define SCI_STAT_IN_COUNTERS_SUBSCRIBER(...) __VA_ARGS__
#define SCI_STAT_IN_COUNTERS_READERS(...) __VA_ARGS__

#define SCI_STAT_ON_READER_LINE_TABLES(...)
#define SCI_STAT_ON_READER_LINE_WRITER(...)
#define SCI_STAT_ON_READER_LINE_SUBSCRIBER(...)
#define SCI_STAT_ON_READER_LINE_READERS(...) __VA_ARGS__

#define SCI_STAT_BY_WRITER_TABLES(...)
#define SCI_STAT_BY_WRITER_WRITER(...) __VA_ARGS__
#define SCI_STAT_BY_WRITER_SUBSCRIBER(...)
#define SCI_STAT_BY_WRITER_READERS(...)

#define SCI_STAT_BY_SUBSCRIBER_TABLES(...)
#define SCI_STAT_BY_SUBSCRIBER_WRITER(...)
#define SCI_STAT_BY_SUBSCRIBER_SUBSCRIBER(...) __VA_ARGS__
#define SCI_STAT_BY_SUBSCRIBER_READERS(...)
