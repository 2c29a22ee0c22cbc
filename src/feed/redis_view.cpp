#include "feed/redis_view.h"

#include <charconv>

#include "absl/strings/escaping.h"
#include "common/format.h"

namespace sci {

std::string RedisNamespace(std::string_view cluster_id) {
  if (!cluster_id.empty() && cluster_id.back() == '/') cluster_id.remove_suffix(1);
  std::string ns(cluster_id);
  for (char& c : ns) {
    if (c == '{' || c == '}') c = '_';
  }
  return ns;
}

std::string RedisMasterViewKey(std::string_view cluster_id) {
  return sci::StrFormat("mooncake-store/{%s}/master_view", RedisNamespace(cluster_id));
}

std::string RedisViewVersionKey(std::string_view cluster_id) {
  return sci::StrFormat("mooncake-store/{%s}/master_view_version", RedisNamespace(cluster_id));
}

LeaderViewStatus ParseMasterViewReply(const RedisReply& reply, LeaderView* view, std::string* error) {
  if (reply.type == RedisReply::Type::kError) {
    *error = sci::StrFormat("Redis refused HMGET on the view: %s", reply.text);
    return LeaderViewStatus::kMalformed;
  }
  if (reply.type != RedisReply::Type::kArray || reply.elements.size() != 2) {
    *error = "Redis' answer to HMGET is not an array of two";
    return LeaderViewStatus::kMalformed;
  }
  const RedisReply& address = reply.elements[0];
  const RedisReply& version = reply.elements[1];
  const bool has_address = address.type == RedisReply::Type::kString;
  const bool has_version = version.type == RedisReply::Type::kString;
  // Mooncake writes both fields in one script; one alone is not a view.
  if (!has_address || !has_version) return LeaderViewStatus::kAbsent;
  int64_t v = 0;
  const std::string& text = version.text;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    *error = sci::StrFormat("the view's view_version \"%s\" is not an integer", absl::CHexEscape(text));
    return LeaderViewStatus::kMalformed;
  }
  std::string host;
  if (!ParseLeaderAddress(address.text, &host)) {
    *error = sci::StrFormat("the view's leader_address \"%s\" is not host:port", absl::CHexEscape(address.text));
    return LeaderViewStatus::kMalformed;
  }
  view->host = std::move(host);
  view->address = address.text;
  view->version = v;
  return LeaderViewStatus::kFound;
}

RedisViewSource::RedisViewSource(RedisAddress address, std::string cluster_id, std::chrono::milliseconds timeout)
    : connection_(std::move(address), timeout), view_key_(RedisMasterViewKey(cluster_id)) {}

LeaderViewStatus RedisViewSource::Read(LeaderView* view, std::string* error) {
  RedisReply reply;
  if (!connection_.Command({"HMGET", view_key_, "leader_address", "view_version"}, &reply, error)) {
    return LeaderViewStatus::kUnreachable;
  }
  return ParseMasterViewReply(reply, view, error);
}

}  // namespace sci
