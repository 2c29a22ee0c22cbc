#include "feed/subscriber.h"

#include <climits>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "common/format.h"
#include "feed/endpoint_syntax.h"
#include "feed/redis_view.h"
#include "feed/subscriber_loop.h"

namespace sci {
namespace {

bool FitsInt(uint32_t value) { return value <= static_cast<uint32_t>(INT_MAX); }

// Whether `url` can be a snapshot URL: http:// or https://, no NUL, space or
// control character (libcurl would reject some, misread others).
bool IsHttpUrl(const std::string& url) {
  if (!absl::StartsWithIgnoreCase(url, "http://") && !absl::StartsWithIgnoreCase(url, "https://")) return false;
  for (unsigned char c : url) {
    if (c <= ' ' || c == 0x7f) return false;
  }
  return true;
}

std::string CheckSnapshotUrl(const char* name, const std::string& url) {
  if (url.empty() || IsHttpUrl(url)) return {};
  return sci::StrFormat("%s \"%s\" is not an http:// or https:// URL", name, absl::CHexEscape(url));
}

std::string CheckEndpoint(const std::string& endpoint) {
  return CheckEndpointSyntax("endpoint", endpoint, EndpointUse::kConnect);
}

bool FollowsLeader(const SubscriberOptions& options) {
  return !options.etcd_endpoints.empty() || !options.redis_endpoint.empty();
}

}  // namespace

std::vector<std::string> SplitEndpointList(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    while (!item.empty() && absl::ascii_isspace(static_cast<unsigned char>(item.front()))) item.remove_prefix(1);
    while (!item.empty() && absl::ascii_isspace(static_cast<unsigned char>(item.back()))) item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
  }
  return out;
}


namespace {

// Checks every option; an empty string when they can work, else a message
// naming the first one that cannot.
std::string CheckOptions(const SubscriberOptions& options) {
  if (!options.etcd_endpoints.empty() && !options.redis_endpoint.empty()) {
    return "redis_endpoint and etcd_endpoints are mutually exclusive: the leader view is read from one store";
  }
  if (FollowsLeader(options)) {
    const bool redis = !options.redis_endpoint.empty();
    const char* store_option = redis ? "redis_endpoint" : "etcd_endpoints";
    if (!options.endpoint.empty()) {
      return sci::StrFormat("endpoint \"%s\" must be empty with %s: the leader's address comes from %s",
                             absl::CHexEscape(options.endpoint), store_option, redis ? "Redis" : "etcd");
    }
    if (!options.snapshot_url.empty()) {
      return sci::StrFormat(
          "snapshot_url must be empty with %s: it is the leader's http://<ip>:<admin_port>/get_all_keys",
          store_option);
    }
    if (!options.status_url.empty()) {
      return sci::StrFormat(
          "status_url must be empty with %s: it is the leader's http://<ip>:<admin_port>/kv_events/status",
          store_option);
    }
    for (const std::string& e : options.etcd_endpoints) {
      if (!IsHttpUrl(e)) {
        return sci::StrFormat("etcd_endpoints: \"%s\" is not an http:// or https:// URL", absl::CHexEscape(e));
      }
    }
    if (redis) {
      RedisAddress address;
      std::string why;
      if (!ParseRedisUrl(options.redis_endpoint, &address, &why)) {
        // Never quoted whole: the URL may hold a password.
        return sci::StrFormat("redis_endpoint: %s (redis://[:password@]host:port[/db])", why);
      }
    }
    if (options.cluster_id.empty()) return "cluster_id is empty";
    for (unsigned char c : options.cluster_id) {
      if (c <= ' ' || c == 0x7f) {
        return sci::StrFormat("cluster_id \"%s\" contains a space or control character",
                               absl::CHexEscape(options.cluster_id));
      }
    }
    if (options.event_port == 0 || options.event_port > 65535) {
      return sci::StrFormat("event_port %d is not a port (1..65535; required with %s)", options.event_port,
                             store_option);
    }
    if (options.admin_port == 0 || options.admin_port > 65535) {
      return sci::StrFormat("admin_port %d is not a port (1..65535)", options.admin_port);
    }
    if (options.etcd_poll_ms == 0 || !FitsInt(options.etcd_poll_ms)) {
      return sci::StrFormat("etcd_poll_ms %d is out of range", options.etcd_poll_ms);
    }
  } else if (std::string e = CheckEndpoint(options.endpoint); !e.empty()) {
    return e;
  }
  if (std::string e = CheckSnapshotUrl("snapshot_url", options.snapshot_url); !e.empty()) return e;
  if (std::string e = CheckSnapshotUrl("status_url", options.status_url); !e.empty()) return e;
  if (options.status_poll_ms == 0) return "status_poll_ms is 0 (UINT32_MAX: never read the status)";
  if (options.status_poll_ms != UINT32_MAX && !FitsInt(options.status_poll_ms)) {
    return sci::StrFormat("status_poll_ms %d is too large (at most %d, or UINT32_MAX for never)",
                          options.status_poll_ms, INT_MAX);
  }
  if (options.reconnect_ms == 0) return "reconnect_ms is 0";
  for (const auto& [name, value] : {std::pair{"reconnect_ms", options.reconnect_ms},
                                    std::pair{"reconnect_max_ms", options.reconnect_max_ms},
                                    std::pair{"stale_after_ms", options.stale_after_ms},
                                    std::pair{"resync_min_interval_ms", options.resync_min_interval_ms},
                                    std::pair{"snapshot_timeout_ms", options.snapshot_timeout_ms}}) {
    if (!FitsInt(value)) return sci::StrFormat("%s %d is too large (at most %d)", name, value, INT_MAX);
  }
  if (options.resync_min_interval_ms == 0) return "resync_min_interval_ms is 0";
  if (options.resync_catch_up_max_ms == 0) return "resync_catch_up_max_ms is 0";
  if (!FitsInt(options.resync_catch_up_max_ms)) {
    return sci::StrFormat("resync_catch_up_max_ms %d is too large (at most %d)", options.resync_catch_up_max_ms,
                          INT_MAX);
  }
  if (options.reconnect_policy != ReconnectPolicy::kResync &&
      options.reconnect_policy != ReconnectPolicy::kTrustEventIds) {
    return sci::StrFormat("reconnect_policy %d is not a policy", static_cast<uint32_t>(options.reconnect_policy));
  }
  if (options.snapshot_timeout_ms == 0) return "snapshot_timeout_ms is 0";
  if (options.resync_buffer_bytes == 0) return "resync_buffer_bytes is 0";
  if (options.receive_hwm < 0) return sci::StrFormat("receive_hwm %d is negative", options.receive_hwm);
  return {};
}

}  // namespace

std::unique_ptr<Subscriber> Subscriber::Start(Index& index, const SubscriberOptions& options,
                                              SubscriberError* code, std::string* error) {
  // Aliasing an empty owner: a pointer to `index` that owns nothing.
  return Start(std::shared_ptr<Index>(std::shared_ptr<Index>(), &index), options, code, error);
}

std::unique_ptr<Subscriber> Subscriber::Start(std::shared_ptr<Index> index, const SubscriberOptions& options,
                                              SubscriberError* code, std::string* error) {
  *code = SubscriberError::kInvalidArgument;
  if (std::string problem = CheckOptions(options); !problem.empty()) {
    *error = std::move(problem);
    return nullptr;
  }

  *code = SubscriberError::kIo;
  try {
    auto loop = std::make_unique<Loop>(std::move(index), options);
    if (!loop->Connect(code, error)) return nullptr;
    std::unique_ptr<Subscriber> subscriber(new Subscriber(std::move(loop)));
    // The sockets move to the new thread; starting it is the memory barrier
    // ZeroMQ asks for when a socket changes threads.
    subscriber->thread_ = std::thread([loop = subscriber->loop_.get()] {
      loop->Run();
      if (loop->owned_by_thread()) delete loop;
    });
    if (FollowsLeader(options)) subscriber->loop_->FollowLeader(options);
    *code = SubscriberError::kNone;
    return subscriber;
  } catch (const zmq::error_t& e) {
    *error = sci::StrFormat("cannot set up the ZeroMQ socket: %s", e.what());
  } catch (const std::system_error& e) {
    *error = sci::StrFormat("cannot start the subscriber thread: %s", e.what());
  }
  return nullptr;
}

Subscriber::Subscriber(std::unique_ptr<Loop> loop) : loop_(std::move(loop)) {}

Subscriber::~Subscriber() { Stop(); }

void Subscriber::Stop() {
  if (loop_ == nullptr) return;
  // Without waiting: the follower may be in the middle of a retarget that
  // only the loop's thread, woken below, can finish. The loop's destructor
  // joins it.
  loop_->StopFollowing();
  loop_->Wake();
  if (thread_.get_id() == std::this_thread::get_id()) {
    // From a callback on the subscriber's own thread: see the header.
    loop_->HandOverToThread();
    (void)loop_.release();
    thread_.detach();
    return;
  }
  if (thread_.joinable()) thread_.join();
  loop_.reset();  // closes the sockets (linger 0), then terminates the context
}

SubscriberError Subscriber::Retarget(const std::string& endpoint, const std::string& snapshot_url,
                                     std::string* error) {
  if (std::string e = CheckEndpoint(endpoint); !e.empty()) {
    *error = std::move(e);
    return SubscriberError::kInvalidArgument;
  }
  if (std::string e = CheckSnapshotUrl("snapshot_url", snapshot_url); !e.empty()) {
    *error = std::move(e);
    return SubscriberError::kInvalidArgument;
  }
  if (loop_ == nullptr) {
    *error = "the subscriber is stopped";
    return SubscriberError::kIo;
  }
  return loop_->Retarget(endpoint, snapshot_url, error);
}

}  // namespace sci
