#include "feed/http_download.h"

#include <curl/curl.h>

#include <mutex>
#include <new>

#include "common/format.h"
#include "common/sigpipe_block.h"

namespace sci {
namespace {

// libcurl's process-wide set-up, once; never torn down (the library may be
// unloaded while another user of libcurl in the process still needs it).
void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw std::bad_alloc();
  });
}

// Bytes libcurl hands the write callback at most per call: large enough that
// a 1 GB snapshot is a few thousand calls, small enough to stay in cache.
constexpr long kReceiveBufferBytes = 256 << 10;

// How long one curl_multi_poll may sleep; Cancel() wakes it earlier.
constexpr int kPollMs = 1000;

struct Transfer {
  const HttpDownload::BodySink* sink = nullptr;
  CURL* easy = nullptr;
  bool status_checked = false;
  long status = 0;
  std::string sink_error;  // set when the sink (or the status check) aborted
  curl_off_t received = 0;
};

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  if (!t->status_checked) {
    t->status_checked = true;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->status);
  }
  // Anything but 200 (an error page, a redirect's body) is not data.
  if (t->status != 200) {
    t->sink_error = sci::StrFormat("HTTP status %d (expected 200)", t->status);
    return CURL_WRITEFUNC_ERROR;
  }
  t->received += static_cast<curl_off_t>(bytes);
  if (!(*t->sink)(std::string_view(data, bytes), &t->sink_error)) return CURL_WRITEFUNC_ERROR;
  return bytes;
}

}  // namespace

struct HttpDownload::Handles {
  CURLM* multi = nullptr;
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  ~Handles() {
    SigpipeBlock no_sigpipe;  // a TLS connection's cleanup may still write (below)
    if (multi != nullptr && easy != nullptr) curl_multi_remove_handle(multi, easy);
    if (easy != nullptr) curl_easy_cleanup(easy);
    if (multi != nullptr) curl_multi_cleanup(multi);
    curl_slist_free_all(headers);
  }
};

HttpDownload::HttpDownload() {
  InitCurlOnce();
  handles_ = new Handles;
  handles_->multi = curl_multi_init();
  handles_->easy = curl_easy_init();
  if (handles_->multi == nullptr || handles_->easy == nullptr) {
    delete handles_;
    throw std::bad_alloc();
  }
}

HttpDownload::~HttpDownload() { delete handles_; }

void HttpDownload::Cancel() {
  cancelled_.store(true, std::memory_order_release);
  curl_multi_wakeup(handles_->multi);
}

bool HttpDownload::Run(const HttpRequest& request, const BodySink& sink, std::string* error) {
  // CURLOPT_NOSIGNAL (below) stops libcurl from ignoring SIGPIPE for the
  // process, as it must; a write to a server that went away -- through TLS
  // above all -- may then raise it. Blocked in this thread instead.
  SigpipeBlock no_sigpipe;
  CURL* easy = handles_->easy;
  Transfer transfer;
  transfer.sink = &sink;
  transfer.easy = easy;

  curl_easy_setopt(easy, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
  // An empty proxy string turns off the environment's proxy variables.
  if (!request.proxy_from_env) curl_easy_setopt(easy, CURLOPT_PROXY, "");
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout_ms));
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(request.timeout_ms));
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);  // a library must not touch the process's signals
  curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, kReceiveBufferBytes);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &transfer);
  // Content-Encoding is not asked for: the body is exactly the bytes sent.
  if (!request.json_body.empty()) {
    handles_->headers = curl_slist_append(handles_->headers, "Content-Type: application/json");
    if (handles_->headers == nullptr) throw std::bad_alloc();
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, handles_->headers);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.json_body.size()));
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, request.json_body.data());
  }

  if (curl_multi_add_handle(handles_->multi, easy) != CURLM_OK) {
    *error = "libcurl cannot start the transfer";
    return false;
  }
  CURLcode result = CURLE_OK;
  bool done = false;
  while (!done) {
    if (cancelled_.load(std::memory_order_acquire)) {
      *error = "cancelled";
      return false;
    }
    int running = 0;
    if (curl_multi_perform(handles_->multi, &running) != CURLM_OK) {
      *error = "libcurl multi interface failed";
      return false;
    }
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(handles_->multi, &queued)) {
      if (msg->msg == CURLMSG_DONE) {
        result = msg->data.result;
        done = true;
      }
    }
    if (!done && curl_multi_poll(handles_->multi, nullptr, 0, kPollMs, nullptr) != CURLM_OK) {
      *error = "libcurl multi interface failed";
      return false;
    }
  }

  if (!transfer.sink_error.empty()) {
    *error = transfer.sink_error;
    return false;
  }
  if (result != CURLE_OK) {
    *error = curl_easy_strerror(result);
    return false;
  }
  long status = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  if (status != 200) {  // a response without a body never reached OnBody
    *error = sci::StrFormat("HTTP status %d (expected 200)", status);
    return false;
  }
  curl_off_t expected = -1;
  curl_easy_getinfo(easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &expected);
  if (expected >= 0 && transfer.received != expected) {
    *error = sci::StrFormat("body has %d bytes, Content-Length says %d", transfer.received, expected);
    return false;
  }
  return true;
}

}  // namespace sci
