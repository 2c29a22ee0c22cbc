// Fuzzes the vLLM queries with extras against a straightforward reference
// (vllm_reference.h): a small layout of up to three groups (full
// attention, sliding window -- windows near 2^32 included -- and Mamba), a
// request over a four-token alphabet (so prompts share prefixes and the
// digest memo is consulted, filled and reused), extras from a small pool
// (none, a LoRA name, a salt, both, an empty salt, the same bytes as LoRA
// name and as salt, bytes from the input), and a history of stores and
// removals of the chunks of the request under some extras, under the
// layout's tenant or another, and tenant clears. After each step a query
// under some extras, repeated so the memo sees it a first, second and third
// time, must answer exactly what the reference says: Dynamo's prefix and the
// per-block hits recomputed from the keys present, with the digests hashed
// again without the memo. The same request by digests and by event hashes
// must agree too.
//
// Input (fuzz_input.h, every read past the end is 0): the layout (groups,
// sizes, windows, prefixes, tenant, algorithm), the token count and tokens,
// the two input-given extras, then steps.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "index/index.h"
#include "query/digest.h"
#include "vllm/block_hash.h"
#include "vllm/chunk_query.h"
#include "vllm/layout.h"
#include "vllm_reference.h"

namespace sci::fuzz {
namespace {

vllm::LayoutSpec ReadSpec(FuzzInput& in) {
  vllm::LayoutSpec spec;
  spec.algorithm = in.Bool() ? vllm::HashAlgorithm::kSha256Cbor : vllm::HashAlgorithm::kSha256;
  spec.python_hash_seed = in.Bool() ? "1" : "0";
  const uint32_t hash_block = 1 + in.Byte() % 4;
  spec.main_event_block_size = hash_block * (1 + in.Byte() % 3);
  spec.lcm_block_size = in.Bool() ? hash_block * (1 + in.Byte() % 4) : 0;
  static const char* const kTenants[] = {"", "t1", "t2"};
  spec.tenant_id = kTenants[in.Byte() % 3];
  const size_t groups = 1 + in.Byte() % 3;
  for (size_t g = 0; g < groups; ++g) {
    vllm::GroupSpec group;
    group.kind = static_cast<vllm::GroupKind>(in.Byte() % 3);
    group.hash_block_size = hash_block;
    group.block_size = hash_block * (1 + in.Byte() % 4);
    if (group.kind == vllm::GroupKind::kSlidingWindow) {
      const uint8_t w = in.Byte();
      // Small windows, or within a few blocks of 2^32 (issue #34, R3).
      group.sliding_window = (w & 0x80) != 0 ? UINT32_MAX - (w & 0x3F) : 1 + w % 40;
    }
    const size_t prefixes = 1 + in.Byte() % 2;
    for (size_t p = 0; p < prefixes; ++p) {
      group.key_prefixes.push_back("m@tp_rank:" + std::to_string(p) + "@group:" + std::to_string(g));
    }
    spec.groups.push_back(std::move(group));
  }
  return spec;
}

class Harness {
 public:
  Harness(FuzzInput& in, const vllm::LayoutSpec& spec, std::unique_ptr<const vllm::Layout> layout)
      : in_(in), spec_(spec), layout_(std::move(layout)), index_(vllm::VllmIndexOptions()) {
    tokens_.resize(in.Byte() % 80);
    for (uint32_t& token : tokens_) token = in.Byte() % 4;
    given_lora_ = in.String(17);
    given_salt_ = in.String(17);
  }

  void Run() {
    for (int step = 0; step < 24 && in_.remaining() > 0; ++step) {
      switch (in_.Byte() % 6) {
        case 0: Change(vllm::RequestExtras{}, true); break;
        case 1: Change(PickExtras(), true); break;
        case 2: Change(PickExtras(), false); break;
        case 3: Apply(Event{EventKind::kTenantCleared, {}, {}, in_.Bool() ? spec_.tenant_id : "other", {}}); break;
        default: break;
      }
      Query(PickExtras(), 1 + in_.Byte() % 3);
    }
  }

 private:
  vllm::RequestExtras PickExtras() {
    vllm::RequestExtras extras;
    switch (in_.Byte() % 8) {
      case 0: break;
      case 1: extras.has_lora = true, extras.lora_name = "a"; break;
      case 2: extras.has_salt = true, extras.cache_salt = "s"; break;
      case 3: extras.has_lora = true, extras.lora_name = "a", extras.has_salt = true, extras.cache_salt = "s"; break;
      case 4: extras.has_salt = true, extras.cache_salt = ""; break;  // no salt to vLLM
      case 5: extras.has_lora = true, extras.lora_name = "s"; break;  // the salt's bytes as a LoRA name
      case 6: extras.has_lora = true, extras.lora_name = given_lora_; break;
      case 7: extras.has_salt = true, extras.cache_salt = given_salt_; break;
    }
    if (extras.has_lora && extras.has_salt && extras.lora_name == extras.cache_salt) {
      extras.salt_is_lora_object = in_.Bool();
    }
    return extras;
  }

  void Apply(const Event& event) { Apply(std::vector<Event>{event}); }
  void Apply(const std::vector<Event>& events) { index_.ApplyBatch(sequence_++, events); }

  // Stores (or removes) chunks of the request hashed with `extras`: a mask
  // byte per group picks its chunks, and each chunk has all its keys or
  // only its first; under the layout's tenant or another.
  void Change(const vllm::RequestExtras& extras, bool store) {
    const std::vector<vllm::BlockDigest> chain =
        vllm::HashChain(spec_.algorithm, spec_.python_hash_seed, tokens_, spec_.groups[0].hash_block_size, extras);
    const std::string tenant = in_.Byte() % 4 == 3 ? std::string("other") : spec_.tenant_id;
    std::vector<std::string> keys;
    for (size_t g = 0; g < spec_.groups.size(); ++g) {
      const uint8_t mask = in_.Byte(), partial = in_.Byte();
      const size_t per_chunk = spec_.groups[g].block_size / spec_.groups[g].hash_block_size;
      for (size_t c = 0; (c + 1) * per_chunk <= chain.size(); ++c) {
        if ((mask >> (c % 8) & 1) == 0) continue;
        std::string hex(kPageHashHexLength, '\0');
        ToHex(chain[(c + 1) * per_chunk - 1], hex.data());
        std::vector<std::string> chunk_keys = layout_->KeysFor(g, hex);
        if ((partial >> (c % 8) & 1) != 0) chunk_keys.resize(1);
        for (std::string& key : chunk_keys) keys.push_back(std::move(key));
      }
    }
    std::vector<Event> events;
    for (const std::string& key : keys) {
      events.push_back(Event{store ? EventKind::kStored : EventKind::kRemoved, key, {}, tenant, "cpu"});
    }
    Apply(events);
  }

  void Query(const vllm::RequestExtras& extras, int repeats) {
    const uint32_t b = spec_.main_event_block_size;
    const std::vector<vllm::BlockDigest> chain =
        vllm::HashChain(spec_.algorithm, spec_.python_hash_seed, tokens_, spec_.groups[0].hash_block_size, extras);
    const VllmReference reference(index_, spec_, *layout_, chain, tokens_.size());
    const size_t want_prefix = reference.Prefix();
    const std::vector<uint8_t> want_hits = reference.Blocks();
    std::vector<uint8_t> hits(vllm::BlocksToCheck(*layout_, tokens_.size(), b), 9);
    SCI_FUZZ_CHECK(hits.size() == want_hits.size(), "%zu blocks to check, %zu in the reference", hits.size(),
                   want_hits.size());
    for (int r = 0; r < repeats; ++r) {
      const vllm::ChainSource source = vllm::ChainSource::Tokens(tokens_, extras);
      const size_t prefix = vllm::CheckPrefix(index_, *layout_, source, b).prefix_hits;
      SCI_FUZZ_CHECK(prefix == want_prefix, "prefix %zu by tokens (sight %d), the reference %zu", prefix, r + 1,
                     want_prefix);
      std::fill(hits.begin(), hits.end(), 9);
      vllm::CheckBlocks(index_, *layout_, source, b, hits);
      SCI_FUZZ_CHECK(hits == want_hits, "block hits by tokens (sight %d) differ from the reference", r + 1);
    }
    std::vector<uint8_t> digests;
    std::vector<uint64_t> event_hashes;
    for (const vllm::BlockDigest& digest : chain) {
      digests.insert(digests.end(), digest.begin(), digest.end());
      event_hashes.push_back(vllm::EventHashOf(digest));
    }
    const size_t by_digests =
        vllm::CheckPrefix(index_, *layout_, vllm::ChainSource::Digests(digests.data(), chain.size(), tokens_.size()), b)
            .prefix_hits;
    SCI_FUZZ_CHECK(by_digests == want_prefix, "prefix %zu by digests, the reference %zu", by_digests, want_prefix);
    const size_t by_event_hashes =
        vllm::CheckPrefix(index_, *layout_, vllm::ChainSource::EventHashes(event_hashes, tokens_.size()), b)
            .prefix_hits;
    // An event hash resolves through the digests of present keys: never
    // more than the reference (two digests sharing their low 64 bits would
    // only make it less).
    SCI_FUZZ_CHECK(by_event_hashes == want_prefix, "prefix %zu by event hashes, the reference %zu", by_event_hashes,
                   want_prefix);
  }

  FuzzInput& in_;
  const vllm::LayoutSpec spec_;
  std::unique_ptr<const vllm::Layout> layout_;
  Index index_;
  uint64_t sequence_ = 1;
  std::vector<uint32_t> tokens_;
  std::string given_lora_, given_salt_;
};

}  // namespace
}  // namespace sci::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sci::fuzz::FuzzInput in(data, size);
  const sci::vllm::LayoutSpec spec = sci::fuzz::ReadSpec(in);
  std::string error;
  std::unique_ptr<const sci::vllm::Layout> layout = sci::vllm::Layout::Create(spec, &error);
  if (layout == nullptr) return 0;  // (the bounds are layout_json_fuzzer's and layout_bounds_test's)
  sci::fuzz::Harness(in, spec, std::move(layout)).Run();
  return 0;
}
