// Live ingestion end to end: the real publisher (sci-publish, spawned from
// this build) -> loopback TCP -> sci::Subscriber -> Index, at the
// publisher's full speed (performance.md: 1 million events, zero sequence
// gaps).
//
//   live/tp8/events:<n>/sndhwm:<h>
//
// The publisher sends an SGLang workload in the production format (tp8
// pages, 16 objects and one group id each, 64 events a message) as fast as
// it can once the subscriber's subscription arrives. sndhwm:0 is the
// publisher's default (never drop: a slow subscriber slows the publisher);
// sndhwm:1000 is ZeroMQ's default high-water mark, where a subscriber that
// falls 1000 messages behind loses messages -- which the index would see as
// sequence gaps (and clear).
//
// Reported: events (applied), sequence_gaps (must be 0), clears,
// messages_received vs published_messages, events_per_s (subscriber side:
// first message received to last event applied; the benchmark's time),
// publisher_events_per_s (from the publisher's own summary: its publishing
// loop plus the final flush). With the lossless publisher (sndhwm:0) any
// missing event, gap or clear is an error; with sndhwm:1000 they are what
// is being measured.
#include <benchmark/benchmark.h>

#include <chrono>
#include <string>
#include <thread>

#include "child_process.h"  // tests/: the tools as child processes
#include "feed/subscriber.h"
#include "index/index.h"
#include "sglang/layout.h"
#include "tool_json.h"

namespace sci::bench {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr uint64_t kPagesPerPrompt = 128;
constexpr uint64_t kKeysPerPage = 16;  // tp8

void BM_LiveIngest(benchmark::State& state, uint64_t prompts, int sndhwm) {
  const uint64_t expected = prompts * kPagesPerPrompt * kKeysPerPage;
  for (auto _ : state) {
    auto publisher = testing::ChildProcess::Spawn({SCI_PUBLISH_PATH, "--endpoint", "tcp://127.0.0.1:*", "--workload",
                                          "--page-size", "64", "--tp", "8", "--prompts", std::to_string(prompts),
                                          "--pages", std::to_string(kPagesPerPrompt), "--seed", "7",
                                          "--wait-subscribers-ms", "30000", "--linger-ms", "30000", "--sndhwm",
                                          std::to_string(sndhwm)});
    if (publisher == nullptr) {
      state.SkipWithError("cannot spawn " SCI_PUBLISH_PATH);
      return;
    }
    std::string line;
    // The publisher builds its prompts before it binds: allow for it.
    if (!publisher->ReadStderrLine(&line, 60s) || JsonString(line, "listening").empty()) {
      state.SkipWithError(("the publisher did not start listening: " + line).c_str());
      return;
    }
    Index index(SGLangIndexOptions());
    SubscriberOptions options;
    options.endpoint = JsonString(line, "listening");
    // sci-publish exits once it has published: its disconnect must not
    // clear what was measured (the default policy would).
    options.reconnect_policy = ReconnectPolicy::kTrustEventIds;
    SubscriberError code = SubscriberError::kNone;
    std::string error;
    auto subscriber = Subscriber::Start(index, options, &code, &error);
    if (subscriber == nullptr) {
      state.SkipWithError(("subscriber: " + error).c_str());
      return;
    }
    // Follow the index until every event is applied (or it stops moving).
    Clock::time_point first{}, last{};
    uint64_t applied = 0;
    auto last_progress = Clock::now();
    const auto deadline = Clock::now() + 300s;
    // A lossy run never reaches `expected`: it ends when nothing moved for 2 s.
    const auto quiet_limit = sndhwm == 0 ? 30s : 2s;
    while (Clock::now() < deadline && Clock::now() - last_progress < quiet_limit) {
      const Stats stats = index.GetStats();
      const auto now = Clock::now();
      if (first == Clock::time_point{} && stats.messages_received > 0) first = now;
      if (stats.events_applied != applied) {
        applied = stats.events_applied;
        last = now;
        last_progress = now;
      }
      if (applied >= expected) break;
      std::this_thread::sleep_for(200us);
    }
    subscriber->Stop();
    if (!publisher->Finish(60s) || publisher->exit_code() != 0) {
      state.SkipWithError(("the publisher failed: " + publisher->err()).c_str());
      return;
    }
    const std::string& summary = publisher->out();
    const Stats stats = index.GetStats();
    const double seconds = std::chrono::duration<double>(last - first).count();
    state.SetIterationTime(seconds);
    const double published = static_cast<double>(JsonNumber(summary, "events"));
    const double publisher_ms = static_cast<double>(JsonNumber(summary, "elapsed_ms"));
    state.counters["events"] = static_cast<double>(stats.events_applied);
    state.counters["published_events"] = published;
    state.counters["sequence_gaps"] = static_cast<double>(stats.sequence_gaps);
    state.counters["clears"] = static_cast<double>(stats.clears);
    state.counters["events_per_s"] = seconds > 0 ? static_cast<double>(stats.events_applied) / seconds : 0;
    state.counters["publisher_events_per_s"] = publisher_ms > 0 ? published * 1000 / publisher_ms : 0;
    state.counters["messages_received"] = static_cast<double>(stats.messages_received);
    state.counters["published_messages"] = static_cast<double>(JsonNumber(summary, "messages"));
    // A publisher that may drop (sndhwm > 0) makes gaps a measurement, not a
    // failure: the index saw them, cleared, and said so. A lossless one must
    // deliver every event, in order.
    const bool lossless = sndhwm == 0;
    if (published != static_cast<double>(expected) ||
        (lossless && (stats.events_applied != expected || stats.sequence_gaps != 0 || stats.clears != 0 ||
                      stats.last_sequence != JsonNumber(summary, "last_sequence")))) {
      state.SkipWithError(("events lost or out of order; publisher said " + summary).c_str());
    }
  }
}

// 489 prompts of 128 tp8 pages: 1,001,472 events.
BENCHMARK_CAPTURE(BM_LiveIngest, 1m, 489, 0)
    ->Name("live/tp8/events:1m/sndhwm:0")->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_LiveIngest, 1m_hwm, 489, 1000)
    ->Name("live/tp8/events:1m/sndhwm:1000")->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);
// 5 prompts: 10,240 events (the smoke run's).
BENCHMARK_CAPTURE(BM_LiveIngest, 10k, 5, 0)
    ->Name("live/tp8/events:10k/sndhwm:0")->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sci::bench
