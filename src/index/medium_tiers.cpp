#include "index/medium_tiers.h"

#include <array>

#include "common/cat.h"

namespace sci {

bool MediumTiers::Parse(std::string_view text, MediumTiers* out, std::string* error) {
  if (text.empty()) {
    *out = MediumTiers();
    return true;
  }
  MediumTiers parsed;
  parsed.media_.clear();
  std::array<bool, kMax> used{};
  int slowest = 0;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(start, end - start);
    start = end + 1;
    const size_t equals = item.rfind('=');
    if (equals == std::string_view::npos || equals == 0) {
      *error = Cat("'", item, "' is not medium=tier (say \"cpu=0,disk=1\")");
      return false;
    }
    const std::string_view name = item.substr(0, equals);
    const std::string_view tier = item.substr(equals + 1);
    if (tier.size() != 1 || tier[0] < '0' || tier[0] >= '0' + kMax) {
      *error = Cat("medium '", name, "' has tier '", tier, "' (tiers are 0 to ", kMax - 1, ", fastest first)");
      return false;
    }
    for (const auto& [known, unused] : parsed.media_) {
      if (known == name) {
        *error = Cat("medium '", name, "' is named twice");
        return false;
      }
    }
    if (parsed.media_.size() == kMaxMedia) {
      *error = Cat("more than ", kMaxMedia, " media named");
      return false;
    }
    const int t = tier[0] - '0';
    parsed.media_.emplace_back(std::string(name), static_cast<uint8_t>(t));
    used[t] = true;
    if (t > slowest) slowest = t;
  }
  for (int t = 0; t <= slowest; ++t) {
    if (!used[t]) {
      *error = Cat("tier ", t, " has no medium (tiers run from 0 to the slowest without a gap)");
      return false;
    }
  }
  parsed.n_tiers_ = slowest + 1;
  *out = std::move(parsed);
  return true;
}

std::string MediumTiers::ToString() const {
  std::string text;
  for (const auto& [name, tier] : media_) {
    if (!text.empty()) text += ',';
    text += Cat(name, "=", int{tier});
  }
  return text;
}

}  // namespace sci
