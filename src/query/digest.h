// A 32-byte SHA-256 digest as both families chain them (SGLang's page
// hashes, vLLM's block hashes), and its lowercase hex form: what their
// object keys carry.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace sci {

using PageDigest = std::array<uint8_t, 32>;

inline constexpr size_t kPageHashHexLength = 64;

// Writes the 64 lowercase hex characters of `digest` to `out` (no NUL).
void ToHex(const PageDigest& digest, char* out);

// Whether `s` could be a digest in hex: exactly 64 lowercase hex characters.
bool IsPageHashHex(std::string_view s);

}  // namespace sci
