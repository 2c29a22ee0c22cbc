#include "common/process_secret.h"

#include <sys/random.h>

#include <chrono>
#include <random>

namespace sci {
namespace {

std::array<uint8_t, 32> MakeProcessSecret() {
  std::array<uint8_t, 32> key{};
  size_t have = 0;
  while (have < key.size()) {
    const ssize_t n = getrandom(key.data() + have, key.size() - have, 0);
    if (n <= 0) break;
    have += static_cast<size_t>(n);
  }
  if (have == key.size()) return key;
  // No getrandom (an old kernel, a seccomp filter): std::random_device, and
  // the clock if even that fails. What it keys stays exact for honest
  // inputs; only its secrecy is weaker.
  try {
    std::random_device device;
    for (size_t i = 0; i < key.size(); i += 4) {
      const uint32_t word = device();
      std::memcpy(key.data() + i, &word, 4);
    }
  } catch (...) {
    const uint64_t now = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    std::memcpy(key.data(), &now, sizeof now);
  }
  return key;
}

}  // namespace

const std::array<uint8_t, 32>& ProcessSecret() {
  static const std::array<uint8_t, 32> key = MakeProcessSecret();
  return key;
}

}  // namespace sci
