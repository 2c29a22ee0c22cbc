// The admin HTTP server of the stand-in master (sci-publish --admin-port),
// the part of the Mooncake master's metrics-port server a resync needs:
//
//   GET /get_all_keys  -> 200 text/plain, the held keys of the default
//                         tenant, one per line, each line ending in '\n'
//                         (empty body: no key), with a Content-Length.
//   GET /kv_events/status -> 200 JSON {enabled, published_batches,
//                         published_events, dropped_events,
//                         skipped_unparsed_keys}, from the publisher's
//                         counters (publisher_counters.h).
//
// The body is taken at one instant, then streamed in chunks. Other paths
// answer 404. It serves from its own threads (cpp-httplib) until Stop.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "held_keys.h"
#include "publisher_counters.h"

namespace httplib {
class Server;
}

namespace sci::tools {

class AdminServer {
 public:
  // Both must outlive it.
  AdminServer(const HeldKeys& keys, const PublisherCounters& counters);
  ~AdminServer();  // stops
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // Binds host:port (port 0: any free port) and starts serving; returns once
  // the server thread listens. False with *error if the address cannot be
  // bound.
  bool Start(const std::string& host, int port, std::string* error);
  // The port it listens on (the real one when 0 was asked for).
  int port() const { return port_; }
  // Stops serving and joins the server thread; idempotent.
  void Stop();

  // Requests answered so far (for the tool's summary).
  uint64_t listings_served() const { return served_.load(std::memory_order_relaxed); }

 private:
  const HeldKeys& keys_;
  const PublisherCounters& counters_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<bool> listen_returned_{false};
  int port_ = -1;
  std::atomic<uint64_t> served_{0};
};

}  // namespace sci::tools
