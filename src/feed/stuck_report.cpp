#include "feed/stuck_report.h"
#include "common/format.h"

#include "common/log.h"

namespace sci {
namespace {

// What is wrong, in the words of someone who has to fix it; empty: nothing.
std::string Trouble(const SubscriberState& state, const std::string& endpoint, long long lasted_ms) {
  if (!state.has_endpoint) {
    return sci::StrFormat("no leader known after %d ms: the leader view names none (is a master elected?); "
                           "every query answers miss",
                           lasted_ms);
  }
  if (!state.connected) {
    return sci::StrFormat("subscriber %s: not connected after %d ms (is a publisher listening there? ZeroMQ "
                           "keeps retrying)%s",
                           endpoint, lasted_ms,
                           state.resync_waiting ? "; the resync cannot start until it is, every query answers miss"
                                                : "");
  }
  if (state.resync_waiting) {
    return sci::StrFormat("subscriber %s: connected, but no message for %d ms: the resync cannot start until "
                           "the publisher sends one; every query answers miss",
                           endpoint, lasted_ms);
  }
  return {};
}

}  // namespace

void StuckReport::Update(Clock::time_point now, const SubscriberState& state, const std::string& endpoint) {
  const bool stuck = !state.has_endpoint || !state.connected || state.resync_waiting;
  if (!stuck) {
    if (warned_) Logf(LogLevel::kInfo, "subscriber %s: no longer stuck", endpoint);
    warned_ = false;
    backoff_.Disarm();
    return;
  }
  backoff_.Arm(now, grace_);
  if (!backoff_.Due(now)) return;
  const long long lasted_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(backoff_.lasted(now)).count();
  Logf(LogLevel::kWarn, "%s", Trouble(state, endpoint, lasted_ms));
  warned_ = true;
}

}  // namespace sci
