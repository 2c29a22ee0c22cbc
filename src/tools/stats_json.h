// Every counter of the index as one JSON object, for the tools' final line.
#pragma once

#include <string>

#include "json_writer.h"
#include "index/stats.h"

namespace sci::tools {

inline std::string StatsJson(const Stats& s) {
  return JsonObject()
      .Uint("keys", s.keys)
      .Uint("groups", s.groups)
      .Uint("verified_groups", s.verified_groups)
      .Uint("batches_applied", s.batches_applied)
      .Uint("events_applied", s.events_applied)
      .Uint("duplicate_batches", s.duplicate_batches)
      .Uint("sequence_gaps", s.sequence_gaps)
      .Uint("clears", s.clears)
      .Uint("malformed_messages", s.malformed_messages)
      .Uint("ignored_events", s.ignored_events)
      .Uint("capacity_refusals", s.capacity_refusals)
      .Uint("last_sequence", s.last_sequence)
      .Bool("has_sequence", s.has_sequence)
      .Bool("subscriber_connected", s.subscriber_connected)
      .Uint("subscriber_connects", s.subscriber_connects)
      .Uint("subscriber_disconnects", s.subscriber_disconnects)
      .Uint("messages_received", s.messages_received)
      .Uint("queries", s.queries)
      .Uint("pages_checked", s.pages_checked)
      .Uint("page_hits", s.page_hits)
      .Uint("fast_path_hits", s.fast_path_hits)
      .Uint("resyncs", s.resyncs)
      .Uint("resync_failures", s.resync_failures)
      .Uint("snapshot_keys", s.snapshot_keys)
      .Bool("resyncing", s.resyncing)
      .Uint("leader_changes", s.leader_changes)
      .Uint("etcd_failures", s.etcd_failures)
      .Finish();
}

}  // namespace sci::tools
