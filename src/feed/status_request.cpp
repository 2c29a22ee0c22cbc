#include "feed/status_request.h"

#include <exception>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/json_text.h"

namespace sci {
namespace {

// The status answer is a handful of counters: anything longer is not it.
constexpr size_t kMaxStatusBytes = 64 << 10;

}  // namespace

bool ParsePublisherStatus(std::string_view body, PublisherStatus* out, std::string* why) {
  JsonDocument document;
  nlohmann::json& status = document.value;
  if (!ParseJson(body, &status, why)) return false;
  if (!status.is_object()) {
    *why = "not a JSON object";
    return false;
  }
  if (const nlohmann::json* enabled = JsonMember(status, "enabled"); enabled != nullptr && *enabled == false) {
    *why = "the publisher is not enabled";
    return false;
  }
  const nlohmann::json* batches = JsonMember(status, "published_batches");
  if (batches == nullptr || !batches->is_number_unsigned()) {
    *why = "no unsigned published_batches";
    return false;
  }
  const nlohmann::json* dropped = JsonMember(status, "dropped_events");
  if (dropped != nullptr && !dropped->is_number_unsigned()) {
    *why = "dropped_events is not unsigned";
    return false;
  }
  *out = PublisherStatus{};
  out->published_batches = batches->get<uint64_t>();
  out->has_dropped_events = dropped != nullptr;
  if (dropped != nullptr) out->dropped_events = dropped->get<uint64_t>();
  return true;
}

std::string StatusUrlBeside(std::string_view snapshot_url) {
  if (snapshot_url.empty()) return {};
  const size_t scheme = snapshot_url.find("://");
  const size_t host = scheme == std::string_view::npos ? 0 : scheme + 3;
  const size_t path = snapshot_url.find('/', host);
  return std::string(snapshot_url.substr(0, path)) + "/kv_events/status";
}

std::string ResolveStatusUrl(std::string_view configured, std::string_view snapshot_url) {
  return configured.empty() ? StatusUrlBeside(snapshot_url) : std::string(configured);
}

StatusRequest::StatusRequest(HttpRequest request, WakeSignal& done)
    : thread_([this, request = std::move(request), &done] { Run(request, done); }) {}

StatusRequest::~StatusRequest() {
  download_.Cancel();
  if (thread_.joinable()) thread_.join();
}

void StatusRequest::Run(const HttpRequest& request, WakeSignal& done) noexcept {
  try {
    std::string body;
    ok_ = download_.Run(
              request,
              [&body](std::string_view chunk, std::string* error) {
                if (body.size() + chunk.size() > kMaxStatusBytes) {
                  *error = "the answer is longer than a status";
                  return false;
                }
                body.append(chunk);
                return true;
              },
              &error_) &&
          ParsePublisherStatus(body, &status_, &error_);
  } catch (const std::exception& e) {
    ok_ = false;
    error_ = e.what();
  }
  finished_.store(true, std::memory_order_release);
  done.Notify();
}

}  // namespace sci
