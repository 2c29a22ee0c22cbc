// A publisher that speaks the Mooncake master's production format byte for
// byte: frames [topic (empty), 8-byte big-endian sequence, msgpack payload],
// sequences from 1 (one per batch), event ids from 1 (one per event),
// batches of at most 64 events (EncodeMooncakePayload / EncodeSequence).
//
// Unlike the real master it never drops an event: it sends each batch as it
// is made (the real master's bounded queue and lag: publisher_queue.h), and
// loss only happens when asked for (Skip, or a send HWM). The
// socket is an XPUB, a publisher on the wire, which also lets it wait until
// subscribers have subscribed before it sends, so a demo or test that
// starts it first loses nothing to the PUB/SUB slow-joiner race.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "encode/mooncake_event.h"
#include "publish_script.h"
#include "publisher_counters.h"

namespace sci::tools {

struct PublisherConfig {
  static constexpr size_t kMaxBatch = 64;  // the real publisher's limit

  std::string endpoint;
  bool bind = true;   // else connect (to a subscriber that binds)
  std::string topic;  // frame 0; the production publisher sends it empty
  size_t max_batch = kMaxBatch;
  double rate = 0;                      // events per second; 0 = as fast as possible
  std::optional<int64_t> timestamp_ms;  // fixed batch timestamp (reproducible bytes); else the clock
  uint64_t first_sequence = 1;
  uint64_t first_event_id = 1;  // a master that goes on after a blip continues its event ids
  std::string backend_id = "mooncake-master-0";
  bool second_generation = false;  // the second-generation field order (MooncakeEvent)
  int send_hwm = 0;  // ZeroMQ messages queued per subscriber before dropping; 0 = never drop
  int linger_ms = 1000;
};

// Where events go: sent in batches as they come (BatchPublisher), or
// through the master's queue first (PublisherQueue).
class EventSink {
 public:
  virtual ~EventSink() = default;
  // Queues an event; a full batch is sent at once.
  virtual void Add(const ScriptEvent& event) = 0;
  // Sends the queued events, if any, as one batch.
  virtual void Flush() = 0;
  // Flushes, then skips `n` sequence numbers: subscribers see a gap.
  virtual void Skip(uint64_t n) = 0;
};

class BatchPublisher final : public EventSink {
 public:
  // `counters`: what it sent, for the admin server's status (must outlive it).
  BatchPublisher(PublisherConfig config, PublisherCounters& counters);

  // Binds or connects. False with *error if ZeroMQ refuses the endpoint.
  bool Open(std::string* error);
  // What the socket is bound to (the port a "tcp://host:*" endpoint got).
  std::string BoundEndpoint();

  // Waits until `subscriptions` subscribe requests have arrived, or
  // `timeout` passes (negative: no limit), or `stop_fd` becomes readable
  // (-1: none). Returns how many arrived.
  int WaitForSubscriptions(int subscriptions, std::chrono::milliseconds timeout, int stop_fd);

  void Add(const ScriptEvent& event) override;
  void Flush() override;
  // Lost batches: also counted in published_batches (sent, lost on the way).
  void Skip(uint64_t n) override;
  // Flushes, then lets `n` sequence numbers go by uncounted (events a full
  // queue dropped: the queue counts them).
  void ConsumeSequences(uint64_t n);
  // Flushes and closes, waiting up to linger_ms for queued messages to leave.
  void Close();

  uint64_t messages() const { return messages_; }
  uint64_t events() const { return events_; }
  uint64_t skipped() const { return skipped_; }
  bool sent_any() const { return messages_ > 0; }
  uint64_t first_sequence_sent() const { return first_sequence_sent_; }
  uint64_t last_sequence_sent() const { return last_sequence_sent_; }

 private:
  void Pace();

  const PublisherConfig config_;
  PublisherCounters& counters_;
  zmq::context_t context_;
  zmq::socket_t socket_;
  bool open_ = false;

  std::vector<ScriptEvent> pending_;
  std::vector<MooncakeEvent> views_;
  std::string payload_;
  uint64_t next_sequence_;
  uint64_t next_event_id_ = 1;

  uint64_t messages_ = 0;
  uint64_t events_ = 0;
  uint64_t skipped_ = 0;
  uint64_t first_sequence_sent_ = 0;
  uint64_t last_sequence_sent_ = 0;
  std::optional<std::chrono::steady_clock::time_point> started_;
};

}  // namespace sci::tools
