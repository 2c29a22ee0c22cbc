// C thunks for the live subscriber: translate the options, start, stop.
#include <memory>
#include <string>

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
    options.endpoint.assign(endpoint);
    options.topic.assign(topic);
    // 0 means "the default" in the C struct.
    if (opts->reconnect_ms != 0) options.reconnect_ms = opts->reconnect_ms;
    if (opts->reconnect_max_ms != 0) options.reconnect_max_ms = opts->reconnect_max_ms;
    if (opts->stale_after_ms != 0) options.stale_after_ms = opts->stale_after_ms;

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

void sci_subscriber_stop(sci_subscriber* sub) {
  if (sub == nullptr) return;
  sci::capi::GuardVoid("sci_subscriber_stop", [&] { delete sub; });
}

}  // extern "C"
