// The machine's floor under a cold page query: what check_pages would
// cost if the index were nothing but one random 64-byte line a page.
//
// It does HashPagesAlone's work (SHA-256 of each page, chained) and reads
// one line a page, chosen by the page's digest, from a buffer as large as
// the index, pipelined the way check_pages pipelines its page entries
// (query/round_pipeline.h): a round of 16 pages is hashed, then its lines
// are prefetched together, then the previous round's lines are read. No
// fingerprint, no lock, no plan: paired with hashing alone under the same
// eviction, its ratio is the part of check_pages' ratio that the machine
// charges for touching a random line a page (bench/README.md, "Page
// store": on this VM, a nested page walk per line after dram512m).
#pragma once

#include <sys/mman.h>

#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <random>
#include <stdexcept>
#include <vector>

#include "common/prefetch.h"
#include "query/digest.h"
#include "workloads.h"

namespace sci::bench {

// A buffer of at least `bytes`, huge-page aligned and advised as the
// index's tables are (fingerprint_table.h, Map), every page touched: the
// memory a floor reads in place of the index.
class TableSizedBuffer {
 public:
  explicit TableSizedBuffer(size_t bytes) : bytes_((bytes + kHugePage - 1) / kHugePage * kHugePage) {
    void* mapped = ::mmap(nullptr, bytes_ + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) throw std::runtime_error("TableSizedBuffer: mmap failed");
    mapped_ = mapped;
    const auto start = reinterpret_cast<uintptr_t>(mapped);
    data_ = reinterpret_cast<uint8_t*>((start + kHugePage - 1) & ~(kHugePage - 1));
    (void)::madvise(data_, bytes_, MADV_HUGEPAGE);
    std::memset(data_, 1, bytes_);
  }
  ~TableSizedBuffer() { ::munmap(mapped_, bytes_ + kHugePage); }
  TableSizedBuffer(const TableSizedBuffer&) = delete;
  TableSizedBuffer& operator=(const TableSizedBuffer&) = delete;

  const uint8_t* data() const { return data_; }
  size_t lines() const { return bytes_ / 64; }

 private:
  static constexpr size_t kHugePage = size_t{2} << 20;
  size_t bytes_;
  void* mapped_ = nullptr;
  uint8_t* data_ = nullptr;
};

// Byte offsets of `count` random lines of `buffer`, the same every run.
inline std::vector<size_t> RandomLineOffsets(const TableSizedBuffer& buffer, size_t count) {
  std::mt19937_64 rng(3);
  std::vector<size_t> offsets(count);
  for (size_t& offset : offsets) offset = rng() % buffer.lines() * 64;
  return offsets;
}

// Reads the line at `offset`. With `dependent`, its address waits for
// `last`, the value of the read before (every byte is 1: `last - 1` is 0,
// but known only once read), as a lookup that must finish before the next
// starts; without, the core runs ahead to the next reads while one is out.
inline uint8_t ReadLine(const TableSizedBuffer& buffer, size_t offset, uint8_t last, bool dependent) {
  return buffer.data()[offset + (dependent ? last - 1u : 0u)];
}

class RandomLineFloor {
 public:
  explicit RandomLineFloor(size_t bytes) : buffer_(bytes) {}

  // Hashes the first `pages` pages of `tokens` and reads a line for each;
  // returns the sum of the bytes read (for DoNotOptimize).
  uint64_t Query(const std::vector<uint32_t>& tokens, size_t pages) const {
    constexpr size_t kRound = 16;  // page_query.cpp, kPagesPerRound
    constexpr size_t kPageBytes = kPageSize * sizeof(uint32_t);
    const auto* bytes = reinterpret_cast<const uint8_t*>(tokens.data());
    const uint8_t* lines = buffer_.data();
    const size_t n_lines = buffer_.lines();
    size_t offsets[2][kRound];
    size_t in_round[2] = {0, 0};
    PageDigest digest{};
    uint64_t sum = 0;
    for (size_t first = 0, round = 0; first < pages + kRound; first += kRound, ++round) {
      size_t* hashed = offsets[round & 1];
      size_t& n = in_round[round & 1];
      n = first < pages ? std::min(kRound, pages - first) : 0;
      for (size_t i = 0; i < n; ++i) {
        SHA256_CTX ctx;
        SHA256_Init(&ctx);
        if (first + i > 0) SHA256_Update(&ctx, digest.data(), digest.size());
        SHA256_Update(&ctx, bytes + (first + i) * kPageBytes, kPageBytes);
        SHA256_Final(digest.data(), &ctx);
        uint64_t h;
        std::memcpy(&h, digest.data(), sizeof h);
        hashed[i] = (h % n_lines) * 64;
      }
      for (size_t i = 0; i < n; ++i) PrefetchForRead(lines + hashed[i]);
      const size_t* previous = offsets[(round + 1) & 1];
      for (size_t i = 0; round > 0 && i < in_round[(round + 1) & 1]; ++i) sum += lines[previous[i]];
    }
    return sum;
  }

 private:
  TableSizedBuffer buffer_;
};

}  // namespace sci::bench
