// sci-tail: subscribes to a KV-event publisher and prints every message as
// one JSON line, marking sequence gaps and duplicates the way the index
// judges them, then every counter on a last line.
#include <zmq.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "command_line.h"
#include "encode/mooncake_payload_reader.h"
#include "feed/endpoint_syntax.h"
#include "feed/monitored_socket.h"
#include "index/index.h"
#include "sglang/layout.h"
#include "vllm/layout.h"
#include "json_line.h"
#include "wire/message_apply.h"
#include "stats_json.h"
#include "stop_signal.h"
#include "tail_follow.h"
#include "wire/wire_decoder.h"

namespace sci::tools {
namespace {

constexpr uint64_t kDefaultConnectTimeoutMs = 10000;
constexpr int kExitNeverConnected = 3;

constexpr FlagSpec kFlags[] = {
    {"endpoint", "E", "publisher endpoint to connect to, e.g. tcp://127.0.0.1:5557 or ipc:///tmp/kv.ipc (required)"},
    {"topic", "T", "subscription prefix (default: empty, every message)"},
    {"max-messages", "N", "stop after N messages (default 0: no limit)"},
    {"timeout-ms", "MS", "stop after MS milliseconds without a message (default 0: no limit)"},
    {"connect-timeout-ms", "MS",
     "give up (exit 3) if no connection is made within MS milliseconds (default 10000; 0: wait forever)"},
    {"reconnect-ms", "MS", "ZeroMQ reconnect interval (default 100)"},
    {"snapshot-url", "URL", "follow mode: resync from this snapshot (http://master:9003/get_all_keys)"},
    {"resync-min-interval-ms", "MS", "follow mode: at most one snapshot download per MS (default 5000)"},
    {"snapshot-timeout-ms", "MS", "follow mode: time-out of one whole snapshot download (default 60000)"},
    {"etcd", "ENDPOINTS", "follow mode: follow the HA leader named in etcd (http://host:port,...); no --endpoint"},
    {"redis", "URL", "follow mode: follow the HA leader named in Redis (redis://[:password@]host:port[/db]); no --endpoint"},
    {"cluster-id", "ID", "with --etcd / --redis: view mooncake-store/ID/master_view (Redis: {ID}; default mooncake_cluster)"},
    {"event-port", "PORT", "with --etcd / --redis: the leader's event publisher port (required)"},
    {"admin-port", "PORT", "with --etcd / --redis: the leader's admin HTTP port (default 9003)"},
    {"residency", "RULE", "when a key stops being present: object (default) or per-medium (see \"Residency\")"},
    {"medium-tiers", "MAP", "storage tiers of the media, fastest first (default cpu=0,disk=1; see \"Tiers\")"},
    kHelpFlag,
    kVersionFlag,
};

constexpr char kUsage[] = R"(usage: sci-tail --endpoint E [--topic T] [--max-messages N] [--timeout-ms MS]
                [--connect-timeout-ms MS] [--residency object|per-medium] [--medium-tiers MAP]
       sci-tail (--endpoint E --snapshot-url URL | (--etcd ENDPOINTS | --redis URL) --event-port P [--admin-port A])
                [--resync-min-interval-ms MS] [--snapshot-timeout-ms MS] [--max-messages N] [--timeout-ms MS]
                [--residency object|per-medium] [--medium-tiers MAP]

Subscribes (ZeroMQ SUB) to a KV-event publisher and prints one JSON line per
message, in any wire format the index reads (mooncake, mooncake-v1, engine):

  {"sequence":7,"format":"mooncake","topic":"","timestamp_ms":...,
   "events":[{"type":"stored","object_key":"...","group_id":"...",
              "tenant_id":"default","medium":"cpu","event_id":12}],
   "gap":true,"duplicate":true,"stores_withheld":3}

"gap" / "duplicate" / "stores_withheld" appear only when true (non-zero), as
the index judges the sequence: a gap clears the index it keeps, and a
mooncake batch that begins a run (after a gap, or the first one seen) has
its stored events withheld, since the publisher signals a loss one batch
early. A malformed message prints
{"malformed":"<reason>","frames":N,"bytes":B,...} and changes nothing. Event
types are stored, removed, all_cleared, tenant_cleared (the second
generation's `cleared`, or an unknown key-less event) and ignored
(block-hash events of engines). Strings that are not valid UTF-8 are printed lossily and exactly,
as hex, in a sibling "<field>_hex".

Residency (docs/index-semantics.md, "Residency"): the index sci-tail keeps,
whose counters it prints, drops a key on any `removed` with --residency
object (the default, safe with either generation of the Mooncake master),
or only once no medium holds it with --residency per-medium (exact for the
second generation, where `removed cpu` may leave a disk copy; a key stored
on no named medium falls to any removal). The "keys" counter tells them
apart.

Tiers (docs/index-semantics.md, "Tiers"): --medium-tiers maps each medium to
a storage tier, fastest first ("cpu=0,disk=1", the default; at most 4
tiers). The counters keys_tier0 .. keys_tier3 count the present keys by the
tier of their fastest medium; a key whose media are unknown (every key under
--residency object, snapshot keys) counts at the slowest tier. Follow mode's
progress lines show them as "keys_by_tier".

Stops after --max-messages messages, after --timeout-ms without one, or on
SIGINT / SIGTERM, then prints {"stats":{...}} with every counter of the
index. An endpoint it never connects to (nothing listening, wrong host or
port) is not silence: after --connect-timeout-ms (default 10 s) without a
connection it says so on stderr, prints the stats and exits 3; so does any
other stop before a first connection. Exit status: 0, 1 if the socket cannot
be set up, 2 on bad flags, 3 if it never connected.

Follow mode (--snapshot-url, --etcd or --redis) runs the library's own
subscriber with resync (docs/index-semantics.md, "Resync"): at start and
after every clear it refills the index from the master's snapshot; with
--etcd or --redis it follows the Mooncake HA leader named in that store's
leader view (tcp://<leader ip>:<event-port>, snapshot
http://<leader ip>:<admin-port>/get_all_keys). The subscriber consumes the
messages, so instead of them it prints the resync's progress: a line each
time resyncing, resyncs, resync_failures, snapshot_keys, leader_changes or
subscriber_connected changes. keys and messages_received are shown as they
are at that moment; their own changes print nothing (they change with every
message):

  {"resync":{"elapsed_ms":812,"resyncing":false,"resyncs":1,"resync_failures":0,
             "snapshot_keys":1000,"leader_changes":1,"keys":1003,
             "keys_by_tier":[0,1003],"subscriber_connected":true,"messages_received":4}}

It stops after --max-messages messages received, after --timeout-ms without
a change of those six, or on SIGINT / SIGTERM, then prints {"stats":{...}}.

flags:
)";

std::string_view KindName(EventKind kind) {
  switch (kind) {
    case EventKind::kStored: return "stored";
    case EventKind::kRemoved: return "removed";
    case EventKind::kAllCleared: return "all_cleared";
    case EventKind::kTenantCleared: return "tenant_cleared";
    case EventKind::kIgnored: break;
  }
  return "ignored";
}

// Writes one line and flushes it, so a reader on a pipe sees it at once.
// False once stdout is gone.
bool PrintLine(const std::string& line) {
  return std::fwrite(line.data(), 1, line.size(), stdout) == line.size() && std::fputc('\n', stdout) != EOF &&
         std::fflush(stdout) == 0;
}

// `full`: the same message read with every production field (event ids), or
// null for the other formats.
std::string MessageLine(const DecodedMessage& message, const MooncakePayload* full, bool gap, bool duplicate,
                        uint64_t stores_withheld) {
  Json events = Json::array();
  for (size_t i = 0; i < message.events.size(); ++i) {
    const Event& event = message.events[i];
    Json object = {{"type", KindName(event.kind)}};
    SetBytes(object, "object_key", event.object_key);
    SetBytes(object, "group_id", event.group_id);
    SetBytes(object, "tenant_id", event.tenant_id);
    SetBytes(object, "medium", event.medium);
    if (full != nullptr) object["event_id"] = full->events[i].event_id;
    events.push_back(std::move(object));
  }
  Json line = {{"sequence", message.sequence}, {"format", WireFormatName(message.format)}};
  SetBytes(line, "topic", message.topic);
  line["timestamp_ms"] = message.timestamp_ms;
  line["events"] = std::move(events);
  if (gap) line["gap"] = true;
  if (duplicate) line["duplicate"] = true;
  if (stores_withheld > 0) line["stores_withheld"] = stores_withheld;
  return JsonLine(line);
}

std::string MalformedLine(std::string_view reason, std::span<const std::span<const uint8_t>> frames) {
  size_t bytes = 0;
  for (const auto& frame : frames) bytes += frame.size();
  Json line = Json::object();
  SetBytes(line, "malformed", reason);
  line["frames"] = frames.size();
  line["bytes"] = bytes;
  if (!frames.empty()) {
    SetBytes(line, "topic", std::string_view(reinterpret_cast<const char*>(frames[0].data()), frames[0].size()));
  }
  return JsonLine(line);
}

class Tail {
 public:
  Tail(std::string endpoint, std::string topic, uint64_t max_messages, uint64_t timeout_ms,
       uint64_t connect_timeout_ms, int reconnect_ms, IndexOptions index_options)
      : endpoint_(std::move(endpoint)),
        topic_(std::move(topic)),
        max_messages_(max_messages),
        timeout_ms_(timeout_ms),
        connect_timeout_ms_(connect_timeout_ms),
        reconnect_ms_(reconnect_ms),
        index_(index_options),
        context_(1) {
  }

  bool Connect(std::string* error) {
    zmq::socket_t data(context_, zmq::socket_type::sub);
    data.set(zmq::sockopt::linger, 0);
    data.set(zmq::sockopt::rcvhwm, 1 << 20);
    data.set(zmq::sockopt::reconnect_ivl, reconnect_ms_);
    data.set(zmq::sockopt::subscribe, topic_);
    try {
      socket_ = MonitoredSocket::Monitor(context_, std::move(data), "inproc://sci-tail-monitor",
                                         ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED);
    } catch (const zmq::error_t& e) {
      *error = absl::StrFormat("cannot monitor the socket: %s", e.what());
      return false;
    }
    if (zmq_connect(socket_.data().handle(), endpoint_.c_str()) != 0) {
      *error = absl::StrFormat("cannot connect to \"%s\": %s", endpoint_, zmq_strerror(zmq_errno()));
      return false;
    }
    return true;
  }

  void Run() {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    Clock::time_point last_message = start;
    while (max_messages_ == 0 || received_ < max_messages_) {
      // The nearer of two deadlines: silence (--timeout-ms) and, until the
      // first connection, --connect-timeout-ms.
      std::optional<Clock::time_point> deadline;
      if (timeout_ms_ > 0) deadline = last_message + std::chrono::milliseconds(timeout_ms_);
      if (connect_timeout_ms_ > 0 && !ever_connected()) {
        const Clock::time_point connect_deadline = start + std::chrono::milliseconds(connect_timeout_ms_);
        if (!deadline || connect_deadline < *deadline) deadline = connect_deadline;
      }
      long timeout = -1;
      if (deadline) {
        const auto left = *deadline - Clock::now();
        if (left <= Clock::duration::zero()) return;
        timeout = static_cast<long>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
      }
      zmq_pollitem_t items[] = {{socket_.data().handle(), 0, ZMQ_POLLIN, 0},
                                {socket_.monitor().handle(), 0, ZMQ_POLLIN, 0},
                                {nullptr, StopSignal::fd(), ZMQ_POLLIN, 0}};
      if (zmq_poll(items, 3, timeout) < 0) {
        if (zmq_errno() == EINTR) continue;
        return;
      }
      if (items[2].revents & ZMQ_POLLIN) {
        // A handshake already done but not yet read off the monitor still
        // counts: libzmq reports it before the subscription goes out, so a
        // publisher that saw us subscribe (the signal's sender may have
        // waited for that) sees us report connected.
        DrainMonitor();
        return;
      }
      if (items[1].revents & ZMQ_POLLIN) DrainMonitor();
      if (items[0].revents & ZMQ_POLLIN) {
        while ((max_messages_ == 0 || received_ < max_messages_) && ReceiveOne()) {
          last_message = Clock::now();
          if (!stdout_ok_) return;
        }
      }
    }
  }

  const Index& index() const { return index_; }

  // A handshake with the publisher completed at least once.
  bool ever_connected() const { return index_.counters().subscriber_connects.Get() > 0; }

 private:
  bool ReceiveOne() {
    std::vector<zmq::message_t> frames;
    zmq::message_t first;
    if (!socket_.data().recv(first, zmq::recv_flags::dontwait)) return false;
    bool more = first.more();
    frames.push_back(std::move(first));
    while (more) {
      zmq::message_t part;
      (void)socket_.data().recv(part);
      more = part.more();
      frames.push_back(std::move(part));
    }
    ++received_;
    index_.feed_counters().messages_received.Add();
    std::vector<std::span<const uint8_t>> spans;
    for (const zmq::message_t& frame : frames) spans.emplace_back(frame.data<uint8_t>(), frame.size());

    // The index judges the sequence exactly as the library's subscriber
    // does; its counters say what it decided.
    const Stats before = index_.GetStats();
    std::string error;
    if (!ApplyMessage(index_, spans, scratch_, &error)) {
      stdout_ok_ = PrintLine(MalformedLine(error, spans));
      return true;
    }
    const Stats after = index_.GetStats();
    const bool full = scratch_.format == WireFormat::kMooncake && ReadMooncakePayload(spans[2], &full_, nullptr) &&
                      full_.events.size() == scratch_.events.size();
    stdout_ok_ = PrintLine(MessageLine(scratch_, full ? &full_ : nullptr, after.sequence_gaps > before.sequence_gaps,
                                       after.duplicate_batches > before.duplicate_batches,
                                       after.stores_withheld - before.stores_withheld));
    return true;
  }

  void DrainMonitor() {
    while (true) {
      zmq::message_t event;
      if (!socket_.monitor().recv(event, zmq::recv_flags::dontwait)) return;
      bool more = event.more();
      while (more) {
        zmq::message_t part;
        (void)socket_.monitor().recv(part);
        more = part.more();
      }
      if (event.size() < sizeof(uint16_t)) continue;
      uint16_t id = 0;
      std::memcpy(&id, event.data(), sizeof id);
      FeedCounters& counters = index_.feed_counters();
      if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED && !counters.subscriber_connected.Get()) {
        counters.subscriber_connected.Set(true);
        counters.subscriber_connects.Add();
      } else if (id == ZMQ_EVENT_DISCONNECTED && counters.subscriber_connected.Get()) {
        counters.subscriber_connected.Set(false);
        counters.subscriber_disconnects.Add();
      }
    }
  }

  const std::string endpoint_;
  const std::string topic_;
  const uint64_t max_messages_;
  const uint64_t timeout_ms_;
  const uint64_t connect_timeout_ms_;
  const int reconnect_ms_;
  Index index_;
  DecodedMessage scratch_;
  MooncakePayload full_;
  uint64_t received_ = 0;
  bool stdout_ok_ = true;
  zmq::context_t context_;
  MonitoredSocket socket_;  // closed in the order that cannot wedge the context (monitored_socket.h)
};

// Follow mode's flags as the library's subscriber options; false with
// *error when they do not make one of the two follow modes.
bool LoadFollowOptions(const CommandLine& flags, SubscriberOptions* options, FollowLimits* limits,
                       std::string* error) {
  if (flags.Has("etcd") && flags.Has("redis")) {
    *error = "give --etcd or --redis, not both: the leader view is read from one store";
    return false;
  }
  // HA following: the leader view in etcd or in Redis.
  const char* store_flag = flags.Has("etcd") ? "--etcd" : flags.Has("redis") ? "--redis" : nullptr;
  const bool follow_leader = store_flag != nullptr;
  if (!follow_leader && !flags.Has("snapshot-url")) {
    *error = "the resync flags need --snapshot-url (with --endpoint), --etcd or --redis";
    return false;
  }
  if (follow_leader && (flags.Has("endpoint") || flags.Has("snapshot-url"))) {
    *error = absl::StrFormat(
        "with %s the endpoint and the snapshot come from the leader: drop --endpoint and --snapshot-url", store_flag);
    return false;
  }
  if (!follow_leader && (flags.Has("event-port") || flags.Has("admin-port") || flags.Has("cluster-id"))) {
    *error = "--event-port, --admin-port and --cluster-id belong to --etcd or --redis";
    return false;
  }
  if (!follow_leader && flags.Get("endpoint").empty()) {
    *error = "--snapshot-url needs --endpoint (the publisher it resyncs with)";
    return false;
  }
  if (flags.Has("connect-timeout-ms")) {
    *error = "--connect-timeout-ms is not used in follow mode (subscriber_connected shows the connection)";
    return false;
  }
  uint64_t reconnect = 0, interval = 0, timeout = 0, event_port = 0, admin_port = 0;
  if (!flags.GetUint("max-messages", 0, UINT64_MAX, &limits->max_messages, error) ||
      !flags.GetUint("timeout-ms", 0, UINT64_MAX / 2, &limits->timeout_ms, error) ||
      !flags.GetUint("reconnect-ms", SubscriberOptions::kDefaultReconnectMs, INT32_MAX, &reconnect, error) ||
      !flags.GetUint("resync-min-interval-ms", SubscriberOptions::kDefaultResyncMinIntervalMs, INT32_MAX, &interval,
                     error) ||
      !flags.GetUint("snapshot-timeout-ms", SubscriberOptions::kDefaultSnapshotTimeoutMs, INT32_MAX, &timeout,
                     error) ||
      !flags.GetUint("event-port", 0, 65535, &event_port, error) ||
      !flags.GetUint("admin-port", SubscriberOptions::kDefaultAdminPort, 65535, &admin_port, error)) {
    return false;
  }
  if (interval == 0 || timeout == 0) {
    *error = "--resync-min-interval-ms and --snapshot-timeout-ms must be at least 1";
    return false;
  }
  // --admin-port has a default (9003); --event-port has none.
  if (follow_leader && event_port == 0) {
    *error = absl::StrFormat("%s needs --event-port PORT (the leader's event publisher port, 1..65535)", store_flag);
    return false;
  }
  if (follow_leader && admin_port == 0) {
    *error = "--admin-port must be 1..65535 (the leader's admin HTTP port; default 9003)";
    return false;
  }
  options->endpoint = flags.Get("endpoint");
  options->topic = flags.Get("topic");
  options->reconnect_ms = static_cast<uint32_t>(reconnect);
  options->snapshot_url = flags.Get("snapshot-url");
  options->resync_min_interval_ms = static_cast<uint32_t>(interval);
  options->snapshot_timeout_ms = static_cast<uint32_t>(timeout);
  if (follow_leader) {
    for (absl::string_view endpoint : absl::StrSplit(flags.Get("etcd"), ',', absl::SkipWhitespace())) {
      options->etcd_endpoints.emplace_back(endpoint);
    }
    options->redis_endpoint = flags.Get("redis");
    options->cluster_id = flags.Get("cluster-id", SubscriberOptions::kDefaultClusterId);
    options->event_port = static_cast<uint32_t>(event_port);
    options->admin_port = static_cast<uint32_t>(admin_port);
  }
  return true;
}

// --residency and --medium-tiers as the index's options.
bool LoadIndexOptions(const CommandLine& flags, IndexOptions* options, std::string* error) {
  // As a C index: every family's conventions (vLLM's digests; SGLang's
  // option is kept, unused since 1.4).
  *options = vllm::VllmIndexOptions(SGLangIndexOptions(*options));
  const std::string rule = flags.Get("residency", "object");
  if (rule == "object") {
    options->residency = Residency::kObject;
  } else if (rule == "per-medium") {
    options->residency = Residency::kPerMedium;
  } else {
    *error = "--residency is object or per-medium, not \"" + rule + "\"";
    return false;
  }
  std::string tiers_error;
  if (!MediumTiers::Parse(flags.Get("medium-tiers", ""), &options->tiers, &tiers_error)) {
    *error = "--medium-tiers: " + tiers_error;
    return false;
  }
  return true;
}

int FollowMain(const CommandLine& flags) {
  SubscriberOptions options;
  FollowLimits limits;
  IndexOptions index_options;
  std::string error;
  if (!LoadFollowOptions(flags, &options, &limits, &error) || !LoadIndexOptions(flags, &index_options, &error)) {
    std::fprintf(stderr, "sci-tail: %s (see --help)\n", error.c_str());
    return 2;
  }
  if (!StopSignal::Install()) {
    std::fprintf(stderr, "sci-tail: cannot install the signal handlers\n");
    return 1;
  }
  const int status = FollowWithResync(options, index_options, limits, &error);
  if (status != 0) std::fprintf(stderr, "sci-tail: %s\n", error.c_str());
  return status;
}

int Main(int argc, char** argv) {
  CommandLine flags;
  std::string error;
  if (!CommandLine::Parse(kFlags, argc, argv, &flags, &error)) {
    std::fprintf(stderr, "sci-tail: %s\n", error.c_str());
    return 2;
  }
  if (PrintedHelpOrVersion(flags, "sci-tail", kUsage, kFlags)) return 0;
  if (flags.Has("snapshot-url") || flags.Has("etcd") || flags.Has("redis") || flags.Has("event-port") ||
      flags.Has("admin-port") ||
      flags.Has("cluster-id") || flags.Has("resync-min-interval-ms") || flags.Has("snapshot-timeout-ms")) {
    return FollowMain(flags);
  }
  uint64_t max_messages = 0, timeout_ms = 0, connect_timeout_ms = 0, reconnect_ms = 0;
  IndexOptions index_options;
  if (!flags.Has("endpoint") || flags.Get("endpoint").empty()) {
    error = "--endpoint is required";
  } else if (!(error = CheckEndpointSyntax("--endpoint", flags.Get("endpoint"), EndpointUse::kConnect)).empty()) {
    // Said in words here, rather than as ZeroMQ's errno string later.
  } else if (flags.GetUint("max-messages", 0, UINT64_MAX, &max_messages, &error) &&
             flags.GetUint("timeout-ms", 0, UINT64_MAX / 2, &timeout_ms, &error) &&
             flags.GetUint("connect-timeout-ms", kDefaultConnectTimeoutMs, UINT64_MAX / 2, &connect_timeout_ms,
                           &error) &&
             flags.GetUint("reconnect-ms", 100, INT32_MAX, &reconnect_ms, &error) &&
             LoadIndexOptions(flags, &index_options, &error)) {
    error.clear();
  }
  if (!error.empty()) {
    std::fprintf(stderr, "sci-tail: %s (see --help)\n", error.c_str());
    return 2;
  }
  if (!StopSignal::Install()) {
    std::fprintf(stderr, "sci-tail: cannot install the signal handlers\n");
    return 1;
  }
  try {
    Tail tail(flags.Get("endpoint"), flags.Get("topic"), max_messages, timeout_ms, connect_timeout_ms,
              static_cast<int>(reconnect_ms), index_options);
    if (!tail.Connect(&error)) {
      std::fprintf(stderr, "sci-tail: %s\n", error.c_str());
      return 1;
    }
    const auto started = std::chrono::steady_clock::now();
    tail.Run();
    const auto ran_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
    PrintLine(JsonLine(Json{{"stats", StatsJson(tail.index().GetStats())}}));
    if (!tail.ever_connected()) {
      // Nothing received is not "the publisher was quiet" when nothing was
      // ever there to hear: say so, and fail.
      std::fprintf(stderr, "sci-tail: never connected to \"%s\" in %lld ms (see --connect-timeout-ms)\n",
                   flags.Get("endpoint").c_str(), static_cast<long long>(ran_ms));
      return kExitNeverConnected;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sci-tail: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace sci::tools

int main(int argc, char** argv) { return sci::tools::Main(argc, argv); }
