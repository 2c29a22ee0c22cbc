// One HTTP(S) request with libcurl, its body streamed to a callback chunk
// by chunk (never held whole), cancellable from another thread.
//
// Conservative by construction, because what it fetches is trusted as the
// truth about a cache pool:
//   - only http:// and https:// (no file://, no other scheme libcurl knows);
//   - redirects are not followed (a 3xx is just a status other than 200);
//   - no proxy from the environment (http_proxy, ...) unless asked: a router
//     process inherits whatever its shell had;
//   - one time-out for the whole exchange, connection included;
//   - a body is delivered only under status 200, so an error page is never
//     mistaken for data; a body shorter than its Content-Length is an error.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace sci {

struct HttpRequest {
  std::string url;
  uint32_t timeout_ms = 60000;   // the whole exchange; must be > 0
  bool proxy_from_env = false;
  // Empty = GET. Otherwise POSTed with Content-Type application/json.
  std::string json_body;
};

class HttpDownload {
 public:
  // Receives the body in order. Returning false aborts the transfer (the
  // download then fails with the reason the callback left in *error).
  using BodySink = std::function<bool(std::string_view chunk, std::string* error)>;

  HttpDownload();
  ~HttpDownload();
  HttpDownload(const HttpDownload&) = delete;
  HttpDownload& operator=(const HttpDownload&) = delete;

  // Runs the request on the calling thread. Returns true when the status
  // was 200 and the whole body reached `sink`; otherwise false with a
  // one-line reason in *error (status, time-out, truncation, cancel, ...).
  // Called at most once per object.
  bool Run(const HttpRequest& request, const BodySink& sink, std::string* error);

  // From any thread, any number of times: makes Run return false promptly.
  void Cancel();

 private:
  struct Handles;  // libcurl stays out of this header
  Handles* handles_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace sci
