// sci-publish: a Mooncake master stand-in. Publishes the production wire
// format byte for byte, from a script of events or from a deterministic
// SGLang HiCache workload. The data source of the demo, the benchmarks and
// the Rust tests. Optionally it is real enough to resync and fail over
// against: an admin HTTP server listing the keys it holds (admin_server.h)
// and the master's leader election through etcd or Redis (leader_election.h).
#include <poll.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "admin_server.h"
#include "batch_publisher.h"
#include "command_line.h"
#include "feed/endpoint_syntax.h"
#include "held_keys.h"
#include "json_line.h"
#include "etcd_election.h"
#include "feed/redis_connection.h"
#include "leader_election.h"
#include "redis_election.h"
#include "sglang/layout.h"
#include "sglang/runtime_config.h"
#include "publish_script.h"
#include "sglang_workload.h"
#include "vllm/layout_spec.h"
#include "vllm_workload.h"
#include "publisher_queue.h"
#include "stop_signal.h"

namespace sci::tools {
namespace {

constexpr FlagSpec kFlags[] = {
    {"endpoint", "E", "where to publish, e.g. tcp://127.0.0.1:5557, tcp://127.0.0.1:* or ipc:///tmp/kv.ipc (required)"},
    {"bind", "", "bind the endpoint (the default; subscribers connect, as to a Mooncake master)"},
    {"connect", "", "connect to the endpoint instead (a subscriber that binds)"},
    {"script", "FILE", "publish the events of FILE (- = stdin); syntax in \"Script\" above"},
    {"workload", "", "publish the objects of a workload: SGLang pages (the layout: and workload: flags below), or "
                     "vLLM chunks when --layout-json is a vLLM descriptor"},
    {"sglang-workload", "", "the 1.2 name of --workload (either family)", "workload"},
    {"repeat", "N", "publish the script or workload N times, sequences continuing (default 1)"},
    {"rate", "EV/S", "events per second (default 0: as fast as possible)"},
    {"batch-size", "N", "most events per message, 1..64 (default 64, as the master)"},
    {"wait-subscribers-ms", "MS", "before publishing, wait up to MS for --subscribers subscriptions"},
    {"wait-for-subscriber", "", "before publishing, wait for --subscribers subscriptions, without limit"},
    {"subscribers", "N", "subscriptions to wait for (default 1)"},
    {"linger-ms", "MS", "at the end, wait up to MS for queued messages to leave (default 2000)"},
    {"topic", "T", "topic frame (default empty, as the production publisher)"},
    {"first-sequence", "S", "sequence of the first message (default 1, as a fresh master)"},
    {"first-event-id", "E", "event_id of the first event (default 1, as a fresh master; with --first-sequence, "
                            "a master that goes on after a blip: a restarted one starts both at 1)"},
    {"timestamp-ms", "MS", "fixed batch timestamp, for reproducible bytes (default: the clock)"},
    {"backend-id", "ID", "backend_id of every event (default mooncake-master-0)"},
    {"sndhwm", "N", "messages queued per subscriber before ZeroMQ drops (default 0: never drop)"},
    {"queue-depth", "N", "send through the master's event queue of N events: one worker takes up to 64 at a time; "
                         "when full the oldest is dropped, consuming a sequence (default: no queue)"},
    {"drain-rate", "EV/S", "with --queue-depth: the worker sends at most EV/S events per second (default 0: "
                           "as fast as it can), so the stream lags what the admin server lists"},
    {"page-size", "N", "layout: tokens per page (required with --workload unless in --layout-json)"},
    {"tp", "N", "layout: tensor-parallel size (default 1)"},
    {"pp", "N", "layout: pipeline-parallel size (default 1)"},
    {"tp-lcm", "N", "layout: tp_lcm_size, used with --split-heads (default 0: unset)"},
    {"mla", "", "layout: MLA model (one k object per page and pp rank)"},
    {"eagle", "", "layout: eagle (pages hash token bigrams)"},
    {"split-heads", "", "layout: should_split_heads"},
    {"tag", "T", "layout: extra_backend_tag"},
    {"key-prefix", "P", "layout: key_prefix (used with pools)"},
    {"tenant", "T", "layout: tenant the pages are stored under (default \"default\")"},
    {"pool", "SUFFIXES", "layout: an advertised pool, suffixes comma-separated, optionally @trailing=N (repeatable)"},
    {"layout-json", "FILE", "layout from JSON (docs/sglang-hicache.md field names; the flags above override it), or "
                        "a vLLM MooncakeStoreConnector descriptor (docs/vllm-family.md; no layout flags then)"},
    {"prompts", "N", "workload: prompts (default 1)"},
    {"pages", "P", "workload: whole pages per prompt (default 16)"},
    {"shared-prefix-pages", "S", "workload: leading pages every prompt shares (default 0)"},
    {"seed", "X", "workload: seed of the token ids (default 1)"},
    {"vocab", "V", "workload: token ids are below V (default 32000)"},
    {"prompts-out", "FILE", "workload: write the prompts' token ids there, one JSON line per prompt"},
    {"generation", "G", "1 (default): one stored event per object; 2: per-medium events (\"Generations\" above)"},
    {"end-with-cleared", "", "workload, generation 2: end each pass with a `cleared` of the workload's tenant"},
    {"keep-running", "", "after publishing, stay up (subscribers, admin server, lease) until SIGINT/SIGTERM"},
    {"live-every-ms", "MS", "with --keep-running: store a new object live-<pid>-<n> every MS ms, as live traffic"},
    {"admin-port", "PORT", "serve GET /get_all_keys (held default-tenant keys) on the endpoint's host (0: any port)"},
    {"restore", "FILE", "hold the objects script FILE stores, as restored by a promoted master: listed, never published"},
    {"restore-workload", "", "hold the workload's objects (layout and prompt flags) as restored, never published"},
    {"restore-sglang-workload", "", "the 1.2 name of --restore-workload", "restore-workload"},
    {"etcd", "ENDPOINTS", "first win the leader election through etcd (comma-separated http://host:port)"},
    {"redis", "URL", "first win the leader election through Redis (redis://[:password@]host:port[/db]), as Mooncake's"},
    {"cluster-id", "ID", "election key mooncake-store/ID/master_view (Redis: the hash mooncake-store/{ID}/master_view; default mooncake_cluster)"},
    {"advertise", "IP:PORT", "the RPC address the leader writes into the view (required with --etcd / --redis)"},
    kHelpFlag,
    kVersionFlag,
};

constexpr char kUsage[] = R"(usage: sci-publish --endpoint E [--bind | --connect] (--script FILE | --workload ... | --keep-running) [options]

Publishes KV events in the Mooncake master's production format, byte for
byte: frames [topic (empty), 8-byte big-endian sequence, msgpack payload],
sequences from 1, one per message, event ids from 1, at most 64 events per
message. It never drops events (unless --sndhwm or --queue-depth says so);
`gap` in a script skips sequence numbers to imitate the master's overflow.

Script (--script FILE, - for stdin), one command per line:
  # comment
  stored <key> [group=<g>] [tenant=<t>] [medium=<m>] [idx=<n>]
  removed <key> [group=<g>] [tenant=<t>] [medium=<m>]
  cleared [tenant=<t>]   every medium of the tenant is empty (second generation)
  flush          end the current message here
  gap [n]        end the message, then skip n sequence numbers (default 1)
  sleep <ms>     end the message, then pause
Defaults: no group, tenant "default", medium "cpu". An empty value (medium=)
is nil. %XX stands for any byte (%20 a blank, %25 a '%').

SGLang workload (--workload): a layout (--page-size, --tp, ... or
--layout-json) and prompts (--prompts, --pages, --shared-prefix-pages,
--seed): stores every object of every distinct page with its group id, as
SGLang HiCache workers would. Token j of prompt p is
SplitMix64(seed*0x9E3779B97F4A7C15 + stream*0xBF58476D1CE4E5B9 + j) % vocab,
stream 0 on the shared prefix and p+1 elsewhere (--prompts-out writes them).

vLLM workload (--workload with a vLLM descriptor in --layout-json,
docs/vllm-family.md): the same token ids, --pages counting router blocks
(main_event_block_size tokens), plus one token per prompt (a vLLM router
never credits the last token, so a stored prompt answers all its blocks).
It stores every distinct chunk of every KV-cache group (a chunk ends at a
multiple of its group's block_size and is keyed by the vLLM block hash
that ends it, with the descriptor's seed and algorithm) as one object per
key prefix, "<prefix>@<hash>": in the first generation with the
connector's group id vllm-mooncake-store:<prefix up to @tp_rank:>@<hash>,
in the second with the KV-group index ("0", "1", ...), as that master
overwrites it, and with the chunk life below.

Generations (docs/wire-formats.md, section 5). --generation 1 (the
default) is Mooncake's main-branch master: the workload stores each object
once, on cpu, and the admin server's listing drops a key on any removal.
--generation 2 is the second-generation master, whose events it writes
in that publisher's field order (dp_rank 0, base_block_idx nil), where
stored and removed name one medium each and an object is present while
some medium holds it:
each distinct page of the workload, numbered n from 0 in publishing order,
is committed (stored cpu), then offloaded if n%2==0 (stored disk), evicted
from memory with its disk copy kept if n%4==0 (removed cpu), upserted if
n%3==2 (removed on each medium it holds, then stored cpu), deleted if n%5==4
(removed on each medium it holds); --end-with-cleared then empties the
tenant with a `cleared`. At the end every page but the deleted ones is
present under the per-medium rule; under the object rule the evicted ones
(n%4==0, unless n%12==8) are missing too (sci-tail --residency). The listing
keeps a key while some medium holds it. `cleared` in a script is sent in
either generation.

A master to resync and fail over against (docs/wire-formats.md, section 4):
--admin-port serves GET /get_all_keys on the endpoint's host (127.0.0.1 for
ipc): the default-tenant keys it holds now, one per line, each ending in
'\n'. It holds what it published (stored adds, removed drops; applied before
sending) and what --restore / --restore-workload name: the objects a
newly promoted master restored, which it lists but never announces.
It also serves GET /kv_events/status: {"enabled":true,"published_batches",
"published_events","dropped_events","skipped_unparsed_keys":0} (a `gap`
counts as batches published and lost on the way).
--queue-depth N sends as a real master does, through a queue: one worker
takes up to 64 events at a time (fewer only when it empties the queue); a
full queue drops its oldest event, which consumes a sequence number and
counts in dropped_events. --drain-rate EV/S paces the worker: the stream
then lags the listing by the queue's length (a subscriber's resync must
wait for it: its catch-up is anchored to these counters).
--etcd makes it a candidate first: it waits until the key
mooncake-store/<cluster-id>/master_view is absent, creates it with the
--advertise value under a 5 s lease in one transaction, keeps the lease
alive, and only then binds and publishes, from sequence 1. Two of them on
127.0.0.2 and 127.0.0.3 with the same ports are a failover on one machine.
SIGINT / SIGTERM make a leader revoke its lease (the standby takes over at
once); a killed one's lease expires after 5 s.
--redis elects through Redis instead, with the semantics of Mooncake's
Redis backend: one Lua script creates the hash
mooncake-store/{<ns>}/master_view (<ns>: the cluster id without a trailing
'/', '{' and '}' made '_') only if it does not exist, with leader_address
(--advertise), view_version (INCR mooncake-store/{<ns>}/master_view_version)
and owner_token, expiring after 5 s; the leader renews it (PEXPIRE) while
owner_token is its own and deletes it under the same check on SIGINT /
SIGTERM. --keep-running stays up
after publishing, until a stop signal, as a master does; --live-every-ms
makes it store a new default-tenant object live-<pid>-<n> (n from 1) every
MS ms meanwhile, one per message, as a pool in use does (a subscriber's
resync starts on the first message of its connection).

Before publishing it can wait for subscribers (--wait-subscribers-ms,
--wait-for-subscriber), so it may be started first. On stderr it prints
{"standby":"<leader>"} while another holds the election key,
{"leader":"<advertise>","view_key":"...","lease":N} once it won (Redis:
"view_version":N in place of "lease"), {"etcd_error":"..."} (Redis:
"redis_error") on the first of a run of failed calls to the store, then
{"listening":"<endpoint>"[,"admin":"http://host:port"]} (the real ports of
tcp://host:* and --admin-port 0) once ready; on stdout, at the end,
{"messages":M,"events":E,"first_sequence":F,"last_sequence":L,
"skipped_sequences":K,"dropped_events":D,"subscribers":S,"elapsed_ms":T
[,"held_keys":H]}
(S: the subscriptions it saw). If it published and no subscriber had
subscribed, it says so on stderr: those messages went to nobody.
SIGINT / SIGTERM stop it early (the summary says "interrupted":true).
Exit status: 0; 1 if the endpoint, the admin port or a file cannot be used,
or if a leader lost its lease ("lost_leadership" in the summary); 2 on bad
flags.

flags:
)";

bool ReadAll(const std::string& path, std::string* out, std::string* error) {
  if (path == "-") {
    out->assign(std::istreambuf_iterator<char>(std::cin), {});
    return true;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = absl::StrFormat("cannot read \"%s\"", path);
    return false;
  }
  out->assign(std::istreambuf_iterator<char>(in), {});
  return true;
}

// Sleeps `ms`, or less if a stop signal arrives; false if it did.
bool SleepUnlessStopped(uint64_t ms) {
  using Clock = std::chrono::steady_clock;
  const auto until = Clock::now() + std::chrono::milliseconds(ms);
  while (true) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left <= 0) return true;
    pollfd fd{StopSignal::fd(), POLLIN, 0};
    const int rc = ::poll(&fd, 1, static_cast<int>(std::min<int64_t>(left, 1 << 30)));
    if (rc > 0) return false;
  }
}

// A workload: a layout and the prompts whose pages (SGLang) or chunks
// (vLLM, when --layout-json holds a descriptor) are stored.
struct Workload {
  std::unique_ptr<const Layout> layout;  // SGLang; null for vLLM
  VllmLayout vllm;                       // vLLM: vllm.layout set
  std::string tenant;
  std::vector<std::vector<uint32_t>> prompts;
  Generation generation = Generation::kFirst;
  bool end_with_cleared = false;
};

// --generation, which the workload and the admin server's listing follow.
bool LoadGeneration(const CommandLine& flags, Generation* generation, std::string* error) {
  uint64_t number = 0;
  if (!flags.GetUint("generation", 1, 2, &number, error)) return false;
  if (number == 0) {
    *error = "--generation is 1 or 2";
    return false;
  }
  *generation = number == 2 ? Generation::kSecond : Generation::kFirst;
  if (flags.Has("end-with-cleared") && *generation != Generation::kSecond) {
    *error = "--end-with-cleared is a second-generation event: give --generation 2 too";
    return false;
  }
  return true;
}

// Every event of the workload, of whichever family its layout is.
void ForEachWorkloadEvent(const Workload& workload, const std::function<void(const ScriptEvent&)>& emit) {
  if (workload.vllm.layout != nullptr) {
    ForEachVllmWorkloadEvent(workload.vllm, workload.prompts, workload.generation, workload.end_with_cleared, emit);
    return;
  }
  ForEachWorkloadEvent(*workload.layout, workload.tenant, workload.prompts, workload.generation,
                       workload.end_with_cleared, emit);
}

// Objects to publish or to hold as restored: a script, or the workload.
struct Source {
  std::vector<ScriptCommand> script;
  bool workload = false;
};

// The events of a source, without its flushes, gaps and pauses (for the
// restored objects, which are never published).
void ForEachEvent(const Source& source, const Workload& workload,
                  const std::function<void(const ScriptEvent&)>& emit) {
  if (source.workload) {
    ForEachWorkloadEvent(workload, emit);
    return;
  }
  for (const ScriptCommand& command : source.script) {
    if (command.kind == ScriptCommand::Kind::kEvent) emit(command.event);
  }
}

bool LoadScript(const std::string& path, std::vector<ScriptCommand>* script, std::string* error, int* exit_code) {
  std::string text;
  if (!ReadAll(path, &text, error)) {
    *exit_code = 1;
    return false;
  }
  if (!ParseScript(text, script, error)) {
    *error = absl::StrFormat("script %s: %s", path, *error);
    return false;
  }
  return true;
}

// The prompts (--prompts, --pages, ...) for the workload's layout, and
// --prompts-out.
bool LoadPrompts(const CommandLine& flags, Workload* workload, std::string* error, int* exit_code) {
  WorkloadSpec prompts;
  uint64_t count = 0, pages = 0, shared = 0, vocab = 0;
  if (!flags.GetUint("prompts", 1, 1 << 24, &count, error) ||
      !flags.GetUint("pages", 16, 1 << 24, &pages, error) ||
      !flags.GetUint("shared-prefix-pages", 0, pages, &shared, error) ||
      !flags.GetUint("seed", 1, UINT64_MAX, &prompts.seed, error) ||
      !flags.GetUint("vocab", 32000, UINT32_MAX, &vocab, error)) {
    return false;
  }
  prompts.prompts = static_cast<uint32_t>(count);
  prompts.pages = static_cast<uint32_t>(pages);
  prompts.shared_prefix_pages = static_cast<uint32_t>(shared);
  prompts.vocab = static_cast<uint32_t>(vocab);
  workload->prompts = workload->vllm.layout != nullptr
                          ? MakeVllmPrompts(prompts, workload->vllm.layout->router_block_size())
                          : MakePrompts(prompts, workload->layout->page_size(), workload->layout->is_eagle());
  if (flags.Has("prompts-out")) {
    std::ofstream out(flags.Get("prompts-out"), std::ios::binary | std::ios::trunc);
    for (size_t p = 0; p < workload->prompts.size() && out; ++p) {
      out << JsonLine(Json{{"prompt", p}, {"tokens", workload->prompts[p]}}) << "\n";
    }
    if (!out) {
      *error = absl::StrFormat("cannot write \"%s\"", flags.Get("prompts-out"));
      *exit_code = 1;
      return false;
    }
  }
  return true;
}

// The SGLang layout flags, which a vLLM descriptor does not take.
constexpr std::string_view kSGLangLayoutFlags[] = {"page-size", "tp",  "pp",         "tp-lcm", "mla", "eagle",
                                                   "split-heads", "tag", "key-prefix", "tenant", "pool"};

bool LoadVllmWorkload(const CommandLine& flags, const std::string& text, Workload* workload, std::string* error) {
  for (std::string_view name : kSGLangLayoutFlags) {
    if (flags.Has(name)) {
      *error = absl::StrFormat("--%s is an SGLang layout flag; --layout-json %s is a vLLM descriptor, which "
                               "names the whole layout",
                               name, flags.Get("layout-json"));
      return false;
    }
  }
  if (!LoadVllmLayout(text, &workload->vllm, error)) {
    *error = absl::StrFormat("--layout-json %s: vLLM descriptor: %s", flags.Get("layout-json"), *error);
    return false;
  }
  return true;
}

bool LoadWorkload(const CommandLine& flags, Workload* workload, std::string* error, int* exit_code) {
  LayoutSpec spec;
  if (flags.Has("layout-json")) {
    std::string text;
    if (!ReadAll(flags.Get("layout-json"), &text, error)) {
      *exit_code = 1;
      return false;
    }
    if (vllm::LooksLikeDescriptor(text)) {
      return LoadVllmWorkload(flags, text, workload, error) && LoadPrompts(flags, workload, error, exit_code);
    }
    // The flags go in first as well, so that --page-size stands in for a
    // page_size the JSON leaves out; applied again below, they override it.
    if (!ApplyLayoutFlags(flags, &spec, error)) return false;
    if (!ParseRuntimeConfigJson(text, &spec, error)) {
      const char* hint = *error == "page_size is missing" ? " (or give --page-size N)" : "";
      *error = absl::StrFormat("--layout-json %s: %s%s", flags.Get("layout-json"), *error, hint);
      return false;
    }
  }
  if (!ApplyLayoutFlags(flags, &spec, error)) return false;
  if (spec.page_size == 0) {
    *error = "--workload needs --page-size N (tokens per page, the router's block size; at least 1), "
             "or \"page_size\" in --layout-json";
    return false;
  }
  std::string why;
  workload->layout = Layout::Create(spec, &why);
  if (workload->layout == nullptr) {
    *error = "layout: " + why;
    return false;
  }
  workload->tenant = spec.tenant_id;
  return LoadPrompts(flags, workload, error, exit_code);
}

// What to publish (--script, --workload or nothing with
// --keep-running) and what to hold as restored (--restore,
// --restore-workload); the workload both may name is loaded once.
bool LoadSources(const CommandLine& flags, Source* published, Source* restored, Workload* workload,
                 std::string* error, int* exit_code) {
  *exit_code = 2;
  if (flags.Has("script") && flags.Has("workload")) {
    *error = "give one of --script and --workload, not both";
    return false;
  }
  if (!flags.Has("script") && !flags.Has("workload") && !flags.Has("keep-running")) {
    *error = "give --script or --workload (or --keep-running to publish nothing)";
    return false;
  }
  if (flags.Has("restore") && flags.Has("restore-workload")) {
    *error = "give one of --restore and --restore-workload, not both";
    return false;
  }
  if (flags.Has("workload") && flags.Has("restore-workload")) {
    *error = "--workload and --restore-workload name the same objects: give one";
    return false;
  }
  if ((flags.Has("restore") || flags.Has("restore-workload")) && !flags.Has("admin-port")) {
    *error = "--restore and --restore-workload need --admin-port (only the admin server shows them)";
    return false;
  }
  if (!LoadGeneration(flags, &workload->generation, error)) return false;
  workload->end_with_cleared = flags.Has("end-with-cleared");
  published->workload = flags.Has("workload");
  restored->workload = flags.Has("restore-workload");
  if (flags.Has("script") && !LoadScript(flags.Get("script"), &published->script, error, exit_code)) return false;
  if (flags.Has("restore") && !LoadScript(flags.Get("restore"), &restored->script, error, exit_code)) return false;
  if (published->workload || restored->workload) return LoadWorkload(flags, workload, error, exit_code);
  return true;
}

bool LoadConfig(const CommandLine& flags, PublisherConfig* config, std::string* error) {
  if (!flags.Has("endpoint") || flags.Get("endpoint").empty()) {
    *error = "--endpoint is required";
    return false;
  }
  if (flags.Has("bind") && flags.Has("connect")) {
    *error = "give --bind or --connect, not both";
    return false;
  }
  config->endpoint = flags.Get("endpoint");
  config->bind = !flags.Has("connect");
  *error = CheckEndpointSyntax("--endpoint", config->endpoint, config->bind ? EndpointUse::kBind : EndpointUse::kConnect);
  if (!error->empty()) return false;
  config->topic = flags.Get("topic");
  config->backend_id = flags.Get("backend-id", "mooncake-master-0");
  uint64_t batch = 0, linger = 0, hwm = 0;
  if (!flags.GetUint("batch-size", PublisherConfig::kMaxBatch, PublisherConfig::kMaxBatch, &batch, error) ||
      !flags.GetUint("linger-ms", 2000, INT32_MAX, &linger, error) ||
      !flags.GetUint("sndhwm", 0, INT32_MAX, &hwm, error) ||
      !flags.GetUint("first-sequence", 1, UINT64_MAX, &config->first_sequence, error) ||
      !flags.GetUint("first-event-id", 1, UINT64_MAX, &config->first_event_id, error) ||
      !flags.GetDouble("rate", 0, &config->rate, error)) {
    return false;
  }
  if (batch == 0) {
    *error = "--batch-size must be at least 1";
    return false;
  }
  config->max_batch = batch;
  config->linger_ms = static_cast<int>(linger);
  config->send_hwm = static_cast<int>(hwm);
  if (flags.Has("timestamp-ms")) {
    int64_t timestamp = 0;
    if (!flags.GetInt("timestamp-ms", 0, INT64_MIN, INT64_MAX, &timestamp, error)) return false;
    config->timestamp_ms = timestamp;
  }
  return true;
}

// The stand-in master's extras: admin server, election, staying up.
struct MasterConfig {
  bool keep_running = false;
  uint64_t live_every_ms = 0;  // 0: no live traffic while staying up
  int admin_port = -1;  // -1: no admin server
  std::string admin_host;
  uint64_t queue_depth = 0;  // 0: no queue (publisher_queue.h)
  double drain_rate = 0;
  std::vector<std::string> etcd_endpoints;  // an election through etcd, or
  std::optional<RedisAddress> redis;        // through Redis; neither: no election
  std::string cluster_id = LeaderElection::kDefaultClusterId;
  std::string advertise;
};

// The host of a tcp:// endpoint, where the admin server listens beside it
// ("*" is every address); 127.0.0.1 for any other transport.
std::string AdminHost(const std::string& endpoint) {
  constexpr std::string_view kTcp = "tcp://";
  if (endpoint.rfind(kTcp, 0) != 0) return "127.0.0.1";
  std::string host = endpoint.substr(kTcp.size(), endpoint.rfind(':') - kTcp.size());
  if (host == "*") return "0.0.0.0";
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host;
}

// "ip:port" with a port from 1 to 65535.
bool IsHostPort(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  uint64_t port = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data() + colon + 1, end, port);
  return ec == std::errc() && ptr == end && port >= 1 && port <= 65535;
}

bool LoadMasterConfig(const CommandLine& flags, const PublisherConfig& publisher, MasterConfig* config,
                      std::string* error) {
  config->keep_running = flags.Has("keep-running");
  if (!flags.GetUint("live-every-ms", 0, INT32_MAX, &config->live_every_ms, error)) return false;
  if (config->live_every_ms > 0 && !config->keep_running) {
    *error = "--live-every-ms is the traffic of a master that stays up: give --keep-running too";
    return false;
  }
  if (!flags.GetUint("queue-depth", 0, UINT32_MAX, &config->queue_depth, error) ||
      !flags.GetDouble("drain-rate", 0, &config->drain_rate, error)) {
    return false;
  }
  if (flags.Has("queue-depth") && config->queue_depth == 0) {
    *error = "--queue-depth must be at least 1";
    return false;
  }
  if (flags.Has("drain-rate") && config->queue_depth == 0) {
    *error = "--drain-rate paces the master's queue: give --queue-depth too";
    return false;
  }
  if (config->queue_depth > 0 && publisher.rate > 0) {
    *error = "--rate paces a publisher without a queue; with --queue-depth give --drain-rate";
    return false;
  }
  if (flags.Has("admin-port")) {
    uint64_t port = 0;
    if (!flags.GetUint("admin-port", 0, 65535, &port, error)) return false;
    config->admin_port = static_cast<int>(port);
    config->admin_host = AdminHost(publisher.endpoint);
  }
  if (!flags.Has("etcd") && !flags.Has("redis")) {
    if (flags.Has("cluster-id") || flags.Has("advertise")) {
      *error = "--cluster-id and --advertise belong to the election: give --etcd or --redis too";
      return false;
    }
    return true;
  }
  if (flags.Has("etcd") && flags.Has("redis")) {
    *error = "give --etcd or --redis, not both: the election runs in one store";
    return false;
  }
  const char* store_flag = flags.Has("etcd") ? "--etcd" : "--redis";
  if (flags.Has("etcd") && !EtcdGateway::ParseEndpoints(flags.Get("etcd"), &config->etcd_endpoints, error)) {
    *error = "--etcd: " + *error;
    return false;
  }
  if (flags.Has("redis")) {
    RedisAddress address;
    if (!ParseRedisUrl(flags.Get("redis"), &address, error)) {
      *error = "--redis: " + *error + " (redis://[:password@]host:port[/db])";
      return false;
    }
    config->redis = std::move(address);
  }
  config->cluster_id = flags.Get("cluster-id", LeaderElection::kDefaultClusterId);
  if (config->cluster_id.empty() || config->cluster_id.find('/') != std::string::npos) {
    *error = absl::StrFormat("--cluster-id \"%s\" must be non-empty and hold no '/'", config->cluster_id);
    return false;
  }
  config->advertise = flags.Get("advertise");
  if (!IsHostPort(config->advertise)) {
    *error = absl::StrFormat("%s needs --advertise IP:PORT (the leader's RPC address), got \"%s\"", store_flag,
                             config->advertise);
    return false;
  }
  return true;
}

// The store the master elects itself through; null: no election.
std::unique_ptr<ElectionBackend> MakeElectionBackend(const MasterConfig& master) {
  if (master.redis.has_value()) {
    return std::make_unique<RedisElection>(*master.redis, master.cluster_id,
                                           std::chrono::seconds(LeaderElection::kTermSeconds));
  }
  if (!master.etcd_endpoints.empty()) {
    return std::make_unique<EtcdElection>(EtcdGateway(master.etcd_endpoints), master.cluster_id,
                                          LeaderElection::kTermSeconds);
  }
  return nullptr;
}

// Prints one JSON line on stderr at once (the tests and the demo read it).
void Announce(const std::string& line) {
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

// Publishes the source once; false if `stopped` cut it short. Every event
// goes through `add`.
bool PublishOnce(const Source& source, const Workload& workload, EventSink& publisher,
                 const std::function<void(const ScriptEvent&)>& add, const std::function<bool()>& stop_requested) {
  // Checking for a stop costs a syscall: do it once per batch's worth.
  size_t since_check = 0;
  const auto stopped = [&] {
    if (++since_check < PublisherConfig::kMaxBatch) return false;
    since_check = 0;
    return stop_requested();
  };
  if (source.workload) {
    bool interrupted = false;
    ForEachWorkloadEvent(workload, [&](const ScriptEvent& event) {
      if (interrupted || (interrupted = stopped())) return;
      add(event);
    });
    return !interrupted;
  }
  for (const ScriptCommand& command : source.script) {
    if (stopped()) return false;
    switch (command.kind) {
      case ScriptCommand::Kind::kEvent: add(command.event); break;
      case ScriptCommand::Kind::kFlush: publisher.Flush(); break;
      case ScriptCommand::Kind::kGap: publisher.Skip(command.count); break;
      case ScriptCommand::Kind::kSleep:
        publisher.Flush();
        if (!SleepUnlessStopped(command.count)) return false;
        break;
    }
  }
  return true;
}

// Waits for a stop signal, or for `lost` to hold (checked every 100 ms),
// calling `tick` every `tick_ms` meanwhile (0: never).
void StayUp(const std::function<bool()>& lost, uint64_t tick_ms, const std::function<void()>& tick) {
  using Clock = std::chrono::steady_clock;
  auto next_tick = Clock::now() + std::chrono::milliseconds(tick_ms);
  while (!lost()) {
    int wait_ms = 100;
    if (tick_ms > 0) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(next_tick - Clock::now()).count();
      if (left <= 0) {
        tick();
        next_tick += std::chrono::milliseconds(tick_ms);
        continue;
      }
      wait_ms = static_cast<int>(std::min<int64_t>(left, wait_ms));
    }
    pollfd fd{StopSignal::fd(), POLLIN, 0};
    if (::poll(&fd, 1, wait_ms) > 0) return;
  }
}

int Main(int argc, char** argv) {
  CommandLine flags;
  std::string error;
  if (!CommandLine::Parse(kFlags, argc, argv, &flags, &error)) {
    std::fprintf(stderr, "sci-publish: %s\n", error.c_str());
    return 2;
  }
  if (PrintedHelpOrVersion(flags, "sci-publish", kUsage, kFlags)) return 0;
  PublisherConfig config;
  MasterConfig master;
  Source published, restored;
  Workload workload;
  int exit_code = 2;
  uint64_t repeat = 1, subscribers = 1, wait_ms = 0;
  if (!LoadConfig(flags, &config, &error) || !LoadMasterConfig(flags, config, &master, &error) ||
      !flags.GetUint("repeat", 1, UINT32_MAX, &repeat, &error) ||
      !flags.GetUint("subscribers", 1, 1 << 20, &subscribers, &error) ||
      !flags.GetUint("wait-subscribers-ms", 0, INT32_MAX, &wait_ms, &error) ||
      !LoadSources(flags, &published, &restored, &workload, &error, &exit_code)) {
    std::fprintf(stderr, "sci-publish: %s%s\n", error.c_str(), exit_code == 2 ? " (see --help)" : "");
    return exit_code;
  }
  if (!StopSignal::Install()) {
    std::fprintf(stderr, "sci-publish: cannot install the signal handlers\n");
    return 1;
  }

  try {
    // What the master holds is ready before the campaign, as a standby's
    // restored state is: a takeover then costs the election and a bind, not
    // the loading of (say) a million keys.
    std::unique_ptr<HeldKeys> held;
    if (master.admin_port >= 0) {
      held = std::make_unique<HeldKeys>(/*per_medium=*/workload.generation == Generation::kSecond);
      ForEachEvent(restored, workload, [&](const ScriptEvent& event) { held->Apply(event); });
    }

    // A candidate binds nothing until it has won: a standby is silent.
    std::unique_ptr<LeaderElection> election;
    if (std::unique_ptr<ElectionBackend> backend = MakeElectionBackend(master)) {
      election = std::make_unique<LeaderElection>(
          std::move(backend), master.advertise, [&](const std::string& what, const std::string& detail) {
            Json line = Json::object();
            SetBytes(line, what, detail);
            if (what == "leader") {
              SetBytes(line, "view_key", election->backend().view_key());
              const auto [term_field, term_id] = election->backend().term();
              line[term_field] = term_id;
            }
            Announce(JsonLine(line));
          });
      if (!election->Campaign(StopSignal::fd())) {
        Announce(JsonLine(Json{{"interrupted", true}, {"leader", false}}));
        return 0;
      }
    }
    const auto leadership_lost = [&] { return election != nullptr && election->lost(); };

    PublisherCounters counters;  // what GET /kv_events/status reports
    std::unique_ptr<AdminServer> admin;
    if (held != nullptr) {
      admin = std::make_unique<AdminServer>(*held, counters);
      if (!admin->Start(master.admin_host, master.admin_port, &error)) {
        std::fprintf(stderr, "sci-publish: %s\n", error.c_str());
        return 1;
      }
    }

    config.second_generation = workload.generation == Generation::kSecond;
    BatchPublisher publisher(config, counters);
    if (!publisher.Open(&error)) {
      std::fprintf(stderr, "sci-publish: %s\n", error.c_str());
      return 1;
    }
    Json listening = Json::object();
    SetBytes(listening, "listening", config.bind ? publisher.BoundEndpoint() : config.endpoint);
    if (admin != nullptr) listening["admin"] = absl::StrFormat("http://%s:%d", master.admin_host, admin->port());
    Announce(JsonLine(listening));

    int subscribed = 0;
    const bool waits = flags.Has("wait-for-subscriber") || flags.Has("wait-subscribers-ms");
    if (!waits) {
      // Those already there (a short poll drains their requests), so that a
      // run that published to nobody can say so at the end.
      subscribed = publisher.WaitForSubscriptions(static_cast<int>(subscribers), std::chrono::milliseconds(1), -1);
    } else {
      const auto timeout = flags.Has("wait-for-subscriber") ? std::chrono::milliseconds(-1)
                                                            : std::chrono::milliseconds(wait_ms);
      subscribed = publisher.WaitForSubscriptions(static_cast<int>(subscribers), timeout, StopSignal::fd());
      if (subscribed < static_cast<int>(subscribers) && !StopSignal::Raised()) {
        std::fprintf(stderr, "sci-publish: %d of %d subscriptions after %d ms; publishing anyway\n", subscribed,
                     static_cast<int>(subscribers), static_cast<int>(wait_ms));
      }
    }

    // With --queue-depth the events wait in the master's queue, and its
    // worker alone sends from here on.
    std::unique_ptr<PublisherQueue> queue;
    if (master.queue_depth > 0) {
      queue = std::make_unique<PublisherQueue>(publisher, counters, master.queue_depth, master.drain_rate);
    }
    EventSink& sink = queue != nullptr ? static_cast<EventSink&>(*queue) : publisher;
    // The held keys change before the event leaves (held_keys.h says why).
    const auto add = [&](const ScriptEvent& event) {
      if (held != nullptr) held->Apply(event);
      sink.Add(event);
    };
    const auto stop_requested = [&] { return StopSignal::Raised() || leadership_lost(); };
    const auto started = std::chrono::steady_clock::now();
    bool interrupted = stop_requested();
    const bool publishes = flags.Has("script") || published.workload;
    for (uint64_t r = 0; publishes && r < repeat && !interrupted; ++r) {
      interrupted = !PublishOnce(published, workload, sink, add, stop_requested);
    }
    if (!interrupted && master.keep_running) {
      sink.Flush();
      const std::string live_prefix = absl::StrFormat("live-%d-", ::getpid());
      uint64_t live = 0;
      StayUp(leadership_lost, master.live_every_ms, [&] {
        ScriptEvent event;
        event.object_key = live_prefix + std::to_string(++live);
        add(event);
        sink.Flush();
      });
      interrupted = !leadership_lost();
    }
    sink.Flush();
    // What is queued still leaves, at the drain rate, unless stopped.
    if (queue != nullptr) queue->Close(/*drain=*/!interrupted);
    if (subscribed == 0 && publisher.sent_any()) {
      subscribed = publisher.WaitForSubscriptions(1, std::chrono::milliseconds(1), -1);
      if (subscribed == 0) {
        std::fprintf(stderr,
                     "sci-publish: no subscriber had subscribed: %d message%s went to nobody "
                     "(--wait-for-subscriber or --wait-subscribers-ms MS waits for one first)\n",
                     static_cast<int>(publisher.messages()), publisher.messages() == 1 ? "" : "s");
      }
    }
    publisher.Close();  // flushes the last batch, then lingers
    if (admin != nullptr) admin->Stop();
    const bool lost = leadership_lost();
    if (election != nullptr && !lost) election->Resign();
    const auto elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);

    Json summary = {{"messages", publisher.messages()},
                    {"events", publisher.events()},
                    {"first_sequence", publisher.first_sequence_sent()},
                    {"last_sequence", publisher.last_sequence_sent()},
                    {"skipped_sequences", publisher.skipped()},
                    {"dropped_events", counters.dropped_events.load()},
                    {"subscribers", subscribed},
                    {"elapsed_ms", elapsed.count()}};
    if (held != nullptr) summary["held_keys"] = held->size();
    if (interrupted && !lost) summary["interrupted"] = true;
    if (lost) summary["lost_leadership"] = true;
    std::printf("%s\n", JsonLine(summary).c_str());
    if (lost) {
      std::fprintf(stderr, "sci-publish: lost the leadership: %s\n", election->lost_reason().c_str());
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sci-publish: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace sci::tools

int main(int argc, char** argv) { return sci::tools::Main(argc, argv); }
