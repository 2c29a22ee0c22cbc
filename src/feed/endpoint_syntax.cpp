#include "feed/endpoint_syntax.h"

#include <charconv>

#include "absl/strings/escaping.h"
#include "common/format.h"

namespace sci {
namespace {

constexpr std::string_view kTcp = "tcp://";
constexpr std::string_view kIpc = "ipc://";

bool IsPort(std::string_view text) {
  uint32_t port = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  return ec == std::errc() && end == text.data() + text.size() && port >= 1 && port <= 65535;
}

// "host:port" after tcp://: the port after the last ':' (an IPv6 literal is
// "[::1]:port"); the host non-empty, without spaces or control characters.
bool IsTcpAddress(std::string_view address, EndpointUse use) {
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  const std::string_view host = address.substr(0, colon);
  const std::string_view port = address.substr(colon + 1);
  for (unsigned char c : host) {
    if (c <= ' ' || c == 0x7f || c == '/') return false;
  }
  if (use == EndpointUse::kBind && port == "*") return true;
  return IsPort(port);
}

std::string Quote(std::string_view text) { return absl::CHexEscape(absl::string_view(text.data(), text.size())); }

}  // namespace

std::string CheckEndpointSyntax(std::string_view name, std::string_view endpoint, EndpointUse use) {
  const char* expected = use == EndpointUse::kBind ? "tcp://host:port (host may be *, port may be *) or ipc://path"
                                                   : "tcp://host:port or ipc://path";
  if (endpoint.empty()) return sci::StrFormat("%s is empty; it must look like %s", name, expected);
  const std::string quoted = Quote(endpoint);
  if (endpoint.find('\0') != std::string_view::npos) {
    return sci::StrFormat("%s \"%s\" contains a NUL byte", name, quoted);
  }
  if (endpoint.starts_with(kTcp)) {
    if (IsTcpAddress(endpoint.substr(kTcp.size()), use)) return {};
    return sci::StrFormat("%s \"%s\" is not tcp://host:port (a port of 1..65535)%s", name, quoted,
                           use == EndpointUse::kBind ? " or tcp://host:*" : "");
  }
  if (endpoint.starts_with(kIpc)) {
    if (endpoint.size() > kIpc.size()) return {};
    return sci::StrFormat("%s \"%s\" has no path: it must look like ipc:///tmp/kv.ipc", name, quoted);
  }
  const size_t scheme_end = endpoint.find("://");
  if (scheme_end == std::string_view::npos) {
    return sci::StrFormat("%s \"%s\" has no transport: it must look like %s (e.g. tcp://%s)", name, quoted,
                           expected, quoted);
  }
  return sci::StrFormat("%s \"%s\": transport \"%s\" is not supported; it must look like %s", name, quoted,
                         Quote(endpoint.substr(0, scheme_end)), expected);
}

}  // namespace sci
