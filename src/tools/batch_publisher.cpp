#include "batch_publisher.h"

#include <zmq.h>

#include <thread>
#include <utility>

#include "absl/strings/str_format.h"
#include "encode/mooncake_encoder.h"

namespace sci::tools {

BatchPublisher::BatchPublisher(PublisherConfig config, PublisherCounters& counters)
    : config_(std::move(config)),
      counters_(counters),
      context_(1),
      socket_(context_, zmq::socket_type::xpub),
      next_sequence_(config_.first_sequence),
      next_event_id_(config_.first_event_id) {
  pending_.reserve(config_.max_batch);
  views_.reserve(config_.max_batch);
}

bool BatchPublisher::Open(std::string* error) {
  socket_.set(zmq::sockopt::sndhwm, config_.send_hwm);
  // Every subscribe request reaches us, even a second one for the same
  // topic: that is how subscribers are counted.
  socket_.set(zmq::sockopt::xpub_verbose, 1);
  socket_.set(zmq::sockopt::linger, config_.linger_ms);
  const int rc = config_.bind ? zmq_bind(socket_.handle(), config_.endpoint.c_str())
                              : zmq_connect(socket_.handle(), config_.endpoint.c_str());
  if (rc != 0) {
    *error = absl::StrFormat("cannot %s to \"%s\": %s", config_.bind ? "bind" : "connect", config_.endpoint,
                             zmq_strerror(zmq_errno()));
    return false;
  }
  open_ = true;
  return true;
}

std::string BatchPublisher::BoundEndpoint() { return socket_.get(zmq::sockopt::last_endpoint); }

int BatchPublisher::WaitForSubscriptions(int subscriptions, std::chrono::milliseconds timeout, int stop_fd) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + timeout;
  int seen = 0;
  while (seen < subscriptions) {
    long wait = -1;
    if (timeout.count() >= 0) {
      const auto left = deadline - Clock::now();
      if (left <= Clock::duration::zero()) break;
      wait = static_cast<long>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
    }
    zmq_pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, stop_fd, ZMQ_POLLIN, 0}};
    const int rc = zmq_poll(items, stop_fd >= 0 ? 2 : 1, wait);
    if (rc < 0 && zmq_errno() == EINTR) continue;
    if (rc <= 0 || (stop_fd >= 0 && (items[1].revents & ZMQ_POLLIN))) break;
    zmq::message_t request;
    while (socket_.recv(request, zmq::recv_flags::dontwait)) {
      // 1 + topic subscribes, 0 + topic unsubscribes.
      if (request.size() >= 1 && static_cast<const uint8_t*>(request.data())[0] == 1) ++seen;
    }
  }
  return seen;
}

void BatchPublisher::Add(const ScriptEvent& event) {
  pending_.push_back(event);
  if (pending_.size() >= config_.max_batch) Flush();
}

void BatchPublisher::Pace() {
  using Clock = std::chrono::steady_clock;
  if (!started_) started_ = Clock::now();
  if (config_.rate <= 0) return;
  // Batch k leaves when the events before it fit the rate: no drift, and a
  // late batch does not make the next one wait longer.
  const auto due = *started_ + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(static_cast<double>(events_) / config_.rate));
  std::this_thread::sleep_until(due);
}

void BatchPublisher::Flush() {
  if (pending_.empty()) return;
  Pace();
  views_.clear();
  for (const ScriptEvent& event : pending_) {
    MooncakeEvent view;
    view.event_id = next_event_id_++;
    view.stored = event.stored;
    view.cleared = event.cleared;
    view.second_generation = config_.second_generation;
    view.object_key = event.object_key;
    view.group_id = event.group_id;
    view.tenant_id = event.tenant_id;
    view.medium = event.medium;
    view.backend_id = config_.backend_id;
    view.base_block_idx = event.base_block_idx;
    views_.push_back(view);
  }
  const int64_t timestamp =
      config_.timestamp_ms ? *config_.timestamp_ms
                           : std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
  payload_.clear();
  EncodeMooncakePayload(timestamp, views_, &payload_);
  const uint64_t sequence = next_sequence_++;
  const std::array<uint8_t, 8> sequence_frame = EncodeSequence(sequence);
  socket_.send(zmq::buffer(config_.topic), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(sequence_frame), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(payload_), zmq::send_flags::none);
  if (messages_ == 0) first_sequence_sent_ = sequence;
  last_sequence_sent_ = sequence;
  ++messages_;
  events_ += pending_.size();
  counters_.published_events.fetch_add(pending_.size(), std::memory_order_relaxed);
  counters_.published_batches.fetch_add(1, std::memory_order_release);  // after the send, as Mooncake counts
  pending_.clear();
}

void BatchPublisher::Skip(uint64_t n) {
  ConsumeSequences(n);
  skipped_ += n;
  counters_.published_batches.fetch_add(n, std::memory_order_release);
}

void BatchPublisher::ConsumeSequences(uint64_t n) {
  Flush();
  next_sequence_ += n;
}

void BatchPublisher::Close() {
  if (!open_) return;
  Flush();
  open_ = false;
  socket_.close();
  context_.close();  // waits up to linger_ms for the queued messages to leave
}

}  // namespace sci::tools
