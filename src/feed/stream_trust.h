// The subscriber's trust in the stream behind its index, as one named state
// (subscriber.h, "Liveness"). Owned by the subscriber's thread.
//
//   state        connected   what the index holds
//   kDown        no          in doubt since doubt_since(): cleared once the
//                            doubt has lasted the grace (stale_after_ms)
//   kDownStale   no          the doubt was settled by a clear (or there was
//                            nothing to clear): no deadline
//   kUp          yes         in doubt: no message applied on this connection
//   kUpStale     yes         as kUp, the doubt settled by a clear
//   kTrusted     yes         proven: a message applied on this connection
//                            (the index's sequence rule judged it)
//
// Transitions, each made by the subscriber function named
// (src/feed/subscriber.cpp, Subscriber::Loop):
//   Restart(now)        any -> kDown, doubt from now
//                       (SwitchTo: a new publisher; the start)
//   HandshakeDone()     kDown -> kUp, kDownStale -> kUpStale   (OnConnected)
//   ConnectionLost(now) kTrusted -> kDown (doubt from now),
//                       kUp -> kDown, kUpStale -> kDownStale   (MarkDisconnected)
//   MessageApplied(now) kUp, kUpStale -> kTrusted;
//                       kDownStale -> kDown (new contents: doubt from now)
//                                                              (OnMessageApplied)
//   GraceOver()         kDown -> kDownStale, kUp -> kUpStale   (CheckStale)
//   Resynced(now, live) connected and live -> kTrusted;
//                       else kUp or kDown, doubt from now      (OnResynced)
// A disconnect under ReconnectPolicy::kResync is ConnectionLost followed
// by a clear and a resync (OnDisconnected); the resync's outcome decides.
#pragma once

#include <chrono>

namespace sci {

class StreamTrust {
 public:
  using Clock = std::chrono::steady_clock;
  enum class State { kDown, kDownStale, kUp, kUpStale, kTrusted };

  State state() const { return state_; }
  bool connected() const { return state_ == State::kUp || state_ == State::kUpStale || state_ == State::kTrusted; }
  bool trusted() const { return state_ == State::kTrusted; }
  // Untrusted and not yet settled by a clear: the grace runs.
  bool in_doubt() const { return state_ == State::kDown || state_ == State::kUp; }
  Clock::time_point doubt_since() const { return doubt_since_; }

  void Restart(Clock::time_point now) {
    state_ = State::kDown;
    doubt_since_ = now;
  }
  // The loop (re)starts serving: whatever doubt there is counts from now.
  void DoubtFrom(Clock::time_point now) { doubt_since_ = now; }

  void HandshakeDone() {
    if (state_ == State::kDown) state_ = State::kUp;
    if (state_ == State::kDownStale) state_ = State::kUpStale;
  }

  void ConnectionLost(Clock::time_point now) {
    switch (state_) {
      case State::kTrusted:
        state_ = State::kDown;
        doubt_since_ = now;
        break;
      case State::kUp:
        state_ = State::kDown;
        break;
      case State::kUpStale:
        state_ = State::kDownStale;
        break;
      case State::kDown:
      case State::kDownStale:
        break;
    }
  }

  void MessageApplied(Clock::time_point now) {
    switch (state_) {
      case State::kUp:
      case State::kUpStale:
        state_ = State::kTrusted;
        break;
      case State::kDownStale:
        // A message without a live connection in view (its handshake not
        // read yet) adds contents but proves nothing: they need a deadline.
        state_ = State::kDown;
        doubt_since_ = now;
        break;
      case State::kDown:
      case State::kTrusted:
        break;
    }
  }

  void GraceOver() {
    if (state_ == State::kDown) state_ = State::kDownStale;
    if (state_ == State::kUp) state_ = State::kUpStale;
  }

  // A resync completed. `live`: a message on the current connection proved
  // the subscription since its start (Resync::live()).
  void Resynced(Clock::time_point now, bool live) {
    if (connected() && live) {
      state_ = State::kTrusted;
      return;
    }
    state_ = connected() ? State::kUp : State::kDown;
    doubt_since_ = now;
  }

 private:
  State state_ = State::kDown;
  Clock::time_point doubt_since_{};
};

}  // namespace sci
