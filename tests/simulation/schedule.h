// The nemesis's schedule (simulation_test.cpp): a list of actions drawn up
// front from a seed (std::mt19937_64), printed on failure, so that a failing
// seed replays the same schedule. Only the schedule is deterministic: the
// sockets, threads and HTTP server run on real time, so a replay meets the
// same faults in the same order, not the same interleaving.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace sci::testing::sim {

// How a restarted publisher numbers what it sends (docs/wire-formats.md,
// section 6: a restarted publisher starts again at 1; the subscriber may
// first see it far along).
enum class RestartNumbering {
  kFromOne,            // sequence and event ids from 1
  kResumeIdsFromOne,   // sequence = old last + 1, event ids from 1
  kUnseenPrefix,       // it sent old-last one-event batches nobody saw: sequence = event id = old last + 1
  kResumeIdsContinue,  // sequence and event ids both continue the old ones
  kJump,               // sequence = old last + 2..50, ids from 1
};

enum class StatusMode {
  kNormal,
  kLagging,        // counters frozen when the mode began
  kReset,          // counters counted from the mode's start, as a restarted publisher's
  kNotFound,       // 404
  kUnavailable,    // 503
  kOtherMaster,    // the other master's counters
  kDuplicateKeys,  // each key twice, the first from a frozen copy
};

struct Action {
  enum class Kind {
    kChurn,          // `count` stores/removes; `one_event`: each sent alone
    kBurst,          // `count` events added at once: full 64-event batches
    kStall,          // the first batch taken `delay_ms` from now is held `ms`
    kOverflow,       // a stall of `ms`, then `count` events past the queue's depth
    kFailSends,      // the next `count` batches fail to send
    kTailLoss,       // `count` batches counted as published, never delivered
    kStatus,         // the status answers `status` for `ms`
    kListingDelay,   // the next listing is served `ms` after it was taken
    kRestart,        // the leader's publisher restarts (`numbering`, its queue `drained` or dropped)
    kBacklogRestart, // a burst of `count` events, then kRestart while the subscriber still drains it
    kLeaderChange,   // the other master is promoted; Retarget with (`with_snapshot`) or without its snapshot
    kQuiesce,        // the quiescence checks, then the schedule goes on
  };
  Kind kind = Kind::kChurn;
  int count = 0;
  int ms = 0;
  int delay_ms = 0;
  bool one_event = false;
  bool drained = false;
  bool with_snapshot = true;
  RestartNumbering numbering = RestartNumbering::kFromOne;
  StatusMode status = StatusMode::kNormal;
};

// What a run is made of: the subscriber's configuration, each incarnation's
// queue, the actions, and what the quiet master looks like at the end.
struct Schedule {
  uint64_t seed = 0;
  bool explicit_status_url = false;  // the subscriber is given the first master's status URL
  size_t queue_depth = 65536;        // every incarnation's
  double drain_rate = 0;             // events/s; 0: as fast as it can
  int universe = 48;                 // keys k0..k{universe-1}
  std::vector<Action> actions;
  // The final quiescence: a status quirk the master keeps, a batch lost just
  // before the final one (its gap resyncs a quiet master), a failed send
  // after it (a quiet master whose last events were dropped).
  StatusMode final_status = StatusMode::kNormal;
  bool final_gap = false;
  bool final_failed_send = false;
};

inline const char* Name(RestartNumbering n) {
  switch (n) {
    case RestartNumbering::kFromOne: return "from-one";
    case RestartNumbering::kResumeIdsFromOne: return "resume-seq/ids-from-one";
    case RestartNumbering::kUnseenPrefix: return "unseen-prefix(seq=id=old+1)";
    case RestartNumbering::kResumeIdsContinue: return "resume-seq/ids-continue";
    case RestartNumbering::kJump: return "jump";
  }
  return "?";
}

inline const char* Name(StatusMode m) {
  switch (m) {
    case StatusMode::kNormal: return "normal";
    case StatusMode::kLagging: return "lagging";
    case StatusMode::kReset: return "reset";
    case StatusMode::kNotFound: return "404";
    case StatusMode::kUnavailable: return "503";
    case StatusMode::kOtherMaster: return "other-master";
    case StatusMode::kDuplicateKeys: return "duplicate-keys";
  }
  return "?";
}

inline std::string Describe(const Action& a) {
  std::ostringstream out;
  switch (a.kind) {
    case Action::Kind::kChurn:
      out << "churn " << a.count << (a.one_event ? " one-event batches" : " events") << " over " << a.ms << " ms";
      break;
    case Action::Kind::kBurst: out << "burst " << a.count << " events"; break;
    case Action::Kind::kStall: out << "stall a batch taken " << a.delay_ms << " ms on for " << a.ms << " ms"; break;
    case Action::Kind::kOverflow:
      out << "overflow: stall " << a.ms << " ms, " << a.count << " events past the depth";
      break;
    case Action::Kind::kFailSends: out << "fail the next " << a.count << " sends"; break;
    case Action::Kind::kTailLoss: out << "lose " << a.count << " batches (counted as published)"; break;
    case Action::Kind::kStatus: out << "status " << Name(a.status) << " for " << a.ms << " ms"; break;
    case Action::Kind::kListingDelay: out << "serve the next listing " << a.ms << " ms late"; break;
    case Action::Kind::kRestart:
      out << "restart the leader's publisher, " << Name(a.numbering) << ", queue "
          << (a.drained ? "drained" : "dropped");
      break;
    case Action::Kind::kBacklogRestart:
      out << "burst " << a.count << " events, restart behind the backlog, " << Name(a.numbering);
      break;
    case Action::Kind::kLeaderChange:
      out << "leader change, retarget " << (a.with_snapshot ? "with" : "without") << " snapshot";
      break;
    case Action::Kind::kQuiesce: out << "quiesce and check"; break;
  }
  return out.str();
}

inline std::string Describe(const Schedule& s) {
  std::ostringstream out;
  out << "seed " << s.seed << ": status_url "
      << (s.explicit_status_url ? "explicit (master 0's)" : "beside the snapshot")
      << ", queue depth " << s.queue_depth << ", drain " << s.drain_rate << " events/s, " << s.universe << " keys\n";
  for (size_t i = 0; i < s.actions.size(); ++i) out << "  " << i << ": " << Describe(s.actions[i]) << "\n";
  out << "  end: quiesce, status " << Name(s.final_status) << (s.final_gap ? ", a lost batch before the final one" : "")
      << (s.final_failed_send ? ", a failed send after it" : "") << "\n";
  return out.str();
}

// Draws `seed`'s schedule: `steps` actions, churn between faults.
inline Schedule DrawSchedule(uint64_t seed, int steps = 14) {
  std::mt19937_64 rng(seed);
  const auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  Schedule s;
  s.seed = seed;
  s.explicit_status_url = chance(0.5);
  // A master that drains slowly has a short queue here, so that no burst
  // holds it for more than about half a second.
  s.drain_rate = chance(0.4) ? uniform(2000, 20000) : 0;
  s.queue_depth = s.drain_rate == 0 && chance(0.5) ? 65536 : static_cast<size_t>(uniform(128, 1024));
  s.universe = uniform(16, 64);
  // A lightly loaded master sends one event a batch: some runs are all
  // trickle, the others mixed.
  const bool trickle_run = chance(0.3);
  const auto numbering = [&] {
    return static_cast<RestartNumbering>(uniform(0, static_cast<int>(RestartNumbering::kJump)));
  };
  for (int i = 0; i < steps; ++i) {
    Action churn;
    churn.kind = Action::Kind::kChurn;
    churn.count = uniform(5, 60);
    churn.ms = uniform(20, 300);
    churn.one_event = trickle_run || chance(0.4);
    s.actions.push_back(churn);

    Action a;
    const int pick = uniform(0, trickle_run ? 16 : 19);
    switch (pick) {
      case 0: case 1:
        a.kind = Action::Kind::kStall;
        a.ms = uniform(200, 2000);
        a.delay_ms = chance(0.5) ? 0 : uniform(1, 600);
        break;
      case 2: case 3: a.kind = Action::Kind::kRestart; a.numbering = numbering(); a.drained = chance(0.5); break;
      case 4: case 5: a.kind = Action::Kind::kTailLoss; a.count = uniform(1, 3); break;
      case 6: case 7: {
        a.kind = Action::Kind::kStatus;
        a.status = static_cast<StatusMode>(uniform(1, static_cast<int>(StatusMode::kDuplicateKeys)));
        a.ms = uniform(200, 2500);
        break;
      }
      case 8: a.kind = Action::Kind::kListingDelay; a.ms = uniform(50, 800); break;
      case 9: case 10: a.kind = Action::Kind::kLeaderChange; a.with_snapshot = chance(0.7); break;
      case 11: a.kind = Action::Kind::kFailSends; a.count = uniform(1, 2); break;
      case 12: case 13: a.kind = Action::Kind::kQuiesce; break;
      case 14: case 15: case 16:
        a.kind = Action::Kind::kChurn;
        a.count = uniform(5, 40);
        a.ms = uniform(20, 200);
        a.one_event = true;
        break;
      case 17: a.kind = Action::Kind::kBurst; a.count = uniform(200, 3000); break;
      case 18: a.kind = Action::Kind::kOverflow; a.ms = uniform(200, 800); a.count = uniform(10, 200); break;
      default:
        // Enough 64-event batches that applying them outlasts the reconnect (tens of ms)
        // when they come at once (simulation_test.cpp, kBacklogRestart).
        a.kind = Action::Kind::kBacklogRestart;
        a.count = uniform(20000, 60000);
        if (s.drain_rate > 0) a.count = std::min(a.count, static_cast<int>(s.drain_rate / 2));  // half a second
        a.numbering = numbering();
        break;
    }
    s.actions.push_back(a);
  }
  s.final_status = chance(0.6) ? StatusMode::kNormal
                               : (chance(0.5) ? StatusMode::kDuplicateKeys
                                              : (chance(0.5) ? StatusMode::kOtherMaster : StatusMode::kNotFound));
  s.final_gap = chance(0.5);
  s.final_failed_send = chance(0.3);
  return s;
}

}  // namespace sci::testing::sim
