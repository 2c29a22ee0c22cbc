#include "feed/leader_view.h"

#include <charconv>

namespace sci {

bool ParseLeaderAddress(std::string_view address, std::string* host) {
  const size_t colon = address.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  const std::string_view h = address.substr(0, colon);
  const std::string_view port = address.substr(colon + 1);
  uint32_t p = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (ec != std::errc() || end != port.data() + port.size() || p == 0 || p > 65535) return false;
  for (char c : h) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '-' || c == ':' || c == '[' || c == ']';
    if (!ok) return false;
  }
  host->assign(h);
  return true;
}

}  // namespace sci
