#include "admin_server.h"

#include <httplib.h>

#include <algorithm>

#include "absl/strings/str_format.h"

namespace sci::tools {
namespace {

constexpr size_t kChunkBytes = 64 * 1024;

}  // namespace

AdminServer::AdminServer(const HeldKeys& keys, const PublisherCounters& counters)
    : keys_(keys), counters_(counters), server_(std::make_unique<httplib::Server>()) {
  server_->Get("/kv_events/status", [this](const httplib::Request&, httplib::Response& response) {
    int http_status = 200;
    std::string body;
    if (status_override_ && status_override_(&http_status, &body)) {
      response.status = http_status;
      response.set_content(body, "application/json");
      return;
    }
    // Three loads, not one instant: as Mooncake's own handler reads them.
    const uint64_t dropped = counters_.dropped_events.load(std::memory_order_acquire);
    const uint64_t batches = counters_.published_batches.load(std::memory_order_acquire);
    const uint64_t events = counters_.published_events.load(std::memory_order_relaxed);
    response.set_content(absl::StrFormat("{\"enabled\":true,\"published_batches\":%d,\"published_events\":%d,"
                                         "\"dropped_events\":%d,\"skipped_unparsed_keys\":0}",
                                         batches, events, dropped),
                         "application/json");
  });
  server_->Get("/get_all_keys", [this](const httplib::Request&, httplib::Response& response) {
    std::shared_ptr<const std::string> body = listing_source_ ? listing_source_() : keys_.Listing();
    served_.fetch_add(1, std::memory_order_relaxed);
    const size_t length = body->size();
    if (length == 0) {
      // cpp-httplib never completes a provider of zero bytes.
      response.set_content("", "text/plain");
      return;
    }
    response.set_content_provider(length, "text/plain",
                                  [body](size_t offset, size_t length_left, httplib::DataSink& sink) {
                                    const size_t n = std::min({kChunkBytes, length_left, body->size() - offset});
                                    return sink.write(body->data() + offset, n);
                                  });
  });
}

AdminServer::~AdminServer() { Stop(); }

bool AdminServer::Start(const std::string& host, int port, std::string* error) {
  port_ = port == 0 ? server_->bind_to_any_port(host) : (server_->bind_to_port(host, port) ? port : -1);
  if (port_ < 0) {
    *error = absl::StrFormat("admin server: cannot bind %s:%d", host, port);
    return false;
  }
  thread_ = std::thread([this] {
    server_->listen_after_bind();
    listen_returned_.store(true, std::memory_order_release);
  });
  // cpp-httplib's stop() does nothing until the server thread has begun to
  // listen: a Stop right after Start (a SIGTERM as soon as the tool says it
  // is ready) would then join a thread that accepts for ever. Returning
  // only once it listens (or gave up) makes every later Stop take effect.
  while (!server_->is_running() && !listen_returned_.load(std::memory_order_acquire)) std::this_thread::yield();
  return true;
}

void AdminServer::Stop() {
  if (!thread_.joinable()) return;
  server_->stop();
  thread_.join();
}

}  // namespace sci::tools
