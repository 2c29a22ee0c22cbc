#include "feed/etcd_view.h"

#include <charconv>
#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"

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

bool SplitHostPort(std::string_view address, std::string* host) {
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  const std::string_view h = address.substr(0, colon);
  const std::string_view port = address.substr(colon + 1);
  uint32_t p = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (ec != std::errc() || end != port.data() + port.size() || p == 0 || p > 65535) return false;
  for (char c : h) {
    // A host name or an IP literal; nothing that could smuggle a path,
    // credentials or another scheme into the URLs built from it.
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '-' || c == ':' || c == '[' || c == ']';
    if (!ok) return false;
  }
  host->assign(h);
  return true;
}

}  // namespace

std::string MasterViewKey(std::string_view cluster_id) {
  return absl::StrFormat("mooncake-store/%s/master_view", cluster_id);
}

std::string RangeRequestBody(std::string_view key) {
  nlohmann::json request;
  request["key"] = absl::Base64Escape(absl::string_view(key.data(), key.size()));
  return request.dump();
}

EtcdViewStatus ParseRangeResponse(std::string_view body, LeaderView* view, std::string* error) {
  const nlohmann::json response = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!response.is_object()) {
    *error = "etcd's answer is not a JSON object";
    return EtcdViewStatus::kMalformed;
  }
  const auto kvs = response.find("kvs");
  if (kvs == response.end() || (kvs->is_array() && kvs->empty())) return EtcdViewStatus::kAbsent;
  if (!kvs->is_array() || kvs->size() != 1 || !(*kvs)[0].is_object()) {
    *error = "etcd's answer has a malformed \"kvs\"";
    return EtcdViewStatus::kMalformed;
  }
  const nlohmann::json& kv = (*kvs)[0];
  const auto value = kv.find("value");
  std::string decoded;
  if (value == kv.end() || !value->is_string() ||
      !absl::Base64Unescape(value->get_ref<const std::string&>(), &decoded)) {
    *error = "the view's value is missing or not base64";
    return EtcdViewStatus::kMalformed;
  }
  const auto revision = kv.find("create_revision");
  int64_t create_revision = 0;
  if (revision == kv.end() || !ReadInt64(*revision, &create_revision)) {
    *error = "the view has no create_revision";
    return EtcdViewStatus::kMalformed;
  }
  std::string host;
  if (!SplitHostPort(decoded, &host)) {
    *error = absl::StrFormat("the view's value \"%s\" is not host:port", absl::CHexEscape(decoded));
    return EtcdViewStatus::kMalformed;
  }
  view->host = std::move(host);
  view->address = std::move(decoded);
  view->create_revision = create_revision;
  return EtcdViewStatus::kFound;
}

EtcdViewStatus ReadLeaderView(HttpDownload& download, std::string_view endpoint, std::string_view cluster_id,
                              uint32_t timeout_ms, bool proxy_from_env, LeaderView* view, std::string* error) {
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.remove_suffix(1);
  HttpRequest request;
  request.url = absl::StrFormat("%s/v3/kv/range", endpoint);
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
  if (!ok) return EtcdViewStatus::kUnreachable;
  return ParseRangeResponse(body, view, error);
}

}  // namespace sci
