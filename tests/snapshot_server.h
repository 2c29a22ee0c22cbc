// Test support: a real HTTP server on loopback (cpp-httplib) that serves a
// Mooncake master's `GET /get_all_keys` from a key set the test keeps, and
// can misbehave on request: another status, a body cut short, a last line
// without its '\n', a line too long, an answer held back until released.
#pragma once

#include <httplib.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

namespace sci::testing {

class SnapshotServer {
 public:
  enum class Fault { kNone, kStatus500, kShortBody, kNoFinalNewline, kLineTooLong };

  // Listens on `host` at `port` (0 = any free port).
  explicit SnapshotServer(const std::string& host = "127.0.0.1", int port = 0) : host_(host) {
    server_.Get("/get_all_keys", [this](const httplib::Request&, httplib::Response& response) { Serve(response); });
    // The publisher's counters, beside the listing on a real master: 404
    // until a test gives them (SetStatus), as on an older master.
    server_.Get("/kv_events/status", [this](const httplib::Request&, httplib::Response& response) {
      std::function<std::string()> status;
      {
        std::lock_guard<std::mutex> lock(mu_);
        status = status_;
      }
      if (!status) {
        response.status = 404;
        return;
      }
      response.set_content(status(), "application/json");
    });
    port_ = port == 0 ? server_.bind_to_any_port(host) : (server_.bind_to_port(host, port) ? port : -1);
    if (port_ <= 0) throw std::runtime_error("cannot bind the snapshot server on " + host);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~SnapshotServer() { Close(); }

  void Close() {
    Release();
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }

  int port() const { return port_; }
  std::string url() const { return "http://" + host_ + ":" + std::to_string(port_) + "/get_all_keys"; }

  void Add(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    keys_.insert(key);
  }
  void Erase(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    keys_.erase(key);
  }
  // What GET /kv_events/status answers (called on the server's threads).
  void SetStatus(std::function<std::string()> status) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = std::move(status);
  }
  void SetFault(Fault fault) {
    std::lock_guard<std::mutex> lock(mu_);
    fault_ = fault;
  }
  // Holds every answer back until Release(); the keys are read once
  // released. requests() counts the requests that have arrived.
  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = true;
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_ = false;
    }
    released_.notify_all();
  }
  int requests() const { return requests_.load(); }

 private:
  void Serve(httplib::Response& response) {
    requests_.fetch_add(1);
    std::unique_lock<std::mutex> lock(mu_);
    released_.wait(lock, [this] { return !held_; });
    std::string body;
    for (const std::string& key : keys_) body += key + "\n";
    switch (fault_) {
      case Fault::kNone:
        break;
      case Fault::kStatus500:
        response.status = 500;
        response.set_content("master busy\n", "text/plain");
        return;
      case Fault::kShortBody: {
        // Content-Length promises more than is sent; the connection closes.
        const size_t promised = body.size() + 100;
        response.set_content_provider(promised, "text/plain",
                                      [body](size_t offset, size_t, httplib::DataSink& sink) {
                                        if (offset < body.size()) {
                                          sink.write(body.data() + offset, body.size() - offset);
                                          return true;
                                        }
                                        return false;  // abort: fewer bytes than promised
                                      });
        return;
      }
      case Fault::kNoFinalNewline:
        body += "a-key-cut-off";
        break;
      case Fault::kLineTooLong:
        body += std::string(65537, 'k') + "\n";
        break;
    }
    response.set_content(body, "text/plain");
  }

  httplib::Server server_;
  std::string host_;
  int port_ = -1;
  std::mutex mu_;
  std::condition_variable released_;
  std::set<std::string> keys_;
  Fault fault_ = Fault::kNone;
  std::function<std::string()> status_;
  bool held_ = false;
  std::atomic<int> requests_{0};
  std::thread thread_;
};

}  // namespace sci::testing
