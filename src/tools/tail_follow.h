// sci-tail's follow mode (--snapshot-url or --etcd): the library's own
// subscriber, with resync and HA following, feeds an index, and the tool
// prints the resync's progress instead of each message (the subscriber
// consumes them). A line {"resync":{...}} whenever one of the counters
// that tell a resync's story changes (keys and messages_received ride
// along as they are; their own changes print nothing):
//
//   {"resync":{"elapsed_ms":812,"resyncing":false,"resyncs":1,
//              "resync_failures":0,"snapshot_keys":1000,"leader_changes":1,
//              "keys":1003,"keys_by_tier":[0,1003],
//              "subscriber_connected":true,"messages_received":4}}
//
// then, at the end, {"stats":{...}} with every counter. It stops on SIGINT /
// SIGTERM, after --max-messages messages received, or after --timeout-ms
// without any change.
#pragma once

#include <cstdint>
#include <string>

#include "feed/subscriber.h"

namespace sci::tools {

struct FollowLimits {
  uint64_t max_messages = 0;  // 0: no limit
  uint64_t timeout_ms = 0;    // without a change of the printed counters; 0: no limit
};

// Runs until a limit or a stop signal; 0, or (with *error) 2 if the library
// rejects the options, 1 if the subscriber cannot start otherwise. Lines go to stdout; false from a failed write
// ends it too.
int FollowWithResync(const SubscriberOptions& options, const IndexOptions& index_options, const FollowLimits& limits,
                     std::string* error);

}  // namespace sci::tools
