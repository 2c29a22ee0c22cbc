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
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>

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

  // Faults for a simulation's nemesis (tests/simulation_test.cpp); set
  // before Start, called on the server's threads. `status`: when it returns
  // true, GET /kv_events/status answers its HTTP status and body instead of
  // the counters (a lagging, reset, missing or foreign status). `listing`:
  // the body of GET /get_all_keys instead of the held keys' listing (so that
  // the caller can record what each download was served, or delay it).
  using StatusOverride = std::function<bool(int* http_status, std::string* body)>;
  using ListingSource = std::function<std::shared_ptr<const std::string>()>;
  void SetFaultHooks(StatusOverride status, ListingSource listing) {
    status_override_ = std::move(status);
    listing_source_ = std::move(listing);
  }

  // Requests answered so far (for the tool's summary).
  uint64_t listings_served() const { return served_.load(std::memory_order_relaxed); }

 private:
  const HeldKeys& keys_;
  const PublisherCounters& counters_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::atomic<bool> listen_returned_{false};
  int port_ = -1;
  StatusOverride status_override_;
  ListingSource listing_source_;
  std::atomic<uint64_t> served_{0};
};

}  // namespace sci::tools
