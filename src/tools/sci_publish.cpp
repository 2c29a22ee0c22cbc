// sci-publish: a Mooncake master stand-in. Publishes the production wire
// format byte for byte, from a script of events or from a deterministic
// SGLang HiCache workload. The data source of the demo, the benchmarks and
// the Rust tests.
#include <poll.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "batch_publisher.h"
#include "command_line.h"
#include "json_line.h"
#include "sglang/layout.h"
#include "publish_script.h"
#include "sglang_workload.h"
#include "stop_signal.h"

namespace sci::tools {
namespace {

constexpr FlagSpec kFlags[] = {
    {"endpoint", "E", "where to publish, e.g. tcp://127.0.0.1:5557, tcp://127.0.0.1:* or ipc:///tmp/kv.ipc (required)"},
    {"bind", "", "bind the endpoint (the default; subscribers connect, as to a Mooncake master)"},
    {"connect", "", "connect to the endpoint instead (a subscriber that binds)"},
    {"script", "FILE", "publish the events of FILE (- = stdin); syntax below"},
    {"sglang-workload", "", "publish the objects of SGLang pages (layout and prompt flags below)"},
    {"repeat", "N", "publish the script or workload N times, sequences continuing (default 1)"},
    {"rate", "EV/S", "events per second (default 0: as fast as possible)"},
    {"batch-size", "N", "most events per message, 1..64 (default 64, as the master)"},
    {"wait-subscribers-ms", "MS", "before publishing, wait up to MS for --subscribers subscriptions"},
    {"wait-for-subscriber", "", "before publishing, wait for --subscribers subscriptions, without limit"},
    {"subscribers", "N", "subscriptions to wait for (default 1)"},
    {"linger-ms", "MS", "at the end, wait up to MS for queued messages to leave (default 2000)"},
    {"topic", "T", "topic frame (default empty, as the production publisher)"},
    {"first-sequence", "S", "sequence of the first message (default 1, as a fresh master)"},
    {"timestamp-ms", "MS", "fixed batch timestamp, for reproducible bytes (default: the clock)"},
    {"backend-id", "ID", "backend_id of every event (default mooncake-master-0)"},
    {"sndhwm", "N", "messages queued per subscriber before ZeroMQ drops (default 0: never drop)"},
    {"page-size", "N", "layout: tokens per page (required with --sglang-workload unless in --layout-json)"},
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
    {"layout-json", "FILE", "layout from JSON (docs/sglang-hicache.md field names); the flags above override it"},
    {"prompts", "N", "workload: prompts (default 1)"},
    {"pages", "P", "workload: whole pages per prompt (default 16)"},
    {"shared-prefix-pages", "S", "workload: leading pages every prompt shares (default 0)"},
    {"seed", "X", "workload: seed of the token ids (default 1)"},
    {"vocab", "V", "workload: token ids are below V (default 32000)"},
    {"prompts-out", "FILE", "workload: write the prompts' token ids there, one JSON line per prompt"},
    {"help", "", "print this help"},
};

constexpr char kUsage[] = R"(usage: sci-publish --endpoint E [--bind | --connect] (--script FILE | --sglang-workload ...) [options]

Publishes KV events in the Mooncake master's production format, byte for
byte: frames [topic (empty), 8-byte big-endian sequence, msgpack payload],
sequences from 1, one per message, event ids from 1, at most 64 events per
message. It never drops events (unless --sndhwm says so); `gap` in a script
skips sequence numbers to imitate the master's overflow.

Script (--script FILE, - for stdin), one command per line:
  # comment
  stored <key> [group=<g>] [tenant=<t>] [medium=<m>] [idx=<n>]
  removed <key> [group=<g>] [tenant=<t>] [medium=<m>]
  flush          end the current message here
  gap [n]        end the message, then skip n sequence numbers (default 1)
  sleep <ms>     end the message, then pause
Defaults: no group, tenant "default", medium "cpu". An empty value (medium=)
is nil. %XX stands for any byte (%20 a blank, %25 a '%').

SGLang workload (--sglang-workload): a layout (--page-size, --tp, ... or
--layout-json) and prompts (--prompts, --pages, --shared-prefix-pages,
--seed): stores every object of every distinct page with its group id, as
SGLang HiCache workers would. Token j of prompt p is
SplitMix64(seed*0x9E3779B97F4A7C15 + stream*0xBF58476D1CE4E5B9 + j) % vocab,
stream 0 on the shared prefix and p+1 elsewhere (--prompts-out writes them).

Before publishing it can wait for subscribers (--wait-subscribers-ms,
--wait-for-subscriber), so it may be started first. On stderr it prints
{"listening":"<endpoint>"} (the real port of tcp://host:*) once ready; on
stdout, at the end, {"messages":M,"events":E,"first_sequence":F,
"last_sequence":L,"skipped_sequences":K,"subscribers":S,"elapsed_ms":T}.
SIGINT / SIGTERM stop it early (the summary says "interrupted":true).
Exit status: 0, 1 if the endpoint or a file cannot be used, 2 on bad flags.

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

struct Source {
  std::vector<ScriptCommand> script;  // --script
  bool workload = false;              // --sglang-workload
  std::unique_ptr<const Layout> layout;
  std::string tenant;
  std::vector<std::vector<uint32_t>> prompts;
};

bool LoadSource(const CommandLine& flags, Source* source, std::string* error, int* exit_code) {
  *exit_code = 2;
  if (flags.Has("script") == flags.Has("sglang-workload")) {
    *error = "give exactly one of --script and --sglang-workload";
    return false;
  }
  if (flags.Has("script")) {
    std::string text;
    if (!ReadAll(flags.Get("script"), &text, error)) {
      *exit_code = 1;
      return false;
    }
    if (!ParseScript(text, &source->script, error)) {
      *error = absl::StrFormat("script %s: %s", flags.Get("script"), *error);
      return false;
    }
    return true;
  }
  source->workload = true;
  LayoutSpec spec;
  if (flags.Has("layout-json")) {
    std::string text;
    if (!ReadAll(flags.Get("layout-json"), &text, error)) {
      *exit_code = 1;
      return false;
    }
    if (!ParseLayoutJson(text, &spec, error)) return false;
  }
  if (!ApplyLayoutFlags(flags, &spec, error)) return false;
  if (spec.page_size == 0) {
    *error = "--sglang-workload needs --page-size N (tokens per page, the router's block size; at least 1), "
             "or \"page_size\" in --layout-json";
    return false;
  }
  std::string why;
  source->layout = Layout::Create(spec, &why);
  if (source->layout == nullptr) {
    *error = "layout: " + why;
    return false;
  }
  source->tenant = spec.tenant_id;
  WorkloadSpec workload;
  uint64_t prompts = 0, pages = 0, shared = 0, vocab = 0;
  if (!flags.GetUint("prompts", 1, 1 << 24, &prompts, error) ||
      !flags.GetUint("pages", 16, 1 << 24, &pages, error) ||
      !flags.GetUint("shared-prefix-pages", 0, pages, &shared, error) ||
      !flags.GetUint("seed", 1, UINT64_MAX, &workload.seed, error) ||
      !flags.GetUint("vocab", 32000, UINT32_MAX, &vocab, error)) {
    return false;
  }
  workload.prompts = static_cast<uint32_t>(prompts);
  workload.pages = static_cast<uint32_t>(pages);
  workload.shared_prefix_pages = static_cast<uint32_t>(shared);
  workload.vocab = static_cast<uint32_t>(vocab);
  source->prompts = MakePrompts(workload, source->layout->page_size(), source->layout->is_eagle());
  if (flags.Has("prompts-out")) {
    std::ofstream out(flags.Get("prompts-out"), std::ios::binary | std::ios::trunc);
    for (size_t p = 0; p < source->prompts.size() && out; ++p) {
      out << JsonLine(Json{{"prompt", p}, {"tokens", source->prompts[p]}}) << "\n";
    }
    if (!out) {
      *error = absl::StrFormat("cannot write \"%s\"", flags.Get("prompts-out"));
      *exit_code = 1;
      return false;
    }
  }
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
  config->topic = flags.Get("topic");
  config->backend_id = flags.Get("backend-id", "mooncake-master-0");
  uint64_t batch = 0, linger = 0, hwm = 0;
  if (!flags.GetUint("batch-size", PublisherConfig::kMaxBatch, PublisherConfig::kMaxBatch, &batch, error) ||
      !flags.GetUint("linger-ms", 2000, INT32_MAX, &linger, error) ||
      !flags.GetUint("sndhwm", 0, INT32_MAX, &hwm, error) ||
      !flags.GetUint("first-sequence", 1, UINT64_MAX, &config->first_sequence, error) ||
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

// Publishes the source once; false if a stop signal cut it short.
bool PublishOnce(const Source& source, BatchPublisher& publisher) {
  // Checking for a signal costs a syscall: do it once per batch's worth.
  size_t since_check = 0;
  const auto stopped = [&] {
    if (++since_check < PublisherConfig::kMaxBatch) return false;
    since_check = 0;
    return StopSignal::Raised();
  };
  if (source.workload) {
    bool interrupted = false;
    ForEachStoredObject(*source.layout, source.tenant, source.prompts, [&](const ScriptEvent& event) {
      if (interrupted || (interrupted = stopped())) return;
      publisher.Add(event);
    });
    return !interrupted;
  }
  for (const ScriptCommand& command : source.script) {
    if (stopped()) return false;
    switch (command.kind) {
      case ScriptCommand::Kind::kEvent: publisher.Add(command.event); break;
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

int Main(int argc, char** argv) {
  CommandLine flags;
  std::string error;
  if (!CommandLine::Parse(kFlags, argc, argv, &flags, &error)) {
    std::fprintf(stderr, "sci-publish: %s\n", error.c_str());
    return 2;
  }
  if (flags.Has("help")) {
    std::fprintf(stdout, "%s%s", kUsage, FlagHelp(kFlags).c_str());
    return 0;
  }
  PublisherConfig config;
  Source source;
  int exit_code = 2;
  uint64_t repeat = 1, subscribers = 1, wait_ms = 0;
  if (!LoadConfig(flags, &config, &error) || !flags.GetUint("repeat", 1, UINT32_MAX, &repeat, &error) ||
      !flags.GetUint("subscribers", 1, 1 << 20, &subscribers, &error) ||
      !flags.GetUint("wait-subscribers-ms", 0, INT32_MAX, &wait_ms, &error) ||
      !LoadSource(flags, &source, &error, &exit_code)) {
    std::fprintf(stderr, "sci-publish: %s%s\n", error.c_str(), exit_code == 2 ? " (see --help)" : "");
    return exit_code;
  }
  if (!StopSignal::Install()) {
    std::fprintf(stderr, "sci-publish: cannot install the signal handlers\n");
    return 1;
  }

  try {
    BatchPublisher publisher(config);
    if (!publisher.Open(&error)) {
      std::fprintf(stderr, "sci-publish: %s\n", error.c_str());
      return 1;
    }
    Json listening = Json::object();
    SetBytes(listening, "listening", config.bind ? publisher.BoundEndpoint() : config.endpoint);
    std::fprintf(stderr, "%s\n", JsonLine(listening).c_str());
    std::fflush(stderr);

    int subscribed = 0;
    if (flags.Has("wait-for-subscriber") || flags.Has("wait-subscribers-ms")) {
      const auto timeout = flags.Has("wait-for-subscriber") ? std::chrono::milliseconds(-1)
                                                            : std::chrono::milliseconds(wait_ms);
      subscribed = publisher.WaitForSubscriptions(static_cast<int>(subscribers), timeout, StopSignal::fd());
      if (subscribed < static_cast<int>(subscribers) && !StopSignal::Raised()) {
        std::fprintf(stderr, "sci-publish: %d of %d subscriptions after %d ms; publishing anyway\n", subscribed,
                     static_cast<int>(subscribers), static_cast<int>(wait_ms));
      }
    }

    const auto started = std::chrono::steady_clock::now();
    bool interrupted = StopSignal::Raised();
    for (uint64_t r = 0; r < repeat && !interrupted; ++r) interrupted = !PublishOnce(source, publisher);
    publisher.Close();  // flushes the last batch, then lingers
    const auto elapsed =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);

    Json summary = {{"messages", publisher.messages()},
                    {"events", publisher.events()},
                    {"first_sequence", publisher.first_sequence_sent()},
                    {"last_sequence", publisher.last_sequence_sent()},
                    {"skipped_sequences", publisher.skipped()},
                    {"subscribers", subscribed},
                    {"elapsed_ms", elapsed.count()}};
    if (interrupted) summary["interrupted"] = true;
    std::printf("%s\n", JsonLine(summary).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sci-publish: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace sci::tools

int main(int argc, char** argv) { return sci::tools::Main(argc, argv); }
