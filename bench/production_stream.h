// The production message stream of the ingest benchmarks (apply_bench,
// scale_bench): what the Mooncake master sends for SGLang pages, 64 events a
// message, object keys "<64 hex>_<rank>_k|v" and group ids
// "sglang-hicache:<64 hex>" (tp8: 16 objects per page), every field of the
// production map encoded by EncodeMooncakePayload. One cycle stores
// kStreamChunks messages of new pages (ForeignPageHash with salt 0xFEED,
// which no benchmark index holds), then removes them in as many messages:
// applied over and over, it is steady churn at the index's size.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "encode/mooncake_encoder.h"
#include "query_fixture.h"
#include "wire/wire_decoder.h"

namespace sci::bench {

constexpr size_t kStreamBatch = 64;    // events a message
constexpr size_t kStreamChunks = 512;  // messages of stores, then as many of their removals

// Payloads of the 2 * kStreamChunks messages of one cycle.
struct ProductionStream {
  std::vector<std::string> keys, groups;
  std::vector<std::string> payloads;
  size_t payload_bytes = 0;

  ProductionStream() {
    const size_t n = kStreamChunks * kStreamBatch;
    for (size_t k = 0; k < n; ++k) {
      const std::string hash = ForeignPageHash(k / 16, /*salt=*/0xFEED);
      keys.push_back(hash + "_" + std::to_string(k % 16 / 2) + (k % 2 == 0 ? "_k" : "_v"));
      groups.push_back("sglang-hicache:" + hash);
    }
    uint64_t event_id = 1;
    for (bool stored : {true, false}) {
      for (size_t chunk = 0; chunk < kStreamChunks; ++chunk) {
        std::vector<MooncakeEvent> events(kStreamBatch);
        for (size_t i = 0; i < kStreamBatch; ++i) {
          const size_t k = chunk * kStreamBatch + i;
          MooncakeEvent& e = events[i];
          // The stream is replayed in cycles: its first event carries no
          // id (0, no publisher's number), so that the wrap from the last
          // id back to the first is not read as a restart (Index::ApplyBatch).
          e.event_id = stored && k == 0 ? 0 : event_id++;
          e.stored = stored;
          e.object_key = keys[k];
          e.group_id = groups[k];
          e.medium = "cpu";
          e.base_block_idx = k / 16;
        }
        std::string payload;
        EncodeMooncakePayload(/*timestamp_ms=*/1'764'000'000'000, events, &payload);
        payload_bytes += payload.size();
        payloads.push_back(std::move(payload));
      }
    }
  }

  static const ProductionStream& Get() {
    static const ProductionStream* const stream = new ProductionStream();
    return *stream;
  }
};

// The frames of one message: empty topic, the sequence, the payload.
class MessageFrames {
 public:
  std::span<const std::span<const uint8_t>> Of(uint64_t sequence, const std::string& payload) {
    sequence_ = EncodeSequence(sequence);
    frames_[0] = std::span<const uint8_t>();
    frames_[1] = std::span<const uint8_t>(sequence_.data(), sequence_.size());
    frames_[2] = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
    return frames_;
  }

 private:
  std::array<uint8_t, 8> sequence_{};
  std::span<const uint8_t> frames_[3];
};

}  // namespace sci::bench
