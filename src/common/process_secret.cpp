#include "common/process_secret.h"

#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>

#include "common/splitmix64.h"

namespace sci {
namespace {

std::array<uint8_t, 32> MakeProcessSecret() {
  std::array<uint8_t, 32> key{};
  size_t have = 0;
  while (have < key.size()) {
    const ssize_t n = getrandom(key.data() + have, key.size() - have, 0);
    if (n < 0 && errno == EINTR) continue;  // a signal before any byte: ask again
    if (n <= 0) break;
    have += static_cast<size_t>(n);
  }
  if (have == key.size()) return key;
  // No getrandom (an old kernel, a seccomp filter): std::random_device, and
  // if even that fails the clock, the process id and an address, spread
  // over all 32 bytes (every derived key reads its own bytes). What the
  // secret keys stays exact for honest inputs; only its secrecy is weaker.
  try {
    std::random_device device;
    for (size_t i = 0; i < key.size(); i += 4) {
      const uint32_t word = device();
      std::memcpy(key.data() + i, &word, 4);
    }
  } catch (...) {
    uint64_t state = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                     (static_cast<uint64_t>(::getpid()) << 32) ^ reinterpret_cast<uintptr_t>(&key);
    for (size_t i = 0; i < key.size(); i += 8) {
      const uint64_t word = SplitMix64(state);
      std::memcpy(key.data() + i, &word, 8);
    }
  }
  return key;
}

}  // namespace

const std::array<uint8_t, 32>& ProcessSecret() {
  static const std::array<uint8_t, 32> key = MakeProcessSecret();
  return key;
}

SipKey ProcessSubkey(std::string_view purpose) {
  static const SipKey master = [] {
    SipKey k;
    std::memcpy(&k.k0, ProcessSecret().data() + 16, 8);
    std::memcpy(&k.k1, ProcessSecret().data() + 24, 8);
    return k;
  }();
  // Without allocating (a first call may come from a query, which must not
  // throw) and over the whole name: the second word under a key the first
  // word is part of.
  const uint64_t k0 = SipHash24(master, purpose);
  return SipKey{k0, SipHash24(SipKey{k0, master.k1}, purpose)};
}

}  // namespace sci
