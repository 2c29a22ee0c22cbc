// A seeded adversarial simulation of the subscriber against Mooncake masters
// (FoundationDB-simulation / Jepsen-nemesis style; docs/testing.md,
// "Simulation"). Two masters built from sci-publish's real pieces
// (simulation/adversarial_master.h) on loopback sockets; a nemesis that plays
// a schedule drawn from a seed (simulation/schedule.h): restarts with every
// numbering, one-event and 64-event batches, stalled workers, overflow,
// failed sends, lost tails, a status that lags, resets, fails or belongs to
// the other master, late listings, leader changes (Retarget with and without
// a snapshot, the subscriber given an explicit status_url or not), bursts the
// subscriber has not drained when the publisher restarts. The real
// sci::Subscriber and sci::Index follow; reader threads and quiescence
// checks hold every answer to the truth (simulation/truth.h).
//
// The oracle. "Truth" is every master's metadata (HeldKeys) and a position
// counter of its changes, all masters in one order, a listing's position
// taken under the same lock.
//
//   1. Probe keys, which no master ever stores, never answer hit.
//   2. Live rule. Let L be the latest listing served to the followed master's
//      GET /get_all_keys (the subscriber is the only client) -- the listing
//      of the resync under way or, once it has completed, the one it loaded:
//      a download starts only after the index has been emptied and held, and
//      the hold ends only with a replay onto that listing, so whenever the
//      index answers, its contents derive from L (or from no listing: after
//      a retarget without a snapshot, when the rule is off). A hit on K, by a
//      query during which no new listing was taken (the listing count read
//      before and after it is the same), is false if K is not in L and no
//      master stored K after L was taken (up to the query's end). Everything
//      else is allowed: the index lagging the stream shows keys that were in
//      L or stored since; it can only go wrong by going back in time (a store
//      older than L, replayed after it) or by keeping keys a new master never
//      had (which check 3 finds: they need not be absent from L's master).
//      A violation found after a resync whose catch-up ran on the 1.2 timer
//      (the status endpoint answered 404/503: resyncs_timed grew since L)
//      is the documented limit of the timer (docs/index-semantics.md,
//      "Resync"), counted and printed, not failed.
//   3. Quiescence (between phases and at the end): the nemesis stops (faults
//      not yet used up are cancelled), the queue drains, a final batch is
//      sent; within 15 s the subscriber must serve (resyncing == 0, else "a
//      resync that never ends") with the final batch applied (or with its
//      receive queue dropped by a disconnect noticed since: the final batch
//      went with it, and a resync waits for a message that a quiet master
//      does not send; counted); then every key
//      the index reports present must be held by the current leader (a key
//      the leader does not hold is present for ever: nothing will remove it),
//      and a freshly stored marker must show within 5 s (one stored every
//      250 ms; none showing passes only if every one was counted in
//      stores_withheld, a declared miss). At the end the master may keep a
//      status quirk (duplicate keys, another master's counters, 404), lose
//      the batch before the final one (a resync on a quiet master) and fail
//      a send after it (a quiet master whose last events were dropped); and,
//      everything sent having been applied, no loss at the tail may be
//      established within 1 s of quiet (a phantom one clears the index).
//
// A failure prints the seed, the schedule, when each action ran, the
// violations (check, key, time) and index.GetStats(). The schedule is the
// seed's; sockets, threads and HTTP run on real time, so a replay meets the
// same faults in the same order, not the same interleaving.
//
// Seeds: 1..kCiSeeds by default (each its own test); SCI_SIM_SEED=N or
// SCI_SIM_SEEDS=A-B / A,B,C for others (scripts/soak.sh runs random ones).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "feed/subscriber.h"
#include "index/index.h"
#include "index/stat_list.h"
#include "simulation/adversarial_master.h"
#include "simulation/schedule.h"
#include "simulation/truth.h"
#include "wait_for.h"

namespace sci {
namespace {

using namespace std::chrono_literals;
using sci::testing::WaitFor;
using namespace sci::testing::sim;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kCiSeeds = 20;
constexpr int kProbeKeys = 12;
constexpr int kReaders = 2;
constexpr auto kServeBound = 15s;   // quiescence: the subscriber serves, caught up
constexpr auto kMarkerBound = 5s;   // quiescence: a fresh store shows
// The subscriber's bound on a catch-up whose status is not its stream's
// (a bound it never reaches: docs/operations.md, "Where the catch-up ends"):
// the hold's 5 s, then stores deferred for resync_catch_up_max_ms.
constexpr auto kCatchUpMax = 2s;
constexpr auto kForeignStatusMarkerBound = kMarkerBound + 5s + kCatchUpMax;
// The end: quiet this long, no loss at the tail may be established (the tail
// watch reads every 200 ms here, and waits at least its grace after that).
constexpr auto kQuietWatch = 1000ms;

struct Violation {
  std::string check;
  std::string key;
  long at_ms = 0;
  std::string detail;
};

std::string DescribeStats(const Stats& s) {
  std::ostringstream out;
#define SCI_SIM_PRINT(name, type, kind, keeper, help) \
  if (s.name != type{}) out << " " #name "=" << s.name;
  SCI_STAT_LIST(SCI_SIM_PRINT)
#undef SCI_SIM_PRINT
  return out.str();
}

class SimulationRun {
 public:
  explicit SimulationRun(Schedule schedule) : schedule_(std::move(schedule)), rng_(schedule_.seed ^ 0x5eed) {
    for (int i = 0; i < schedule_.universe; ++i) universe_.push_back("k" + std::to_string(i));
    for (int i = 0; i < kProbeKeys; ++i) probes_.push_back("probe-" + std::to_string(i));
    read_keys_ = universe_;
    read_keys_.insert(read_keys_.end(), probes_.begin(), probes_.end());
  }

  ~SimulationRun() { SetLogCallback(nullptr, nullptr); }

  void Execute() {
    started_ = Clock::now();
    SetLogCallback(&SimulationRun::Log, this);
    truth_.SetTagSource([this] { return index_.GetStats().resyncs_timed; });
    for (int m = 0; m < Truth::kMasters; ++m) {
      masters_[m] = std::make_unique<AdversarialMaster>(m, truth_, schedule_.queue_depth, schedule_.drain_rate);
    }
    masters_[0]->set_other(masters_[1].get());
    masters_[1]->set_other(masters_[0].get());
    std::string error;
    if (!masters_[0]->StartPublisher(1, 1, 0, [&] { StartSubscriber(); }, &error) || subscriber_ == nullptr) {
      Violate("setup", "", error.empty() ? "the subscriber did not start" : error);
      return Finish();
    }
    for (int r = 0; r < kReaders; ++r) readers_.emplace_back([this, r] { Read(r); });
    for (size_t i = 0; i < schedule_.actions.size() && !aborted_; ++i) {
      timeline_.push_back(Ms());
      action_.store(i + 1);
      NoteDisconnectsAtActionStart();
      Play(schedule_.actions[i]);
    }
    if (!aborted_) {
      timeline_.push_back(Ms());
      action_.store(schedule_.actions.size() + 1);
      NoteDisconnectsAtActionStart();
      Quiesce(/*final=*/true);
    }
    Finish();
  }

  bool failed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return !violations_.empty();
  }

  std::string Report() const {
    std::ostringstream out;
    out << "SCI_SIM_SEED=" << schedule_.seed << "\n" << Describe(schedule_) << "actions began at (ms):";
    for (const long t : timeline_) out << " " << t;
    std::lock_guard<std::mutex> lock(mu_);
    out << "\nviolations (" << violation_count_ << ", first " << violations_.size() << "):\n";
    for (const Violation& v : violations_) {
      out << "  [" << v.check << "] key " << (v.key.empty() ? "-" : v.key) << " at " << v.at_ms << " ms: " << v.detail
          << "\n";
    }
    if (!violations_.empty()) {
      // The library's log up to the first violation: what the subscriber
      // thought was happening.
      out << "library log before the first violation (ms, level, line):\n";
      std::lock_guard<std::mutex> log_lock(log_mu_);
      size_t last = 0;
      while (last < log_.size() && log_[last].at_ms <= violations_.front().at_ms) ++last;
      for (size_t i = last > 40 ? last - 40 : 0; i < last; ++i) {
        out << "  " << log_[i].at_ms << " " << log_[i].level << " " << log_[i].line << "\n";
      }
    }
    out << "quiescences whose markers were all withheld: " << markers_withheld_
        << ", whose final batch a queue drop took: " << queue_drops_excused_ << "\n";
    out << "timer-limit hits excused: " << excused_ << ", one-claim clears under another master's status: "
        << foreign_status_clears_ << ", reader queries: " << queries_.load() << "\n";
    out << "stats at the end:" << final_stats_ << "\n";
    return out.str();
  }
  uint64_t excused() const { return excused_ + queue_drops_excused_; }

 private:
  long Ms() const {
    return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_).count());
  }

  void Violate(const std::string& check, const std::string& key, const std::string& detail) {
    const std::string during = " (during action " + std::to_string(static_cast<long>(action_.load()) - 1) + ")";
    std::lock_guard<std::mutex> lock(mu_);
    ++violation_count_;
    if (violations_.size() < 12) {
      violations_.push_back({check, key, Ms(), detail + during + "; stats:" + DescribeStats(index_.GetStats())});
    }
  }

  static void Log(void* user, int32_t level, const char* msg, size_t len) {
    auto* run = static_cast<SimulationRun*>(user);
    std::lock_guard<std::mutex> lock(run->log_mu_);
    if (run->log_.size() < 20000) run->log_.push_back({run->Ms(), level, std::string(msg, len)});
  }

  void StartSubscriber() {
    SubscriberOptions options;
    options.endpoint = masters_[0]->endpoint();
    options.snapshot_url = masters_[0]->snapshot_url();
    if (schedule_.explicit_status_url) options.status_url = masters_[0]->status_url();
    options.resync_min_interval_ms = 20;
    options.snapshot_timeout_ms = 5000;
    options.reconnect_ms = 20;
    options.reconnect_max_ms = 200;
    options.status_poll_ms = 200;
    options.resync_catch_up_max_ms = static_cast<uint32_t>(kCatchUpMax.count() * 1000);
    SubscriberError code = SubscriberError::kNone;
    std::string error;
    subscriber_ = Subscriber::Start(index_, options, &code, &error);
    if (subscriber_ == nullptr) Violate("setup", "", "Subscriber::Start: " + error);
  }

  // A reader: random keys, every hit judged (module comment, checks 1-2).
  void Read(int reader) {
    std::mt19937_64 rng(schedule_.seed * 1000 + static_cast<uint64_t>(reader));
    uint64_t queries = 0;
    while (!stop_readers_.load(std::memory_order_acquire)) {
      const std::string& key = read_keys_[rng() % read_keys_.size()];
      const size_t epoch_before = truth_.epoch();
      const bool hit = index_.Contains({}, key);
      // A breath now and then: two cores are shared with the subscriber, the
      // worker and the nemesis.
      if (++queries % 256 == 0) std::this_thread::sleep_for(20us);
      if (!hit) continue;
      const uint64_t position_after = truth_.position();
      const size_t epoch_after = truth_.epoch();
      if (key.starts_with("probe-")) {
        Violate("probe", key, "a key no master ever stored answered hit");
        continue;
      }
      if (epoch_before != epoch_after) continue;
      const std::string why = truth_.JudgeHit(key, epoch_before, position_after);
      if (why.empty()) continue;
      const uint64_t timed_now = index_.GetStats().resyncs_timed;
      if (timed_now > truth_.ListingTag(epoch_before)) {
        std::lock_guard<std::mutex> lock(mu_);
        ++excused_;
        continue;
      }
      const long listing_ms = static_cast<long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(truth_.ListingTaken(epoch_before) - started_).count());
      Violate("live", key, why + "; listing taken at " + std::to_string(listing_ms) + " ms");
    }
    queries_.fetch_add(queries);
  }

  AdversarialMaster& leader() { return *masters_[leader_]; }

  const std::string& RandomKey() { return universe_[rng_() % universe_.size()]; }

  // One random change: a held key mostly goes, an absent one comes.
  void Change(AdversarialMaster& m) {
    const std::string& key = RandomKey();
    if (truth_.Holds(m.id(), key) && std::bernoulli_distribution(0.6)(rng_)) {
      m.Remove(key);
    } else {
      m.Store(key);
    }
  }

  void Churn(int count, int spread_ms, bool one_event) {
    AdversarialMaster& m = leader();
    const auto pause = std::chrono::microseconds(count > 0 ? spread_ms * 1000 / count : 0);
    for (int i = 0; i < count; ++i) {
      Change(m);
      if (one_event) m.Drain();                // sent alone: the worker had emptied the queue
      std::this_thread::sleep_for(pause);      // pacing the schedule, not a synchronisation
    }
  }

  void Burst(int count) {
    AdversarialMaster& m = leader();
    for (int i = 0; i < count; ++i) Change(m);
  }

  void Restart(RestartNumbering numbering, bool drained) {
    AdversarialMaster& m = leader();
    m.StopPublisher(drained);
    const uint64_t old_sequence = m.LastSequence();
    const uint64_t old_event_id = m.LastEventId();
    truth_.Forget(m.id(), m.held());  // a restarted master holds nothing
    uint64_t sequence = 1;
    uint64_t event_id = 1;
    uint64_t unseen = 0;
    switch (numbering) {
      case RestartNumbering::kFromOne: break;
      case RestartNumbering::kResumeIdsFromOne: sequence = old_sequence + 1; break;
      case RestartNumbering::kUnseenPrefix:
        sequence = event_id = old_sequence + 1;
        unseen = old_sequence;
        break;
      case RestartNumbering::kResumeIdsContinue:
        sequence = old_sequence + 1;
        event_id = old_event_id + 1;
        break;
      case RestartNumbering::kJump: sequence = old_sequence + 2 + rng_() % 49; break;
    }
    std::string error;
    if (!m.StartPublisher(sequence, event_id, unseen, nullptr, &error)) {
      Violate("setup", "", "restart: " + error);
      aborted_ = true;
    }
  }

  void LeaderChange(bool with_snapshot) {
    const int old = leader_;
    const int next = 1 - old;
    leader().Drain();
    AdversarialMaster& promoted = *masters_[next];
    promoted.StopPublisher(/*drain=*/false);
    truth_.Restore(next, promoted.held(), old);  // restored objects: no events (wire-formats.md, section 4)
    truth_.Follow(next);
    std::string error;
    SubscriberError code = SubscriberError::kNone;
    const bool started = promoted.StartPublisher(
        1, 1, 0,
        [&] {
          const std::string snapshot_url = with_snapshot ? promoted.snapshot_url() : "";
          code = subscriber_->Retarget(promoted.endpoint(), snapshot_url, &error);
        },
        &error);
    if (!started || code != SubscriberError::kNone) {
      Violate("setup", "", "leader change: " + error);
      aborted_ = true;
      return;
    }
    leader_ = next;
    with_snapshot_ = with_snapshot;
  }

  void Play(const Action& a) {
    switch (a.kind) {
      case Action::Kind::kChurn: Churn(a.count, a.ms, a.one_event); break;
      case Action::Kind::kBurst: Burst(a.count); break;
      case Action::Kind::kStall:
        leader().queue().StallNextBatch(std::chrono::milliseconds(a.ms), std::chrono::milliseconds(a.delay_ms));
        break;
      case Action::Kind::kOverflow:
        leader().queue().StallNextBatch(std::chrono::milliseconds(a.ms));
        Change(leader());  // the batch the worker takes and holds
        Burst(static_cast<int>(schedule_.queue_depth) + a.count);
        break;
      case Action::Kind::kFailSends: leader().queue().FailNextSends(static_cast<uint64_t>(a.count)); break;
      case Action::Kind::kTailLoss: leader().queue().Skip(static_cast<uint64_t>(a.count)); break;
      case Action::Kind::kStatus: leader().SetStatusMode(a.status, std::chrono::milliseconds(a.ms)); break;
      case Action::Kind::kListingDelay: leader().DelayNextListing(std::chrono::milliseconds(a.ms)); break;
      case Action::Kind::kRestart: Restart(a.numbering, a.drained); break;
      case Action::Kind::kBacklogRestart:
        if (static_cast<size_t>(a.count) < schedule_.queue_depth) {
          // Queued behind a stalled worker, then sent as fast as it encodes:
          // faster than the subscriber applies, a backlog in its receive queue.
          leader().queue().StallNextBatch(10s);
          Change(leader());
          Burst(a.count);
          leader().queue().StallNextBatch(0ms);  // in case an earlier stall held the queue instead
          leader().queue().EndStall();
        } else {
          // More than the queue holds: it overflows (a gap, a resync under
          // way when the publisher restarts).
          Burst(a.count);
        }
        leader().Drain();  // handed to the socket; the close lingers until it has left
        Restart(a.numbering, /*drained=*/true);
        if (!aborted_) Burst(200);  // the new publisher's batches, into the same receive queue
        break;
      case Action::Kind::kLeaderChange: LeaderChange(a.with_snapshot); break;
      case Action::Kind::kQuiesce: Quiesce(/*final=*/false); break;
    }
  }

  // The disconnect clears counted when this action and the one before it
  // began: a disconnect the previous action caused (a publisher restart) may
  // be noticed only as this one begins, when a resync kept the subscriber
  // busy (seed 251473372906054: restart at 2,662 ms, noticed at 3,503 as
  // the final quiescence began, its final batch sent before the new socket
  // joined).
  void NoteDisconnectsAtActionStart() {
    disconnects_before_previous_action_ = disconnects_before_this_action_;
    disconnects_before_this_action_ = index_.GetStats().disconnect_clears;
  }

  // Check 3 (module comment).
  void Quiesce(bool final) {
    AdversarialMaster& m = leader();
    const StatusMode status = final ? schedule_.final_status : StatusMode::kNormal;
    const uint64_t queue_drops_before = disconnects_before_previous_action_;
    // The end's quirks need a snapshot to end in a served index: a gap
    // without one withholds the final batch's stores.
    const bool gap = final && schedule_.final_gap && with_snapshot_;
    const bool failed_send = final && schedule_.final_failed_send && with_snapshot_;
    // The nemesis stops: faults not yet used up are cancelled.
    m.queue().StallNextBatch(0ms);
    m.queue().FailNextSends(0);
    m.SetStatusMode(status, 1h);
    m.DelayNextListing(0ms);
    m.Drain();
    if (gap) m.queue().Skip(1);
    const std::string tag = std::to_string(++quiescences_);
    m.Store("marker-final-" + tag);
    m.Drain();
    if (failed_send) {
      m.queue().FailNextSends(1);
      m.Store("marker-lost-" + tag);
      m.Drain();
    }
    const uint64_t last = m.LastSequence();
    const auto served = [&] {
      const Stats s = index_.GetStats();
      return !s.resyncing && s.has_sequence && s.last_sequence == last;
    };
    const long since = Ms();
    // A disconnect noticed now, or since the previous action began (a
    // restart behind the backlog), clears and drops the receive queue with
    // whatever the new publisher had sent into it, or opens a new socket
    // after the final batch was sent; and a quiet master sends no more.
    // Without a snapshot source nothing brings those batches back; with
    // one, the resync waits for a first message on the new socket to prove
    // the subscription (a snapshot taken before it could miss events), and
    // none comes. Either way a miss, and what comes next is served: the
    // fresh markers below must show (the first of them starts the resync).
    //
    // Either way the subscriber must have gone quiet first: without a
    // snapshot source it serves as soon as it reconnects, and may still be
    // working through the new publisher's batches (seed 226055918698779: a
    // restart behind the backlog noticed 2 ms before the final check, the
    // index at batch 900 of 908, its keys of batch 900 removed by the
    // batches still to come: judged "present, not held" before it caught up).
    uint64_t progress_seen = UINT64_MAX;
    Clock::time_point progress_changed = Clock::now();
    const auto queue_dropped = [&] {
      const Stats s = index_.GetStats();
      if (s.disconnect_clears <= queue_drops_before || !s.subscriber_connected) return false;
      if (s.resyncing != with_snapshot_) return false;
      const uint64_t progress = s.messages_received + s.batches_applied;
      if (progress != progress_seen) {
        progress_seen = progress;
        progress_changed = Clock::now();
        return false;
      }
      return Clock::now() - progress_changed >= 1s;  // waiting for a message, not working through them
    };
    if (!WaitFor([&] { return served() || queue_dropped(); }, kServeBound, 5ms)) {
      const Stats s = index_.GetStats();
      Violate(s.resyncing ? "resync-never-ends" : "not-caught-up", "",
              std::string(s.resyncing ? "still resyncing" : "not serving the final batch") + " " +
                  std::to_string(std::chrono::duration_cast<std::chrono::seconds>(kServeBound).count()) +
                  " s after the final batch (sent at " + std::to_string(since) + " ms, sequence " +
                  std::to_string(last) + ")");
      aborted_ = true;
    } else {
      if (!served()) {
        std::lock_guard<std::mutex> lock(mu_);
        ++queue_drops_excused_;
      }
      std::vector<std::string> keys = universe_;
      for (int q = 1; q <= quiescences_; ++q) keys.push_back("marker-final-" + std::to_string(q));
      for (const std::string& key : keys) {
        if (index_.Contains({}, key) && !truth_.Holds(m.id(), key)) {
          Violate("present-not-held", key,
                  "quiescent, caught up at sequence " + std::to_string(last) + ", the leader (master " +
                      std::to_string(m.id()) + ") does not hold it" +
                      (truth_.EverStored(key) ? "" : "; no master ever stored it"));
        }
      }
      FreshMarkerShows(m, tag, status);
      if (final && !aborted_) NoPhantomTailLoss(status);
    }
    m.SetStatusMode(StatusMode::kNormal, 0ms);
  }

  // A key stored on the quiescent master shows within kMarkerBound: one
  // every 250 ms (a master that goes on working), any of them. None showing
  // is allowed only as a declared miss: every one of them counted in
  // stores_withheld (a subscriber that withholds stores until its catch-up
  // is anchored; index-semantics.md, "Resync").
  void FreshMarkerShows(AdversarialMaster& m, const std::string& tag, StatusMode status) {
    const uint64_t withheld_before = index_.GetStats().stores_withheld;
    // A status that is not this stream's (another master's counters, names
    // given twice) may hold a resync and defer its stores for their stated
    // bound: a miss for that long, not a failure.
    const bool foreign = status == StatusMode::kOtherMaster || status == StatusMode::kDuplicateKeys;
    const auto bound = foreign ? kForeignStatusMarkerBound : kMarkerBound;
    const auto deadline = Clock::now() + bound;
    std::vector<std::string> markers;
    const auto any_shows = [&] {
      for (const std::string& marker : markers) {
        if (index_.Contains({}, marker)) return true;
      }
      return false;
    };
    while (Clock::now() < deadline) {
      markers.push_back("marker-fresh-" + tag + "-" + std::to_string(markers.size()));
      m.Store(markers.back());
      m.Drain();
      if (WaitFor(any_shows, 250ms, 2ms)) return;
    }
    const uint64_t withheld = index_.GetStats().stores_withheld - withheld_before;
    if (withheld >= markers.size()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++markers_withheld_;
      return;
    }
    const auto bound_s = std::chrono::duration_cast<std::chrono::seconds>(bound).count();
    Violate("marker-not-visible", markers.front(),
            "none of " + std::to_string(markers.size()) + " keys stored on the quiescent master, one every 250 ms, " +
                "showed within " + std::to_string(bound_s) + " s (" + std::to_string(withheld) +
                " stores withheld meanwhile)");
    aborted_ = true;
  }

  // Everything the master sent has been applied and it has gone quiet: a
  // loss at the stream's tail established now is a phantom (a status read
  // from the wrong master), and clears what the index holds.
  // A status serving another master's counters, higher than this stream's,
  // cannot be refuted (a loss at the tail looks the same): it may cost one
  // clear for what it claims, never one per poll (docs/operations.md, "A
  // loss at the tail is established once per claim"). Counted, not failed.
  void NoPhantomTailLoss(StatusMode status) {
    const uint64_t before = index_.GetStats().tail_losses;
    if (status == StatusMode::kOtherMaster) {
      (void)WaitFor([&] { return index_.GetStats().tail_losses != before; }, kQuietWatch, 5ms);
      // The claim's one clear, then nothing more for as long again.
      const uint64_t after_claim = index_.GetStats().tail_losses;
      if (after_claim != before) {
        std::lock_guard<std::mutex> lock(mu_);
        ++foreign_status_clears_;
      }
      if (after_claim - before > 1 ||
          WaitFor([&] { return index_.GetStats().tail_losses != after_claim; }, kQuietWatch, 5ms)) {
        Violate("phantom-tail-loss", "",
                "a status serving another master's counters cleared the index more than once for one claim");
      }
      return;
    }
    if (WaitFor([&] { return index_.GetStats().tail_losses != before; }, kQuietWatch, 5ms)) {
      Violate("phantom-tail-loss", "",
              "the master sent everything and went quiet, and the subscriber established a loss at the tail within " +
                  std::to_string(kQuietWatch.count()) + " ms");
    }
  }

  void Finish() {
    stop_readers_.store(true, std::memory_order_release);
    for (std::thread& reader : readers_) reader.join();
    readers_.clear();
    final_stats_ = DescribeStats(index_.GetStats());
    if (subscriber_ != nullptr) subscriber_->Stop();
    subscriber_.reset();
    for (auto& master : masters_) master.reset();
  }

  const Schedule schedule_;
  std::mt19937_64 rng_;  // the nemesis's run-time choices (keys), from the seed
  std::vector<std::string> universe_;
  std::vector<std::string> probes_;
  std::vector<std::string> read_keys_;

  Truth truth_;
  Index index_;
  std::unique_ptr<AdversarialMaster> masters_[Truth::kMasters];
  std::unique_ptr<Subscriber> subscriber_;
  int leader_ = 0;
  bool with_snapshot_ = true;
  int quiescences_ = 0;
  bool aborted_ = false;
  Clock::time_point started_{};
  std::vector<long> timeline_;
  std::atomic<size_t> action_{0};  // the action being played, + 1

  struct LogLine {
    long at_ms;
    int32_t level;
    std::string line;
  };
  mutable std::mutex log_mu_;
  std::vector<LogLine> log_;

  std::atomic<bool> stop_readers_{false};
  std::vector<std::thread> readers_;
  std::atomic<uint64_t> queries_{0};

  mutable std::mutex mu_;
  std::vector<Violation> violations_;
  uint64_t violation_count_ = 0;
  uint64_t excused_ = 0;
  uint64_t queue_drops_excused_ = 0;  // quiescences whose final batch a queue drop took
  uint64_t disconnects_before_this_action_ = 0;      // NoteDisconnectsAtActionStart
  uint64_t disconnects_before_previous_action_ = 0;
  uint64_t foreign_status_clears_ = 0;  // NoPhantomTailLoss
  uint64_t markers_withheld_ = 0;
  std::string final_stats_;
};

// SCI_SIM_SEED=N, or SCI_SIM_SEEDS=A-B or A,B,C; else the CI set 1..kCiSeeds
// and the soak seeds kept.
std::vector<uint64_t> Seeds() {
  std::vector<uint64_t> seeds;
  if (const char* one = std::getenv("SCI_SIM_SEED"); one != nullptr && *one != '\0') {
    seeds.push_back(std::strtoull(one, nullptr, 10));
    return seeds;
  }
  if (const char* list = std::getenv("SCI_SIM_SEEDS"); list != nullptr && *list != '\0') {
    std::stringstream in(list);
    std::string item;
    while (std::getline(in, item, ',')) {
      const size_t dash = item.find('-');
      if (dash == std::string::npos) {
        seeds.push_back(std::strtoull(item.c_str(), nullptr, 10));
      } else {
        const uint64_t lo = std::strtoull(item.substr(0, dash).c_str(), nullptr, 10);
        const uint64_t hi = std::strtoull(item.substr(dash + 1).c_str(), nullptr, 10);
        for (uint64_t s = lo; s <= hi; ++s) seeds.push_back(s);
      }
    }
    return seeds;
  }
  for (uint64_t s = 1; s <= kCiSeeds; ++s) seeds.push_back(s);
  // Soak seeds that once failed, kept (docs/testing.md, "False positives
  // met"): a queue dropped after the final batch, no snapshot source.
  seeds.push_back(226055918698779);
  // ... and with a snapshot source: the resync waits for a first message.
  seeds.push_back(251473372906054);
  return seeds;
}

class Simulation : public ::testing::TestWithParam<uint64_t> {};

TEST_P(Simulation, NoFalseHitAndNoResyncThatNeverEnds) {
  SimulationRun run(DrawSchedule(GetParam()));
  run.Execute();
  EXPECT_FALSE(run.failed()) << run.Report();
  if (!run.failed() && run.excused() > 0) std::cout << run.Report();
}

INSTANTIATE_TEST_SUITE_P(Seeded, Simulation, ::testing::ValuesIn(Seeds()),
                         [](const ::testing::TestParamInfo<uint64_t>& info) {
                           return "Seed" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace sci
