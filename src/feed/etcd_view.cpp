#include "feed/etcd_view.h"

#include "common/json_text.h"

#include <charconv>
#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "common/format.h"
#include "absl/strings/str_join.h"

namespace sci {
namespace {

// A range response is a few hundred bytes; anything larger is not etcd.
constexpr size_t kMaxResponseBytes = 64 << 10;

// etcd's gateway renders int64 fields as JSON strings ("5"); accept numbers too.
bool ReadInt64(const nlohmann::json& value, int64_t* out) {
  if (value.is_number_integer()) {
    *out = value.get<int64_t>();
    return true;
  }
  if (!value.is_string()) return false;
  const std::string& s = value.get_ref<const std::string&>();
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

std::string MasterViewKey(std::string_view cluster_id) {
  return sci::StrFormat("mooncake-store/%s/master_view", cluster_id);
}

std::string RangeRequestBody(std::string_view key) {
  JsonDocument document;
  nlohmann::json& request = document.value;
  request["key"] = absl::Base64Escape(absl::string_view(key.data(), key.size()));
  return request.dump();
}

LeaderViewStatus ParseRangeResponse(std::string_view body, LeaderView* view, std::string* error) {
  JsonDocument document;
  document.value = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  const nlohmann::json& response = document.value;
  if (!response.is_object()) {
    *error = "etcd's answer is not a JSON object";
    return LeaderViewStatus::kMalformed;
  }
  const auto kvs = response.find("kvs");
  if (kvs == response.end() || (kvs->is_array() && kvs->empty())) return LeaderViewStatus::kAbsent;
  if (!kvs->is_array() || kvs->size() != 1 || !(*kvs)[0].is_object()) {
    *error = "etcd's answer has a malformed \"kvs\"";
    return LeaderViewStatus::kMalformed;
  }
  const nlohmann::json& kv = (*kvs)[0];
  const auto value = kv.find("value");
  std::string decoded;
  if (value == kv.end() || !value->is_string() ||
      !absl::Base64Unescape(value->get_ref<const std::string&>(), &decoded)) {
    *error = "the view's value is missing or not base64";
    return LeaderViewStatus::kMalformed;
  }
  const auto revision = kv.find("create_revision");
  int64_t create_revision = 0;
  if (revision == kv.end() || !ReadInt64(*revision, &create_revision)) {
    *error = "the view has no create_revision";
    return LeaderViewStatus::kMalformed;
  }
  std::string host;
  if (!ParseLeaderAddress(decoded, &host)) {
    *error = sci::StrFormat("the view's value \"%s\" is not host:port", absl::CHexEscape(decoded));
    return LeaderViewStatus::kMalformed;
  }
  view->host = std::move(host);
  view->address = std::move(decoded);
  view->version = create_revision;
  return LeaderViewStatus::kFound;
}

LeaderViewStatus ReadLeaderView(HttpDownload& download, std::string_view endpoint, std::string_view cluster_id,
                              uint32_t timeout_ms, bool proxy_from_env, LeaderView* view, std::string* error) {
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.remove_suffix(1);
  HttpRequest request;
  request.url = sci::StrFormat("%s/v3/kv/range", endpoint);
  request.timeout_ms = timeout_ms;
  request.proxy_from_env = proxy_from_env;
  request.json_body = RangeRequestBody(MasterViewKey(cluster_id));
  std::string body;
  const bool ok = download.Run(
      request,
      [&body](std::string_view chunk, std::string* why) {
        if (body.size() + chunk.size() > kMaxResponseBytes) {
          *why = "etcd's answer is too large";
          return false;
        }
        body.append(chunk);
        return true;
      },
      error);
  if (!ok) return LeaderViewStatus::kUnreachable;
  return ParseRangeResponse(body, view, error);
}

EtcdViewSource::EtcdViewSource(std::vector<std::string> endpoints, std::string cluster_id, uint32_t timeout_ms,
                               bool proxy_from_env)
    : endpoints_(std::move(endpoints)),
      cluster_id_(std::move(cluster_id)),
      timeout_ms_(timeout_ms),
      proxy_from_env_(proxy_from_env) {}

void EtcdViewSource::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  if (in_flight_ != nullptr) in_flight_->Cancel();
}

LeaderViewStatus EtcdViewSource::Read(LeaderView* view, std::string* error) {
  std::vector<std::string> failures;
  for (const std::string& endpoint : endpoints_) {
    HttpDownload download;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_) {
        *error = "cancelled";
        return LeaderViewStatus::kUnreachable;
      }
      in_flight_ = &download;
    }
    const LeaderViewStatus status =
        ReadLeaderView(download, endpoint, cluster_id_, timeout_ms_, proxy_from_env_, view, error);
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_ = nullptr;
    }
    if (status != LeaderViewStatus::kUnreachable) return status;
    failures.push_back(sci::StrFormat("%s: %s", absl::CHexEscape(endpoint), *error));
  }
  *error = absl::StrJoin(failures, "; ");
  return LeaderViewStatus::kUnreachable;
}

}  // namespace sci
