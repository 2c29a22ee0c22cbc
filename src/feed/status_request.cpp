#include "feed/status_request.h"

#include <algorithm>
#include <exception>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/escaping.h"
#include "common/json_text.h"

namespace sci {
namespace {

// The status answer is a handful of counters: anything longer is not it.
constexpr size_t kMaxStatusBytes = 64 << 10;

// The first member name the object at the top of `text` (valid JSON) holds
// twice, or empty. A parser keeps one of the two values, and which one is
// the parser's choice: counters named twice say nothing certain.
std::string DuplicateTopLevelName(std::string_view text) {
  struct Names : JsonSaxAcceptingAll {
    int depth = 0;
    std::vector<std::string> seen;
    std::string duplicate;
    bool start_object(std::size_t) override { return ++depth, true; }
    bool key(string_t& name) override {
      if (depth != 1) return true;
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
        duplicate = name;
        return false;
      }
      seen.push_back(name);
      return true;
    }
    bool end_object() override { return --depth, true; }
    bool start_array(std::size_t) override { return ++depth, true; }
    bool end_array() override { return --depth, true; }
  } names;
  nlohmann::json::sax_parse(text.begin(), text.end(), &names);
  return names.duplicate;
}

// A cumulative 64-bit count that a real publisher can have reached: the
// largest value is what a wrapped or uninitialised counter shows.
bool IsCount(const nlohmann::json& value) {
  return value.is_number_unsigned() && value.get<uint64_t>() != UINT64_MAX;
}

}  // namespace

bool ParsePublisherStatus(std::string_view body, PublisherStatus* out, std::string* why) {
  JsonDocument document;
  nlohmann::json& status = document.value;
  if (!ParseJson(body, &status, why)) return false;
  if (!status.is_object()) {
    *why = "not a JSON object";
    return false;
  }
  if (std::string name = DuplicateTopLevelName(body); !name.empty()) {
    *why = "\"" + absl::CHexEscape(name) + "\" appears twice";
    return false;
  }
  if (const nlohmann::json* enabled = JsonMember(status, "enabled"); enabled != nullptr) {
    if (!enabled->is_boolean()) {
      *why = "enabled is not true or false";
      return false;
    }
    if (*enabled == false) {
      *why = "the publisher is not enabled";
      return false;
    }
  }
  const nlohmann::json* batches = JsonMember(status, "published_batches");
  if (batches == nullptr || !IsCount(*batches)) {
    *why = "no published_batches below 2^64 - 1";
    return false;
  }
  const nlohmann::json* dropped = JsonMember(status, "dropped_events");
  if (dropped != nullptr && !IsCount(*dropped)) {
    *why = "dropped_events is not a count below 2^64 - 1";
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
