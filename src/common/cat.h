// Cat(parts...): strings and integers joined into one std::string, for
// error messages. (The library's abseil may predate std::string_view as
// absl::string_view, so absl::StrCat would not take ours.)
#pragma once

#include <concepts>
#include <string>
#include <string_view>

namespace sci {

inline void AppendPart(std::string* out, std::string_view text) { out->append(text); }
template <std::integral Number>
void AppendPart(std::string* out, Number n) {
  out->append(std::to_string(n));
}
template <typename... Parts>
std::string Cat(const Parts&... parts) {
  std::string out;
  (AppendPart(&out, parts), ...);
  return out;
}

}  // namespace sci
