// C thunks for the live subscriber: translate the options, start, stop.
#include <memory>
#include <string>
#include <string_view>
#include <tuple>

#include "absl/cleanup/cleanup.h"
#include "capi_support.h"
#include "handles.h"
#include "feed/subscriber.h"

using sci::capi::Fail;
using sci::capi::Failf;
using sci::capi::Guard;
using sci::capi::HasStructSize;
using sci::capi::ToView;

extern "C" {

sci_status sci_subscriber_start(sci_index* index, const sci_subscriber_options* opts, sci_subscriber** out) {
  return Guard("sci_subscriber_start", [&] {
    if (out == nullptr) return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_subscriber_start: out is NULL");
    *out = nullptr;
    if (index == nullptr) return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_subscriber_start: index is NULL");
    if (opts == nullptr) return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_subscriber_start: opts is NULL");
    constexpr size_t kNeeded = SCI_FIELD_END(sci_subscriber_options, stale_after_ms);
    if (!HasStructSize(opts->struct_size, kNeeded)) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "sci_subscriber_start: opts->struct_size %u is too small (need >= %u)",
                   opts->struct_size, kNeeded);
    }
    std::string_view endpoint, topic;
    if (!ToView(opts->endpoint, &endpoint)) {
      return Fail(SCI_ERR_INVALID_ARGUMENT,
                  "sci_subscriber_start: opts->endpoint has a NULL ptr and a non-zero len");
    }
    if (!ToView(opts->topic, &topic)) {
      return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_subscriber_start: opts->topic has a NULL ptr and a non-zero len");
    }
    sci::SubscriberOptions options;
    std::string etcd_endpoints, cluster_id;
    options.endpoint.assign(endpoint);
    options.topic.assign(topic);
    // 0 means "the default" in the C struct.
    if (opts->reconnect_ms != 0) options.reconnect_ms = opts->reconnect_ms;
    if (opts->reconnect_max_ms != 0) options.reconnect_max_ms = opts->reconnect_max_ms;
    if (opts->stale_after_ms != 0) options.stale_after_ms = opts->stale_after_ms;
    // 1.1 and 1.2 fields: each read only when the caller's struct has it.
#define SCI_HAS(field) HasStructSize(opts->struct_size, SCI_FIELD_END(sci_subscriber_options, field))
    for (const auto& [name, has, in, value] :
         {std::tuple{"snapshot_url", SCI_HAS(snapshot_url), opts->snapshot_url, &options.snapshot_url},
          std::tuple{"etcd_endpoints", SCI_HAS(etcd_endpoints), opts->etcd_endpoints, &etcd_endpoints},
          std::tuple{"cluster_id", SCI_HAS(cluster_id), opts->cluster_id, &cluster_id},
          // 1.2: a caller compiled before it gets 1.1's behaviour (no Redis).
          std::tuple{"redis_endpoint", SCI_HAS(redis_endpoint), opts->redis_endpoint, &options.redis_endpoint},
          // 1.3: a caller compiled before it gets the status derived from snapshot_url.
          std::tuple{"status_url", SCI_HAS(status_url), opts->status_url, &options.status_url}}) {
      if (!has) continue;
      std::string_view view;
      if (!ToView(in, &view)) {
        return Failf(SCI_ERR_INVALID_ARGUMENT, "sci_subscriber_start: opts->%s has a NULL ptr and a non-zero len",
                     name);
      }
      value->assign(view);
    }
    options.etcd_endpoints = sci::SplitEndpointList(etcd_endpoints);
    if (!cluster_id.empty()) options.cluster_id = cluster_id;
    if (SCI_HAS(resync_min_interval_ms) && opts->resync_min_interval_ms != 0) {
      options.resync_min_interval_ms = opts->resync_min_interval_ms;
    }
    if (SCI_HAS(snapshot_timeout_ms) && opts->snapshot_timeout_ms != 0) {
      options.snapshot_timeout_ms = opts->snapshot_timeout_ms;
    }
    if (SCI_HAS(event_port)) options.event_port = opts->event_port;
    if (SCI_HAS(admin_port) && opts->admin_port != 0) options.admin_port = opts->admin_port;
    if (SCI_HAS(status_poll_ms) && opts->status_poll_ms != 0) options.status_poll_ms = opts->status_poll_ms;
    // 1.3.0: a caller compiled before it gets the new defaults (a real
    // disconnect resyncs; the catch-up's withholding bounded at 30 s).
    if (SCI_HAS(reconnect_policy)) {
      if (opts->reconnect_policy != SCI_RECONNECT_RESYNC && opts->reconnect_policy != SCI_RECONNECT_EVENT_IDS) {
        return Failf(SCI_ERR_INVALID_ARGUMENT,
                     "sci_subscriber_start: opts->reconnect_policy %u is neither SCI_RECONNECT_RESYNC (0) nor "
                     "SCI_RECONNECT_EVENT_IDS (1)",
                     opts->reconnect_policy);
      }
      options.reconnect_policy = static_cast<sci::ReconnectPolicy>(opts->reconnect_policy);
    }
    if (SCI_HAS(resync_catch_up_max_ms) && opts->resync_catch_up_max_ms != 0) {
      options.resync_catch_up_max_ms = opts->resync_catch_up_max_ms;
    }
#undef SCI_HAS

    if (index->core->has_subscriber.exchange(true)) {
      return Fail(SCI_ERR_INVALID_ARGUMENT,
                  "sci_subscriber_start: the index already has a subscriber (one per index: stop it first)");
    }
    // Released on every way out but success (a failed start, an exception).
    auto release_claim = absl::MakeCleanup([&] { index->core->has_subscriber.store(false); });
    sci::SubscriberError code = sci::SubscriberError::kNone;
    std::string error;
    std::unique_ptr<sci::Subscriber> subscriber = sci::Subscriber::Start(
        std::shared_ptr<sci::Index>(index->core, &index->core->index), options, &code, &error);
    if (subscriber == nullptr) {
      // Argument errors name the option ("endpoint ...", "reconnect_ms ...").
      if (code == sci::SubscriberError::kInvalidArgument) {
        return Failf(SCI_ERR_INVALID_ARGUMENT, "sci_subscriber_start: opts->%s", error);
      }
      return Failf(SCI_ERR_IO, "sci_subscriber_start: %s", error);
    }
    *out = new sci_subscriber(index->core, std::move(subscriber));
    std::move(release_claim).Cancel();
    return SCI_OK;
  });
}

sci_status sci_subscriber_retarget(sci_subscriber* sub, sci_str endpoint, sci_str snapshot_url) {
  return Guard("sci_subscriber_retarget", [&] {
    if (sub == nullptr) return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_subscriber_retarget: sub is NULL");
    std::string_view endpoint_view, url_view;
    if (!ToView(endpoint, &endpoint_view)) {
      return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_subscriber_retarget: endpoint has a NULL ptr and a non-zero len");
    }
    if (!ToView(snapshot_url, &url_view)) {
      return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_subscriber_retarget: snapshot_url has a NULL ptr and a non-zero len");
    }
    std::string error;
    const sci::SubscriberError code =
        sub->impl->Retarget(std::string(endpoint_view), std::string(url_view), &error);
    if (code == sci::SubscriberError::kInvalidArgument) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "sci_subscriber_retarget: %s", error);
    }
    if (code == sci::SubscriberError::kNoMemory) {
      return Fail(SCI_ERR_NO_MEMORY,
                  "sci_subscriber_retarget: out of memory part-way; the index is cleared, call again");
    }
    if (code != sci::SubscriberError::kNone) return Failf(SCI_ERR_IO, "sci_subscriber_retarget: %s", error);
    return SCI_OK;
  });
}

void sci_subscriber_stop(sci_subscriber* sub) {
  if (sub == nullptr) return;
  sci::capi::GuardVoid("sci_subscriber_stop", [&] { delete sub; });
}

}  // extern "C"
