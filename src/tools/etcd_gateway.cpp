#include "etcd_gateway.h"

#include <httplib.h>

#include <charconv>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace sci::tools {
namespace {

using Json = nlohmann::json;

// The gateway writes int64 fields as strings ("5"), and omits zero values.
int64_t Int64Field(const Json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end()) return 0;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (!it->is_string()) return -1;
  const std::string& text = it->get_ref<const std::string&>();
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size() ? value : -1;
}

bool ParseJson(const std::string& body, Json* out, std::string* error) {
  *out = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded() || !out->is_object()) {
    *error = "etcd answered with a body that is not a JSON object: " + body.substr(0, 200);
    return false;
  }
  return true;
}

}  // namespace

bool EtcdGateway::ParseEndpoints(const std::string& comma_separated, std::vector<std::string>* out,
                                 std::string* error) {
  out->clear();
  for (absl::string_view endpoint : absl::StrSplit(comma_separated, ',', absl::SkipWhitespace())) {
    std::string url(endpoint);
    if (url.rfind("https://", 0) == 0) {
      *error = absl::StrFormat("etcd endpoint \"%s\": https is not supported, use http://", url);
      return false;
    }
    if (url.rfind("http://", 0) != 0) url = "http://" + url;
    const std::string host_port = url.substr(7);
    const size_t colon = host_port.rfind(':');
    int port = 0;
    const char* port_end = host_port.data() + host_port.size();
    if (colon == std::string::npos || colon == 0 ||
        std::from_chars(host_port.data() + colon + 1, port_end, port).ptr != port_end || port <= 0 || port > 65535 ||
        host_port.find('/') != std::string::npos) {
      *error = absl::StrFormat("etcd endpoint \"%s\" is not host:port or http://host:port", endpoint);
      return false;
    }
    out->push_back(url);
  }
  if (out->empty()) {
    *error = "no etcd endpoint given";
    return false;
  }
  return true;
}

EtcdGateway::EtcdGateway(std::vector<std::string> endpoints, std::chrono::milliseconds timeout)
    : endpoints_(std::move(endpoints)), timeout_(timeout) {}

bool EtcdGateway::Post(const std::string& path, const std::string& json, std::string* body, std::string* error) {
  std::string failures;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    const size_t at = (preferred_ + i) % endpoints_.size();
    httplib::Client client(endpoints_[at]);
    client.set_connection_timeout(timeout_);
    client.set_read_timeout(timeout_);
    client.set_write_timeout(timeout_);
    const httplib::Result result = client.Post(path, json, "application/json");
    if (!result) {
      absl::StrAppendFormat(&failures, "%s%s: %s", failures.empty() ? "" : "; ", endpoints_[at],
                            httplib::to_string(result.error()));
      continue;
    }
    if (result->status != 200) {
      absl::StrAppendFormat(&failures, "%s%s: HTTP %d %s", failures.empty() ? "" : "; ", endpoints_[at], result->status,
                            result->body.substr(0, 200));
      continue;
    }
    preferred_ = at;
    *body = std::move(result->body);
    return true;
  }
  *error = absl::StrFormat("etcd %s failed: %s", path, failures);
  return false;
}

bool EtcdGateway::Get(const std::string& key, std::optional<std::string>* value, std::string* error) {
  std::string body;
  Json answer;
  if (!Post("/v3/kv/range", Json{{"key", absl::Base64Escape(key)}}.dump(), &body, error) ||
      !ParseJson(body, &answer, error)) {
    return false;
  }
  value->reset();
  const auto kvs = answer.find("kvs");
  if (kvs == answer.end() || !kvs->is_array() || kvs->empty()) return true;
  const Json& kv = kvs->front();
  std::string decoded;
  if (!kv.is_object() || !absl::Base64Unescape(kv.value("value", std::string()), &decoded)) {
    *error = "etcd range answer holds a value that is not base64";
    return false;
  }
  *value = std::move(decoded);
  return true;
}

bool EtcdGateway::GrantLease(int64_t ttl_seconds, int64_t* lease, std::string* error) {
  std::string body;
  Json answer;
  if (!Post("/v3/lease/grant", Json{{"TTL", std::to_string(ttl_seconds)}}.dump(), &body, error) ||
      !ParseJson(body, &answer, error)) {
    return false;
  }
  *lease = Int64Field(answer, "ID");
  if (*lease <= 0) {
    *error = "etcd granted no lease: " + body.substr(0, 200);
    return false;
  }
  return true;
}

bool EtcdGateway::CreateWithLease(const std::string& key, const std::string& value, int64_t lease, bool* created,
                                  std::string* error) {
  const std::string key64 = absl::Base64Escape(key);
  const Json request = {
      {"compare", Json::array({{{"key", key64}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", "0"}}})},
      {"success",
       Json::array({{{"request_put",
                      {{"key", key64}, {"value", absl::Base64Escape(value)}, {"lease", std::to_string(lease)}}}}})},
  };
  std::string body;
  Json answer;
  if (!Post("/v3/kv/txn", request.dump(), &body, error) || !ParseJson(body, &answer, error)) return false;
  *created = answer.value("succeeded", false);
  return true;
}

bool EtcdGateway::KeepAlive(int64_t lease, int64_t* ttl_seconds, std::string* error) {
  std::string body;
  Json answer;
  if (!Post("/v3/lease/keepalive", Json{{"ID", std::to_string(lease)}}.dump(), &body, error) ||
      !ParseJson(body, &answer, error)) {
    return false;
  }
  // A streaming call: the gateway wraps the one answer in "result".
  const Json& result = answer.contains("result") ? answer["result"] : answer;
  *ttl_seconds = result.is_object() ? Int64Field(result, "TTL") : -1;
  if (*ttl_seconds < 0) {
    *error = "etcd keepalive answer without a TTL: " + body.substr(0, 200);
    return false;
  }
  return true;
}

bool EtcdGateway::Revoke(int64_t lease, std::string* error) {
  std::string body;
  return Post("/v3/lease/revoke", Json{{"ID", std::to_string(lease)}}.dump(), &body, error);
}

}  // namespace sci::tools
