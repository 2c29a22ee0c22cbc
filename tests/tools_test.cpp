// sci-publish and sci-tail as processes, as a demo or a Rust test runs
// them: the publisher's bytes are the encoder's, the tail prints what was
// published (gaps, duplicates and malformed messages marked), and an SGLang
// or vLLM workload lands in a live index page by page, chunk by chunk.
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "handles.h"
#include "index/index.h"
#include "sglang/layout.h"
#include "child_process.h"
#include "loopback_publisher.h"
#include "encode/mooncake_encoder.h"
#include "sglang/page_hash.h"
#include "shared_cache_index.h"
#include "feed/subscriber.h"

namespace sci {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::LoopbackPublisher;
using testing::StoredEvent;
using testing::UniqueIpcEndpoint;
using testing::WaitFor;

const std::string kPublish = std::string(SCI_BINARY_DIR) + "/src/tools/sci-publish";
const std::string kTail = std::string(SCI_BINARY_DIR) + "/src/tools/sci-tail";

// The tools run as child processes; every wait on them is bounded.
using Child = testing::ChildProcess;

// A child's stdout as JSON lines.
std::vector<nlohmann::json> OutLines(const Child& child) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(child.out());
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  }
  return lines;
}

// A file under the temp directory, removed when the test is done with it.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& contents)
      : path_((std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()))).string()) {
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << contents;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// ---- the tools' own contracts ----

TEST(Tools, HelpDocumentsEveryFlagAndExitsZero) {
  for (const std::string& tool : {kPublish, kTail}) {
    auto child = Child::Spawn({tool, "--help"});
    ASSERT_NE(child, nullptr);
    ASSERT_TRUE(child->Finish());
    EXPECT_EQ(child->exit_code(), 0) << tool;
    EXPECT_NE(child->out().find("usage: "), std::string::npos) << tool;
    EXPECT_NE(child->out().find("--endpoint"), std::string::npos) << tool;
  }
}

TEST(Tools, ShortHelpExitsZeroAsLongHelpDoes) {
  for (const std::string& tool : {kPublish, kTail}) {
    auto child = Child::Spawn({tool, "-h"});
    ASSERT_NE(child, nullptr);
    ASSERT_TRUE(child->Finish());
    EXPECT_EQ(child->exit_code(), 0) << tool << child->err();
    EXPECT_NE(child->out().find("usage: "), std::string::npos) << tool;
  }
}

TEST(Tools, VersionPrintsTheToolAndTheLibraryVersion) {
  for (const std::string name : {"sci-publish", "sci-tail"}) {
    auto child = Child::Spawn({std::string(SCI_BINARY_DIR) + "/src/tools/" + name, "--version"});
    ASSERT_NE(child, nullptr);
    ASSERT_TRUE(child->Finish());
    EXPECT_EQ(child->exit_code(), 0) << name;
    EXPECT_EQ(child->out(), name + " " + sci_version() + "\n");
  }
}

TEST(Tools, ShortVersionFlagsAnswerAsVersionDoes) {
  for (const std::string name : {"sci-publish", "sci-tail"}) {
    for (const char* flag : {"-v", "-V"}) {
      auto child = Child::Spawn({std::string(SCI_BINARY_DIR) + "/src/tools/" + name, flag});
      ASSERT_NE(child, nullptr);
      ASSERT_TRUE(child->Finish());
      EXPECT_EQ(child->exit_code(), 0) << name << " " << flag << ": " << child->err();
      EXPECT_EQ(child->out(), name + " " + sci_version() + "\n");
    }
  }
}

// --workload publishes either family's workload; --sglang-workload, its 1.2
// name, still works and means the same.
TEST(Tools, TheWorkloadFlagsOldNameIsTheSameFlag) {
  auto publish = Child::Spawn({kPublish, "--endpoint", UniqueIpcEndpoint("sci-tools"), "--sglang-workload"});
  ASSERT_NE(publish, nullptr);
  ASSERT_TRUE(publish->Finish());
  EXPECT_EQ(publish->exit_code(), 2);
  EXPECT_NE(publish->err().find("--workload needs --page-size"), std::string::npos) << publish->err();
  auto help = Child::Spawn({kPublish, "--help"});
  ASSERT_NE(help, nullptr);
  ASSERT_TRUE(help->Finish());
  EXPECT_NE(help->out().find("--sglang-workload"), std::string::npos);
  EXPECT_NE(help->out().find("the 1.2 name of --workload"), std::string::npos);
}

// Published with no subscriber and no wait flag: the messages went to
// nobody, and the tool says so (it still exits 0: it did what it was told).
TEST(Tools, PublishingToNobodySaysSo) {
  const TempFile script("sci-nobody-script", "stored a\nstored b\n");
  auto publish = Child::Spawn({kPublish, "--endpoint", UniqueIpcEndpoint("sci-tools"), "--script", script.path(),
                               "--linger-ms", "0"});
  ASSERT_NE(publish, nullptr);
  ASSERT_TRUE(publish->Finish());
  EXPECT_EQ(publish->exit_code(), 0) << publish->err();
  EXPECT_NE(publish->err().find("no subscriber had subscribed: 1 message went to nobody"), std::string::npos)
      << publish->err();
}

// The help is the prose (script syntax included) and then the flag table:
// a flag's line that points at the syntax points up.
TEST(Tools, PublishHelpPointsAtTheScriptSyntaxWhereItIs) {
  auto child = Child::Spawn({kPublish, "--help"});
  ASSERT_NE(child, nullptr);
  ASSERT_TRUE(child->Finish());
  const std::string& help = child->out();
  const size_t syntax = help.find("Script (--script FILE");
  const size_t flag = help.find("publish the events of FILE");
  ASSERT_NE(syntax, std::string::npos) << help;
  ASSERT_NE(flag, std::string::npos) << help;
  EXPECT_LT(syntax, flag);
  EXPECT_NE(help.find("syntax in \"Script\" above"), std::string::npos);
  EXPECT_EQ(help.find("syntax below"), std::string::npos);
}

TEST(Tools, BadFlagsExitWithTwoAndSayWhy) {
  auto tail = Child::Spawn({kTail, "--endpoint", "ipc:///tmp/x", "--frobnicate"});
  ASSERT_NE(tail, nullptr);
  ASSERT_TRUE(tail->Finish());
  EXPECT_EQ(tail->exit_code(), 2);
  EXPECT_NE(tail->err().find("--frobnicate"), std::string::npos) << tail->err();

  const TempFile script("sci-bad-script", "stored a\nexplode b\n");
  auto publish = Child::Spawn({kPublish, "--endpoint", "ipc:///tmp/x", "--script", script.path()});
  ASSERT_NE(publish, nullptr);
  ASSERT_TRUE(publish->Finish());
  EXPECT_EQ(publish->exit_code(), 2);
  EXPECT_NE(publish->err().find("line 2"), std::string::npos) << publish->err();
}

// --queue-depth: the master's queue. 300 events into a queue of 10 drained
// at 2000 events/s: most are dropped, each consuming a sequence number, and
// the summary's counts agree with the sequence numbers sent; the flags that
// only make sense together are refused together.
TEST(Tools, PublishThroughALaggingQueueDropsTheOldestAndEachDropConsumesASequence) {
  std::string events;
  for (int i = 0; i < 300; ++i) events += "stored q" + std::to_string(i) + "\n";
  const TempFile script("sci-queue-script", events);
  auto publish = Child::Spawn({kPublish, "--endpoint", UniqueIpcEndpoint("sci-tools"), "--script", script.path(),
                               "--queue-depth", "10", "--drain-rate", "2000", "--linger-ms", "0"});
  ASSERT_NE(publish, nullptr);
  ASSERT_TRUE(publish->Finish());
  ASSERT_EQ(publish->exit_code(), 0) << publish->err();
  const std::vector<nlohmann::json> out = OutLines(*publish);
  ASSERT_EQ(out.size(), 1u) << publish->out();
  const nlohmann::json& summary = out[0];
  const uint64_t sent = summary["events"].get<uint64_t>();
  const uint64_t dropped = summary["dropped_events"].get<uint64_t>();
  EXPECT_EQ(sent + dropped, 300u) << summary;
  EXPECT_GT(dropped, 200u) << summary;  // a queue of 10 keeps up with nothing
  EXPECT_EQ(summary["last_sequence"].get<uint64_t>(), summary["messages"].get<uint64_t>() + dropped) << summary;

  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--drain-rate", "100"}, std::vector<std::string>{"--queue-depth", "0"},
        std::vector<std::string>{"--queue-depth", "10", "--rate", "100"}}) {
    std::vector<std::string> argv = {kPublish, "--endpoint", "ipc:///tmp/x", "--script", script.path()};
    argv.insert(argv.end(), bad.begin(), bad.end());
    auto refused = Child::Spawn(argv);
    ASSERT_NE(refused, nullptr);
    ASSERT_TRUE(refused->Finish());
    EXPECT_EQ(refused->exit_code(), 2) << bad[0];
    EXPECT_NE(refused->err().find(bad[0] == "--queue-depth" && bad.size() == 2 ? "--queue-depth must be" : "--"),
              std::string::npos)
        << refused->err();
  }
}

TEST(Tools, PublishToAMalformedEndpointExitsWithTwoAndSaysWhatItMustLookLike) {
  auto publish = Child::Spawn({kPublish, "--endpoint", "bogus://x", "--script", "-"}, "stored a\n");
  ASSERT_NE(publish, nullptr);
  ASSERT_TRUE(publish->Finish());
  EXPECT_EQ(publish->exit_code(), 2);
  EXPECT_NE(publish->err().find("--endpoint \"bogus://x\": transport \"bogus\" is not supported"), std::string::npos)
      << publish->err();
  EXPECT_NE(publish->err().find("tcp://host:port"), std::string::npos) << publish->err();
}

// Issue 27: "127.0.0.1:5557" used to answer "Invalid argument", "http://..."
// "Protocol not supported"; both now say what an endpoint must look like.
TEST(Tools, TailSaysWhatAnEndpointMustLookLike) {
  for (const auto& [endpoint, what] : {std::pair{"127.0.0.1:5557", "has no transport"},
                                       std::pair{"http://127.0.0.1:5557", "transport \"http\" is not supported"}}) {
    for (const std::vector<std::string>& mode :
         {std::vector<std::string>{}, std::vector<std::string>{"--snapshot-url", "http://127.0.0.1:1/get_all_keys"}}) {
      std::vector<std::string> args = {kTail, "--endpoint", endpoint};
      args.insert(args.end(), mode.begin(), mode.end());
      auto tail = Child::Spawn(args);
      ASSERT_NE(tail, nullptr);
      ASSERT_TRUE(tail->Finish());
      EXPECT_EQ(tail->exit_code(), 2) << endpoint;
      EXPECT_NE(tail->err().find(what), std::string::npos) << tail->err();
      EXPECT_NE(tail->err().find("tcp://host:port or ipc://path"), std::string::npos) << tail->err();
    }
  }
}

// --admin-port has a default; only --event-port can be missing.
TEST(Tools, TailEtcdWithoutEventPortNamesEventPort) {
  auto tail = Child::Spawn({kTail, "--etcd", "http://127.0.0.1:1"});
  ASSERT_NE(tail, nullptr);
  ASSERT_TRUE(tail->Finish());
  EXPECT_EQ(tail->exit_code(), 2);
  EXPECT_NE(tail->err().find("--etcd needs --event-port PORT"), std::string::npos) << tail->err();
  EXPECT_EQ(tail->err().find("--admin-port"), std::string::npos) << tail->err();
}

TEST(Tools, WorkloadWithoutPageSizeNamesTheMissingFlag) {
  auto publish = Child::Spawn({kPublish, "--endpoint", UniqueIpcEndpoint("sci-tools"), "--workload", "--tp", "8"});
  ASSERT_NE(publish, nullptr);
  ASSERT_TRUE(publish->Finish());
  EXPECT_EQ(publish->exit_code(), 2);
  EXPECT_NE(publish->err().find("--workload needs --page-size"), std::string::npos) << publish->err();
}

TEST(Tools, LayoutJsonRejectsNegativeFractionalAndOutOfRangeNumbers) {
  const struct {
    const char* json;
    const char* named;  // what the message must name
  } cases[] = {
      {R"({"page_size": -64, "tp_size": 8})", "page_size must be an unsigned 32-bit integer, got -64"},
      {R"({"page_size": 64, "tp_size": 4294967296})", "tp_size must be an unsigned 32-bit integer, got 4294967296"},
      {R"({"page_size": 64.5})", "page_size must be an unsigned 32-bit integer, got 64.5"},
      {R"({"page_size": 64, "pp_size": "2"})", "pp_size must be an unsigned 32-bit integer, got \"2\""},
      {R"({"page_size": 64, "pools": [{"suffixes": ["__k"]},
           {"suffixes": ["__swa"], "hit_policy": "trailing_pages", "trailing_pages": -1}]})",
       "pools[1].trailing_pages must be an unsigned 32-bit integer, got -1"},
  };
  for (const auto& c : cases) {
    const TempFile layout("sci-bad-layout", c.json);
    auto publish = Child::Spawn({kPublish, "--endpoint", UniqueIpcEndpoint("sci-tools"), "--workload",
                                 "--layout-json", layout.path()});
    ASSERT_NE(publish, nullptr);
    ASSERT_TRUE(publish->Finish());
    EXPECT_EQ(publish->exit_code(), 2) << c.json;
    EXPECT_NE(publish->err().find(c.named), std::string::npos) << c.json << "\n" << publish->err();
    EXPECT_NE(publish->err().find("--layout-json " + layout.path() + ": "), std::string::npos) << publish->err();
  }
}

TEST(Tools, TailThatNeverConnectsSaysSoAndExitsThree) {
  // Nothing is bound at this endpoint: ZeroMQ retries forever, so only the
  // tool's own connect deadline can end it.
  const std::string endpoint = UniqueIpcEndpoint("sci-tools-nobody");
  auto tail = Child::Spawn({kTail, "--endpoint", endpoint, "--connect-timeout-ms", "200"});
  ASSERT_NE(tail, nullptr);
  ASSERT_TRUE(tail->Finish());
  EXPECT_EQ(tail->exit_code(), 3);
  EXPECT_NE(tail->err().find("never connected to \"" + endpoint + "\""), std::string::npos) << tail->err();
  const std::vector<nlohmann::json> lines = OutLines(*tail);
  ASSERT_EQ(lines.size(), 1u) << tail->out();
  EXPECT_EQ(lines[0]["stats"]["subscriber_connects"], 0);
}

// ---- sci-publish | sci-tail ----

TEST(Tools, TailPrintsTheScriptedEventsAndAGapMarker) {
  const std::string endpoint = UniqueIpcEndpoint("sci-tools");
  auto tail = Child::Spawn({kTail, "--endpoint", endpoint, "--max-messages", "3", "--timeout-ms", "20000"});
  ASSERT_NE(tail, nullptr);
  const std::string script =
      "# a page of two objects, one removal, then the queue overflows\n"
      "stored page-1_0_k group=g1\n"
      "stored page-1_0_v group=g1 medium=disk\n"
      "flush\n"
      "removed page-1_0_k group=g1\n"
      "gap 3\n"
      "stored other tenant=tenant-a\n";
  auto publish = Child::Spawn(
      {kPublish, "--endpoint", endpoint, "--script", "-", "--wait-subscribers-ms", "20000"}, script);
  ASSERT_NE(publish, nullptr);
  ASSERT_TRUE(publish->Finish());
  ASSERT_EQ(publish->exit_code(), 0) << publish->err();
  const nlohmann::json summary = OutLines(*publish).at(0);
  EXPECT_EQ(summary["messages"], 3);
  EXPECT_EQ(summary["events"], 4);
  EXPECT_EQ(summary["first_sequence"], 1);
  EXPECT_EQ(summary["last_sequence"], 6);  // 2, then 3 skipped
  EXPECT_EQ(summary["skipped_sequences"], 3);
  EXPECT_EQ(summary["subscribers"], 1);

  ASSERT_TRUE(tail->Finish());
  ASSERT_EQ(tail->exit_code(), 0) << tail->err();
  const std::vector<nlohmann::json> lines = OutLines(*tail);
  ASSERT_EQ(lines.size(), 4u) << tail->out();

  EXPECT_EQ(lines[0]["sequence"], 1);
  EXPECT_EQ(lines[0]["format"], "mooncake");
  EXPECT_EQ(lines[0]["topic"], "");
  ASSERT_EQ(lines[0]["events"].size(), 2u);
  EXPECT_EQ(lines[0]["events"][0]["type"], "stored");
  EXPECT_EQ(lines[0]["events"][0]["object_key"], "page-1_0_k");
  EXPECT_EQ(lines[0]["events"][0]["group_id"], "g1");
  EXPECT_EQ(lines[0]["events"][0]["tenant_id"], "default");
  EXPECT_EQ(lines[0]["events"][0]["medium"], "cpu");
  EXPECT_EQ(lines[0]["events"][1]["medium"], "disk");
  // Production messages also show the fields the index does not use.
  EXPECT_EQ(lines[0]["events"][0]["event_id"], 1);
  EXPECT_EQ(lines[0]["events"][1]["event_id"], 2);
  EXPECT_FALSE(lines[0].contains("gap"));

  EXPECT_EQ(lines[1]["sequence"], 2);
  EXPECT_EQ(lines[1]["events"][0]["type"], "removed");
  EXPECT_EQ(lines[1]["events"][0]["event_id"], 3);
  EXPECT_FALSE(lines[1].contains("gap"));

  EXPECT_EQ(lines[2]["sequence"], 6);
  EXPECT_EQ(lines[2]["gap"], true);
  EXPECT_EQ(lines[2]["events"][0]["tenant_id"], "tenant-a");
  // The batch that revealed the gap may precede the lost events: its store is withheld.
  EXPECT_EQ(lines[2]["stores_withheld"], 1);
  EXPECT_FALSE(lines[0].contains("stores_withheld"));

  const nlohmann::json& stats = lines[3]["stats"];
  EXPECT_EQ(stats["messages_received"], 3);
  EXPECT_EQ(stats["sequence_gaps"], 1);
  EXPECT_EQ(stats["stores_withheld"], 1);
  EXPECT_EQ(stats["keys"], 0);  // the gap cleared the first page; the other store was withheld
  EXPECT_EQ(stats["last_sequence"], 6);
  EXPECT_EQ(stats["subscriber_connects"], 1);
}

TEST(Tools, TailMarksDuplicatesAndMalformedMessagesAndEscapesAnyBytes) {
  LoopbackPublisher publisher(UniqueIpcEndpoint("sci-tools"));
  auto tail = Child::Spawn({kTail, "--endpoint", publisher.endpoint(), "--max-messages", "4", "--timeout-ms", "20000"});
  ASSERT_NE(tail, nullptr);
  ASSERT_TRUE(publisher.AwaitSubscription());

  const std::string odd_key("quote\" back\\ nul\0 ff\xff", 21);
  const MooncakeEvent first[] = {StoredEvent(1, odd_key, "g\n1")};
  publisher.SendBatch(1, first);
  publisher.SendBatch(1, first);  // the same batch again
  publisher.SendFrames({"", "not eight bytes", "x"});
  const MooncakeEvent second[] = {StoredEvent(2, "plain")};
  publisher.SendBatch(2, second);
  ASSERT_TRUE(tail->Finish());
  ASSERT_EQ(tail->exit_code(), 0) << tail->err();

  const std::vector<nlohmann::json> lines = OutLines(*tail);
  ASSERT_EQ(lines.size(), 5u) << tail->out();
  const nlohmann::json& event = lines[0]["events"][0];
  // Lossy text, exact hex: 0xff is not UTF-8.
  EXPECT_EQ(event["object_key_hex"].get<std::string>(), "71756f746522206261636b5c206e756c00206666ff");
  EXPECT_EQ(event["object_key"].get<std::string>().substr(0, 14), std::string("quote\" back\\ n"));
  EXPECT_EQ(event["group_id"], "g\n1");  // valid UTF-8: exact, no hex
  EXPECT_FALSE(event.contains("group_id_hex"));
  EXPECT_EQ(lines[1]["duplicate"], true);
  EXPECT_TRUE(lines[2].contains("malformed")) << lines[2];
  EXPECT_EQ(lines[2]["frames"], 3);
  EXPECT_EQ(lines[3]["sequence"], 2);
  EXPECT_FALSE(lines[3].contains("gap"));  // a malformed message consumes no sequence
  EXPECT_EQ(lines[4]["stats"]["malformed_messages"], 1);
  EXPECT_EQ(lines[4]["stats"]["duplicate_batches"], 1);
}

TEST(Tools, TailStopsOnSigtermWithItsStats) {
  LoopbackPublisher publisher(UniqueIpcEndpoint("sci-tools"));
  auto tail = Child::Spawn({kTail, "--endpoint", publisher.endpoint()});
  ASSERT_NE(tail, nullptr);
  // Subscribed means its handlers are installed and it is in its loop.
  ASSERT_TRUE(publisher.AwaitSubscription());
  ASSERT_EQ(::kill(tail->pid(), SIGTERM), 0);
  ASSERT_TRUE(tail->Finish());
  EXPECT_EQ(tail->exit_code(), 0) << tail->err();
  const std::vector<nlohmann::json> lines = OutLines(*tail);
  ASSERT_EQ(lines.size(), 1u) << tail->out();
  EXPECT_EQ(lines[0]["stats"]["messages_received"], 0);
}

// ---- the bytes on the wire ----

// A raw subscriber to `endpoint`, to compare what a publisher sent byte for byte.
struct RawSubscriber {
  explicit RawSubscriber(const std::string& endpoint) : sub(context, zmq::socket_type::sub) {
    sub.set(zmq::sockopt::linger, 0);
    sub.set(zmq::sockopt::subscribe, "");
    sub.set(zmq::sockopt::reconnect_ivl, 20);
    sub.connect(endpoint);
  }

  // Up to `count` messages (each as its frames), or fewer after 20 s.
  std::vector<std::vector<std::string>> Receive(size_t count) {
    std::vector<std::vector<std::string>> received;
    const auto deadline = Clock::now() + 20s;
    while (received.size() < count && Clock::now() < deadline) {
      zmq_pollitem_t item{sub.handle(), 0, ZMQ_POLLIN, 0};
      if (zmq::poll(&item, 1, 100ms) == 0) continue;
      std::vector<std::string> frames;
      bool more = true;
      while (more) {
        zmq::message_t part;
        (void)sub.recv(part);
        frames.push_back(part.to_string());
        more = part.more();
      }
      received.push_back(std::move(frames));
    }
    return received;
  }

  zmq::context_t context{1};
  zmq::socket_t sub;
};

TEST(Tools, PublishedBytesMatchTheEncoder) {
  const std::string endpoint = UniqueIpcEndpoint("sci-tools");
  RawSubscriber subscriber(endpoint);

  // 70 events: one full batch of 64 and one of 6; then a removal after a gap.
  std::string script;
  std::vector<std::string> keys;
  for (int i = 0; i < 70; ++i) {
    keys.push_back("k" + std::to_string(i));
    script += "stored " + keys.back() + " group=g" + std::to_string(i / 2) + (i == 5 ? " tenant=t-b medium=disk idx=7" : "") + "\n";
  }
  script += "gap\nremoved k3 group=g1 medium=\n";
  const TempFile script_file("sci-bytes-script", script);
  constexpr int64_t kTimestamp = 1796008706344;
  auto publish = Child::Spawn({kPublish, "--endpoint", endpoint, "--script", script_file.path(), "--timestamp-ms",
                               std::to_string(kTimestamp), "--wait-subscribers-ms", "20000"});
  ASSERT_NE(publish, nullptr);

  const std::vector<std::vector<std::string>> received = subscriber.Receive(3);
  ASSERT_TRUE(publish->Finish());
  ASSERT_EQ(publish->exit_code(), 0) << publish->err();
  ASSERT_EQ(received.size(), 3u);

  std::vector<std::string> groups;
  for (int i = 0; i < 70; ++i) groups.push_back("g" + std::to_string(i / 2));
  std::vector<MooncakeEvent> events;
  for (int i = 0; i < 70; ++i) events.push_back(StoredEvent(static_cast<uint64_t>(i) + 1, keys[i], groups[i]));
  events[5].tenant_id = "t-b";
  events[5].medium = "disk";
  events[5].base_block_idx = 7;
  MooncakeEvent removal = testing::RemovedEvent(71, "k3", "g1");
  removal.medium = {};

  const auto expect_message = [&](const std::vector<std::string>& got, uint64_t sequence,
                                  std::span<const MooncakeEvent> batch) {
    const std::vector<std::string> want = LoopbackPublisher::EncodeBatch(sequence, batch, "", kTimestamp);
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(got[0], want[0]) << "topic of " << sequence;
    EXPECT_EQ(got[1], want[1]) << "sequence frame of " << sequence;
    EXPECT_EQ(got[2], want[2]) << "payload of " << sequence;
  };
  expect_message(received[0], 1, std::span(events).subspan(0, 64));
  expect_message(received[1], 2, std::span(events).subspan(64, 6));
  expect_message(received[2], 4, std::span(&removal, 1));
}

// ---- the SGLang workload, end to end ----

TEST(Tools, SglangWorkloadMakesEveryPageOfEveryPromptHit) {
  sci_index* handle = nullptr;
  ASSERT_EQ(sci_index_new(nullptr, &handle), SCI_OK);
  std::unique_ptr<sci_index, void (*)(sci_index*)> owned(handle, sci_index_free);
  Index& index = handle->impl;

  const TempFile prompts_file("sci-prompts", "");
  const std::string& prompts_path = prompts_file.path();
  // tp 4 with a tag: 8 keys a page. 3 prompts of 10 pages sharing 4: 4 + 3 * 6 distinct pages.
  auto publish = Child::Spawn({kPublish, "--endpoint", "tcp://127.0.0.1:*", "--workload", "--page-size",
                               "16", "--tp", "4", "--tag", "llama", "--prompts", "3", "--pages", "10",
                               "--shared-prefix-pages", "4", "--seed", "42", "--prompts-out", prompts_path,
                               "--wait-subscribers-ms", "20000", "--batch-size", "50"});
  ASSERT_NE(publish, nullptr);
  // A tcp port chosen by the system: the publisher says which.
  std::string listening;
  ASSERT_TRUE(publish->ReadStderrLine(&listening)) << publish->err();
  SubscriberOptions options;
  options.endpoint = nlohmann::json::parse(listening)["listening"].get<std::string>();
  // sci-publish exits once it has published: the disconnect must not clear
  // what it sent (the default would: subscriber_test).
  options.reconnect_policy = ReconnectPolicy::kTrustEventIds;
  ASSERT_EQ(options.endpoint.rfind("tcp://127.0.0.1:", 0), 0u) << options.endpoint;
  SubscriberError code = SubscriberError::kNone;
  std::string error;
  std::unique_ptr<Subscriber> subscriber = Subscriber::Start(index, options, &code, &error);
  ASSERT_NE(subscriber, nullptr) << error;

  ASSERT_TRUE(publish->Finish());
  ASSERT_EQ(publish->exit_code(), 0) << publish->err();
  const nlohmann::json summary = OutLines(*publish).at(0);
  constexpr uint64_t kDistinctPages = 4 + 3 * 6;
  EXPECT_EQ(summary["events"], kDistinctPages * 8);
  EXPECT_EQ(summary["messages"], (kDistinctPages * 8 + 49) / 50);
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().events_applied == kDistinctPages * 8; }));
  EXPECT_EQ(index.GetStats().keys, kDistinctPages * 8);
  EXPECT_EQ(index.GetStats().groups, kDistinctPages);

  // The prompts the publisher wrote, asked through the router's query.
  sci_layout_spec spec{};
  spec.struct_size = sizeof spec;
  spec.page_size = 16;
  spec.tp_size = 4;
  spec.extra_backend_tag = sci_str{"llama", 5};
  sci_layout* layout = nullptr;
  ASSERT_EQ(sci_layout_new(&spec, &layout), SCI_OK) << sci_last_error();
  std::ifstream in(prompts_path);
  int prompts = 0;
  for (std::string line; std::getline(in, line); ++prompts) {
    const std::vector<uint32_t> tokens = nlohmann::json::parse(line)["tokens"].get<std::vector<uint32_t>>();
    ASSERT_EQ(tokens.size(), 160u);
    std::vector<uint8_t> hits(10);
    sci_page_result result{};
    result.struct_size = sizeof result;
    ASSERT_EQ(sci_index_check_pages(handle, layout, tokens.data(), tokens.size(), 16, hits.data(), hits.size(),
                                    &result),
              SCI_OK)
        << sci_last_error();
    EXPECT_EQ(result.n_pages, 10u);
    EXPECT_EQ(result.total_hits, 10u) << "prompt " << prompts;
    EXPECT_EQ(result.prefix_hits, 10u);
  }
  EXPECT_EQ(prompts, 3);
  sci_layout_free(layout);
}

// ---- the vLLM workload, end to end ----

// A hybrid model: full attention in chunks of 16 tokens on two TP ranks,
// Mamba state in chunks of 32 on one, so a prefix needs both groups and is
// a multiple of 32 tokens.
constexpr char kHybridDescriptor[] = R"({"schema_version": 1,
 "hash": {"algorithm": "sha256", "digest_encoding": "hex", "seed_policy": "pythonhashseed-0", "key_separator": "@"},
 "main_event_block_size": 16, "coordinator": {"lcm_block_size": 32},
 "groups": [{"group_id": 0, "kind": "full_attention", "block_size": 16, "hash_block_size": 16,
             "key_prefixes": ["prod@M@tp_rank:0@pcp0@dcp0@pp_rank:0@group:0",
                              "prod@M@tp_rank:1@pcp0@dcp0@pp_rank:0@group:0"]},
            {"group_id": 1, "kind": "mamba", "block_size": 32, "hash_block_size": 16, "mamba_cache_mode": "align",
             "key_prefixes": ["prod@M@tp_rank:0@pcp0@dcp0@pp_rank:0@group:1"]}]})";

TEST(Tools, VllmWorkloadMakesDynamosAnswerTheWholePromptForPublishedPrompts) {
  sci_index* handle = nullptr;
  ASSERT_EQ(sci_index_new(nullptr, &handle), SCI_OK);
  std::unique_ptr<sci_index, void (*)(sci_index*)> owned(handle, sci_index_free);
  Index& index = handle->impl;

  const TempFile descriptor("sci-vllm-descriptor", kHybridDescriptor);
  const TempFile prompts_file("sci-vllm-prompts", "");
  // 3 prompts of 10 blocks sharing 4 (and the token after them). Full
  // attention: 4 + 3 * 6 chunks, 2 keys each; Mamba: chunks end at 32, 64
  // (shared), 96, 128, 160: 2 + 3 * 3 chunks, 1 key each.
  constexpr uint64_t kEvents = (4 + 3 * 6) * 2 + (2 + 3 * 3);
  auto publish = Child::Spawn({kPublish, "--endpoint", "tcp://127.0.0.1:*", "--workload", "--layout-json",
                               descriptor.path(), "--prompts", "3", "--pages", "10", "--shared-prefix-pages", "4",
                               "--seed", "42", "--prompts-out", prompts_file.path(), "--wait-subscribers-ms",
                               "20000"});
  ASSERT_NE(publish, nullptr);
  std::string listening;
  ASSERT_TRUE(publish->ReadStderrLine(&listening)) << publish->err();
  SubscriberOptions options;
  options.endpoint = nlohmann::json::parse(listening)["listening"].get<std::string>();
  options.reconnect_policy = ReconnectPolicy::kTrustEventIds;  // sci-publish exits when done
  SubscriberError code = SubscriberError::kNone;
  std::string error;
  std::unique_ptr<Subscriber> subscriber = Subscriber::Start(index, options, &code, &error);
  ASSERT_NE(subscriber, nullptr) << error;
  ASSERT_TRUE(publish->Finish());
  ASSERT_EQ(publish->exit_code(), 0) << publish->err();
  EXPECT_EQ(OutLines(*publish).at(0)["events"], kEvents);
  ASSERT_TRUE(WaitFor([&] { return index.GetStats().events_applied == kEvents; }));
  EXPECT_EQ(index.GetStats().keys, kEvents);

  // The router reads the same descriptor and recomputes the chains.
  sci_layout* layout = nullptr;
  ASSERT_EQ(sci_layout_new_json(sci_str{kHybridDescriptor, std::strlen(kHybridDescriptor)}, &layout), SCI_OK)
      << sci_last_error();
  std::unique_ptr<sci_layout, void (*)(sci_layout*)> owned_layout(layout, sci_layout_free);
  const auto prefix_blocks = [&](const std::vector<uint32_t>& tokens) {
    size_t blocks = 99;
    EXPECT_EQ(sci_index_check_prefix(handle, layout, tokens.data(), tokens.size(), 16, &blocks), SCI_OK)
        << sci_last_error();
    return blocks;
  };
  std::ifstream in(prompts_file.path());
  std::vector<std::vector<uint32_t>> prompts;
  for (std::string line; std::getline(in, line);) {
    prompts.push_back(nlohmann::json::parse(line)["tokens"].get<std::vector<uint32_t>>());
    ASSERT_EQ(prompts.back().size(), 10u * 16 + 1) << "one token more than the blocks";
    EXPECT_EQ(prefix_blocks(prompts.back()), 10u) << "prompt " << prompts.size() - 1;
  }
  ASSERT_EQ(prompts.size(), 3u);
  // Cut after 9 blocks and a token: the longest multiple of 32 tokens is 8 blocks.
  EXPECT_EQ(prefix_blocks(std::vector<uint32_t>(prompts[0].begin(), prompts[0].begin() + 9 * 16 + 1)), 8u);
  // A prompt nobody published: its first block already differs.
  std::vector<uint32_t> unpublished = prompts[0];
  unpublished[0] ^= 1;
  EXPECT_EQ(prefix_blocks(unpublished), 0u);
}

// ---- the second generation (docs/wire-formats.md, section 5) ----

// Two sci-tails, one per residency rule, on one second-generation script:
// a memory eviction that keeps the disk copy leaves the key present under
// the per-medium rule alone, and a `cleared` empties its tenant alone. The
// tenants hold 2, 3 and 1 keys, so clearing the wrong one, all of them or
// none gives another count.
TEST(Tools, SecondGenerationScriptUnderBothResidencyRules) {
  const std::string endpoint = UniqueIpcEndpoint("sci-tools-gen2");
  const std::vector<std::string> rules = {"per-medium", "object"};
  std::vector<std::unique_ptr<Child>> tails;
  for (const std::string& rule : rules) {
    tails.push_back(Child::Spawn({kTail, "--endpoint", endpoint, "--residency", rule, "--max-messages", "4",
                                  "--timeout-ms", "20000"}));
    ASSERT_NE(tails.back(), nullptr);
  }
  const std::string script =
      "stored evicted_k group=g medium=cpu\n"
      "stored evicted_k group=g medium=disk\n"
      "stored kept\n"
      "flush\n"
      "removed evicted_k group=g medium=cpu  # the disk copy stays\n"
      "flush\n"
      "stored a1 tenant=tenant-a\n"
      "stored a2 tenant=tenant-a medium=disk\n"
      "stored a3 tenant=tenant-a medium=\n"
      "stored b1 tenant=tenant-b\n"
      "flush\n"
      "cleared tenant=tenant-a\n";
  auto publish = Child::Spawn({kPublish, "--endpoint", endpoint, "--script", "-", "--generation", "2",
                               "--subscribers", "2", "--wait-subscribers-ms", "20000"},
                              script);
  ASSERT_NE(publish, nullptr);
  ASSERT_TRUE(publish->Finish());
  ASSERT_EQ(publish->exit_code(), 0) << publish->err();
  EXPECT_EQ(OutLines(*publish).at(0)["events"], 9);

  const std::map<std::string, uint64_t> keys_after = {{"per-medium", 3}, {"object", 2}};
  for (size_t t = 0; t < tails.size(); ++t) {
    SCOPED_TRACE(rules[t]);
    ASSERT_TRUE(tails[t]->Finish());
    ASSERT_EQ(tails[t]->exit_code(), 0) << tails[t]->err();
    const std::vector<nlohmann::json> lines = OutLines(*tails[t]);
    ASSERT_EQ(lines.size(), 5u) << tails[t]->out();
    const nlohmann::json& cleared = lines[3]["events"];
    ASSERT_EQ(cleared.size(), 1u);
    EXPECT_EQ(cleared[0]["type"], "tenant_cleared");
    EXPECT_EQ(cleared[0]["tenant_id"], "tenant-a");
    EXPECT_EQ(cleared[0]["object_key"], "");
    EXPECT_EQ(cleared[0]["event_id"], 9);
    const nlohmann::json& stats = lines[4]["stats"];
    EXPECT_EQ(stats["tenant_clears"], 1);
    EXPECT_EQ(stats["sequence_gaps"], 0);
    EXPECT_EQ(stats["keys"], keys_after.at(rules[t]));
    EXPECT_EQ(stats["medium_removals_kept"], rules[t] == "per-medium" ? 1 : 0);
    // Tiers: evicted_k is on disk only, kept and b1 on cpu; the object rule
    // keeps no media (the slowest tier).
    EXPECT_EQ(stats["keys_tier0"], rules[t] == "per-medium" ? 2 : 0);
    EXPECT_EQ(stats["keys_tier1"], rules[t] == "per-medium" ? 1 : 2);
  }
}

TEST(Tools, TailRefusesATierMapThatIsNotOne) {
  auto tail = Child::Spawn({kTail, "--endpoint", "ipc:///tmp/sci-tools-no-such", "--medium-tiers", "cpu=0,disk=2"});
  ASSERT_NE(tail, nullptr);
  ASSERT_TRUE(tail->Finish());
  EXPECT_EQ(tail->exit_code(), 2);
  EXPECT_NE(tail->err().find("--medium-tiers: tier 1 has no medium"), std::string::npos) << tail->err();
}

// --generation 2 writes the second-generation publisher's field order
// (mooncake_encoder_test checks the encoder against its capture), and a
// script's `cleared` as that publisher's key-less event.
TEST(Tools, SecondGenerationBytesMatchTheEncoder) {
  const std::string endpoint = UniqueIpcEndpoint("sci-tools-gen2-bytes");
  RawSubscriber subscriber(endpoint);
  constexpr int64_t kTimestamp = 1796138256390;
  auto publish = Child::Spawn({kPublish, "--endpoint", endpoint, "--script", "-", "--generation", "2",
                               "--timestamp-ms", std::to_string(kTimestamp), "--wait-subscribers-ms", "20000"},
                              "stored k1 group=g medium=disk idx=3\nremoved k1 group=g\ncleared tenant=t-a\n");
  ASSERT_NE(publish, nullptr);
  const std::vector<std::vector<std::string>> received = subscriber.Receive(1);
  ASSERT_TRUE(publish->Finish());
  ASSERT_EQ(publish->exit_code(), 0) << publish->err();
  ASSERT_EQ(received.size(), 1u);
  ASSERT_EQ(received[0].size(), 3u);

  std::vector<MooncakeEvent> events(3);
  for (size_t i = 0; i < events.size(); ++i) {
    events[i].event_id = i + 1;
    events[i].second_generation = true;
    events[i].object_key = "k1";
    events[i].group_id = "g";
  }
  events[0].medium = "disk";
  events[0].base_block_idx = 3;  // the second generation writes nil
  events[1].stored = false;
  events[1].medium = "cpu";
  events[2] = MooncakeEvent{};
  events[2].event_id = 3;
  events[2].cleared = true;
  events[2].tenant_id = "t-a";
  std::string payload;
  EncodeMooncakePayload(kTimestamp, events, &payload);
  EXPECT_EQ(received[0][2], payload);
}

TEST(Tools, TailRefusesAnUnknownResidencyRule) {
  auto tail = Child::Spawn({kTail, "--endpoint", "ipc:///tmp/x", "--residency", "per-object"});
  ASSERT_NE(tail, nullptr);
  ASSERT_TRUE(tail->Finish());
  EXPECT_EQ(tail->exit_code(), 2);
  EXPECT_NE(tail->err().find("per-object"), std::string::npos) << tail->err();
}

TEST(Tools, PublishRefusesAnUnknownGenerationAndAClearWithoutTheSecond) {
  for (const std::vector<std::string>& extra : {std::vector<std::string>{"--generation", "3"},
                                                std::vector<std::string>{"--generation", "0"},
                                                std::vector<std::string>{"--end-with-cleared"}}) {
    std::vector<std::string> argv = {kPublish, "--endpoint", "ipc:///tmp/x", "--workload", "--page-size", "4"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto publish = Child::Spawn(argv);
    ASSERT_NE(publish, nullptr);
    ASSERT_TRUE(publish->Finish());
    EXPECT_EQ(publish->exit_code(), 2) << extra[0];
    EXPECT_NE(publish->err().find("generation"), std::string::npos) << publish->err();
  }
}

// The second-generation workload (sci-publish --help, "Generations") into
// two live indexes, one per rule: page n of the one prompt is present under
// the per-medium rule unless deleted (n%5==4), and under the object rule
// unless deleted or evicted from memory (n%4==0) and not upserted after
// (n%3==2). Then `--end-with-cleared` empties the tenant under both.
TEST(Tools, SecondGenerationWorkloadUnderBothResidencyRules) {
  constexpr uint32_t kPages = 13;
  const std::vector<uint32_t> rules = {SCI_RESIDENCY_PER_MEDIUM, SCI_RESIDENCY_OBJECT};
  for (const bool end_with_cleared : {false, true}) {
    SCOPED_TRACE(end_with_cleared ? "with cleared" : "without cleared");
    std::vector<std::unique_ptr<sci_index, void (*)(sci_index*)>> indexes;
    for (const uint32_t rule : rules) {
      sci_index_options options = SCI_INDEX_OPTIONS_INIT;
      options.residency = rule;
      sci_index* handle = nullptr;
      ASSERT_EQ(sci_index_new(&options, &handle), SCI_OK) << sci_last_error();
      indexes.emplace_back(handle, sci_index_free);
    }
    const TempFile prompts_file("sci-prompts-gen2", "");
    std::vector<std::string> argv = {kPublish, "--endpoint", "tcp://127.0.0.1:*", "--workload",
                                     "--page-size", "16", "--tp", "2", "--pages", std::to_string(kPages),
                                     "--generation", "2", "--prompts-out", prompts_file.path(),
                                     "--subscribers", "2", "--wait-subscribers-ms", "20000"};
    if (end_with_cleared) argv.push_back("--end-with-cleared");
    auto publish = Child::Spawn(argv);
    ASSERT_NE(publish, nullptr);
    std::string listening;
    ASSERT_TRUE(publish->ReadStderrLine(&listening)) << publish->err();
    SubscriberOptions options;
    options.endpoint = nlohmann::json::parse(listening)["listening"].get<std::string>();
    options.reconnect_policy = ReconnectPolicy::kTrustEventIds;  // sci-publish exits when done
    std::vector<std::unique_ptr<Subscriber>> subscribers;
    for (auto& index : indexes) {
      SubscriberError code = SubscriberError::kNone;
      std::string error;
      subscribers.push_back(Subscriber::Start(index->impl, options, &code, &error));
      ASSERT_NE(subscribers.back(), nullptr) << error;
    }
    ASSERT_TRUE(publish->Finish());
    ASSERT_EQ(publish->exit_code(), 0) << publish->err();
    const uint64_t events = OutLines(*publish).at(0)["events"].get<uint64_t>();
    for (auto& index : indexes) {
      ASSERT_TRUE(WaitFor([&] { return index->impl.GetStats().events_applied == events; }));
    }

    sci_layout_spec spec{};
    spec.struct_size = sizeof spec;
    spec.page_size = 16;
    spec.tp_size = 2;
    sci_layout* layout = nullptr;
    ASSERT_EQ(sci_layout_new(&spec, &layout), SCI_OK) << sci_last_error();
    std::ifstream in(prompts_file.path());
    std::string line;
    ASSERT_TRUE(std::getline(in, line));
    const std::vector<uint32_t> tokens = nlohmann::json::parse(line)["tokens"].get<std::vector<uint32_t>>();
    for (size_t r = 0; r < rules.size(); ++r) {
      SCOPED_TRACE(rules[r] == SCI_RESIDENCY_PER_MEDIUM ? "per-medium" : "object");
      std::vector<uint8_t> hits(kPages);
      sci_page_result result{};
      result.struct_size = sizeof result;
      ASSERT_EQ(sci_index_check_pages(indexes[r].get(), layout, tokens.data(), tokens.size(), 16, hits.data(),
                                      hits.size(), &result),
                SCI_OK)
          << sci_last_error();
      ASSERT_EQ(result.n_pages, kPages);
      for (uint32_t n = 0; n < kPages; ++n) {
        const bool deleted = n % 5 == 4;
        const bool off_memory = n % 4 == 0 && n % 3 != 2;
        const bool present =
            !end_with_cleared && !deleted && (rules[r] == SCI_RESIDENCY_PER_MEDIUM || !off_memory);
        EXPECT_EQ(hits[n] != 0, present) << "page " << n;
      }
      const Stats stats = indexes[r]->impl.GetStats();
      EXPECT_EQ(stats.tenant_clears, end_with_cleared ? 1u : 0u);
      EXPECT_EQ(stats.sequence_gaps, 0u);
    }
    sci_layout_free(layout);
  }
}

}  // namespace
}  // namespace sci
