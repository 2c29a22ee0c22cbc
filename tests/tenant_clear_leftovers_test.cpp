// Issue #34, R7 and R8: a tenant's clear leaves nothing of the cleared keys
// behind. It drops keys by their tenant tag, without their bytes; 1.2 left
// the event-hash digest map's entry of every cleared vLLM key (five rounds
// of 200k keys stored and cleared: RSS 11.5 -> 101.6 MB, one key present)
// and the stray counts with their gauge until a whole clear. Here, rounds
// of many keys of one tenant stored and that tenant cleared, beside a few
// keys of another: after each clear the digest map holds exactly the
// entries the present keys need, a cleared key's event hash resolves to
// nothing (sci_index_check_block_hashes: a miss) while the other tenant's
// still resolve, and the page entry gauge (sci_index_stats groups) counts the
// other tenant's strays only.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "capi_test_support.h"
#include "index/index.h"
#include "query/digest.h"
#include "shared_cache_index.h"
#include "sglang/layout.h"
#include "sglang/page_hash.h"
#include "vllm/block_hash.h"
#include "vllm/layout.h"

namespace {

using sci_test::IndexHandle;

sci_str Str(const std::string& s) { return sci_str{s.data(), s.size()}; }

std::string Hex(const sci::vllm::BlockDigest& digest) {
  std::string hex(sci::kPageHashHexLength, '\0');
  sci::ToHex(digest, hex.data());
  return hex;
}

sci::vllm::BlockDigest RandomDigest(std::mt19937_64& rng) {
  sci::vllm::BlockDigest digest;
  for (size_t i = 0; i < digest.size(); i += 8) {
    const uint64_t word = rng();
    std::memcpy(digest.data() + i, &word, 8);
  }
  return digest;
}

// The core index: the digest map's size, round after round.
TEST(TenantClearLeftovers, TheDigestMapKeepsOnlyWhatPresentKeysNeed) {
  sci::Index index(sci::vllm::VllmIndexOptions());
  std::mt19937_64 rng(34);
  uint64_t sequence = 1;
  const auto apply = [&](const std::vector<sci::Event>& events) { index.ApplyBatch(sequence++, events); };
  // Tenant "b": two keys of one chunk (one digest) that stay throughout.
  const sci::vllm::BlockDigest kept = RandomDigest(rng);
  const std::vector<std::string> kept_keys = {"m@tp_rank:0@group:0@" + Hex(kept), "m@tp_rank:1@group:0@" + Hex(kept)};
  apply({sci::Event{sci::EventKind::kStored, kept_keys[0], {}, "b", "cpu"},
         sci::Event{sci::EventKind::kStored, kept_keys[1], {}, "b", "cpu"}});
  ASSERT_EQ(index.EventHashDigestEntries(), 1u);
  constexpr size_t kKeys = 20000;
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::vector<sci::vllm::BlockDigest> digests;
    std::vector<std::string> keys;
    for (size_t i = 0; i < kKeys; ++i) {
      digests.push_back(RandomDigest(rng));
      keys.push_back("m@tp_rank:0@group:0@" + Hex(digests.back()));
    }
    // The same chunk as "b"'s in tenant "a" too: one entry per tenant.
    keys.push_back(kept_keys[0]);
    std::vector<sci::Event> events;
    for (const std::string& key : keys) events.push_back(sci::Event{sci::EventKind::kStored, key, {}, "a", "cpu"});
    apply(events);
    EXPECT_EQ(index.EventHashDigestEntries(), kKeys + 2);
    std::array<uint8_t, 32> resolved{};
    ASSERT_TRUE(index.DigestOfEventHash(sci::TenantSeed("a"), sci::vllm::EventHashOf(digests[7]), &resolved));
    EXPECT_EQ(resolved, digests[7]);
    apply({sci::Event{sci::EventKind::kTenantCleared, {}, {}, "a", {}}});
    EXPECT_EQ(index.GetStats().keys, 2u);
    EXPECT_EQ(index.EventHashDigestEntries(), 1u) << "entries of cleared keys were left behind";
    EXPECT_FALSE(index.DigestOfEventHash(sci::TenantSeed("a"), sci::vllm::EventHashOf(digests[7]), &resolved));
    EXPECT_FALSE(index.DigestOfEventHash(sci::TenantSeed("a"), sci::vllm::EventHashOf(kept), &resolved));
    ASSERT_TRUE(index.DigestOfEventHash(sci::TenantSeed("b"), sci::vllm::EventHashOf(kept), &resolved));
    EXPECT_EQ(resolved, kept);
  }
  // The last keys go: the map is empty.
  apply({sci::Event{sci::EventKind::kRemoved, kept_keys[0], {}, "b", "cpu"},
         sci::Event{sci::EventKind::kRemoved, kept_keys[1], {}, "b", "cpu"}});
  EXPECT_EQ(index.EventHashDigestEntries(), 0u);
}

// Through the C API: a request by event hashes misses once its tenant is
// cleared, and hits again once its chunks are stored again.
TEST(TenantClearLeftovers, AClearedTenantsEventHashesMiss) {
  const auto descriptor = [](const char* tenant) {
    return std::string(R"({"schema_version": 1, "hash": {"algorithm": "sha256"}, "main_event_block_size": 16,
      "tenant_id": ")") + tenant + R"(", "groups": [{"kind": "full_attention", "block_size": 16, "hash_block_size": 16,
      "key_prefixes": ["m@tp_rank:0@group:0"]}]})";
  };
  sci_layout* layout_a = nullptr;
  sci_layout* layout_b = nullptr;
  ASSERT_EQ(sci_layout_new_json(Str(descriptor("a")), &layout_a), SCI_OK) << sci_last_error();
  ASSERT_EQ(sci_layout_new_json(Str(descriptor("b")), &layout_b), SCI_OK) << sci_last_error();
  std::vector<uint32_t> tokens(65);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint32_t>(i * 7);
  const std::vector<sci::vllm::BlockDigest> chain =
      sci::vllm::HashChain(sci::vllm::HashAlgorithm::kSha256, "0", tokens, 16);
  std::vector<uint64_t> event_hashes;
  std::vector<std::string> keys;
  for (const sci::vllm::BlockDigest& digest : chain) {
    event_hashes.push_back(sci::vllm::EventHashOf(digest));
    keys.push_back("m@tp_rank:0@group:0@" + Hex(digest));
  }
  IndexHandle index;
  uint64_t sequence = 1;
  const auto store = [&](const char* tenant) {
    std::vector<sci_event> events;
    for (const std::string& key : keys) {
      sci_event event{};
      event.kind = SCI_EVENT_STORED;
      event.object_key = Str(key);
      event.tenant_id = sci_str{tenant, std::strlen(tenant)};
      events.push_back(event);
    }
    ASSERT_EQ(sci_index_apply_events(index.index, sequence++, events.data(), events.size()), SCI_OK);
  };
  const auto clear = [&](const char* tenant) {
    sci_event event{};
    event.kind = SCI_EVENT_TENANT_CLEARED;
    event.tenant_id = sci_str{tenant, std::strlen(tenant)};
    ASSERT_EQ(sci_index_apply_events(index.index, sequence++, &event, 1), SCI_OK);
  };
  const auto prefix = [&](const sci_layout* layout) {
    sci_block_hashes hashes = SCI_BLOCK_HASHES_INIT;
    hashes.event_hashes = event_hashes.data();
    hashes.n_hashes = event_hashes.size();
    hashes.n_tokens = tokens.size();
    size_t blocks = 99;
    EXPECT_EQ(sci_index_check_block_hashes(index.index, layout, &hashes, 16, &blocks), SCI_OK) << sci_last_error();
    return blocks;
  };
  store("a");
  store("b");
  EXPECT_EQ(prefix(layout_a), 4u);
  EXPECT_EQ(prefix(layout_b), 4u);
  clear("a");
  EXPECT_EQ(prefix(layout_a), 0u);
  EXPECT_EQ(prefix(layout_b), 4u);
  store("a");
  EXPECT_EQ(prefix(layout_a), 4u);
  clear("a");
  clear("b");
  EXPECT_EQ(prefix(layout_a), 0u);
  EXPECT_EQ(prefix(layout_b), 0u);
  sci_layout_free(layout_a);
  sci_layout_free(layout_b);
}

// The groups gauge (sci_index_stats: page entries since 1.4) after a
// tenant's clear counts the other tenants' pages only, and reaches 0 when
// they go.
TEST(TenantClearLeftovers, ThePageEntryGaugeDropsWithTheClearedTenantsPages) {
  IndexHandle index;
  uint64_t sequence = 1;
  const auto page_keys = [](const char* tenant, uint32_t first_token) {
    std::vector<uint32_t> tokens(8);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = first_token + static_cast<uint32_t>(i);
    std::vector<std::string> keys;
    sci::LayoutSpec cpp;
    cpp.page_size = 4;
    cpp.tp_size = 2;
    cpp.tenant_id = tenant;
    std::string error;
    const auto layout = sci::Layout::Create(cpp, &error);
    const std::vector<std::string> hashes = sci::PageHashesHex(tokens, 4, false);
    for (size_t page = 0; page < hashes.size(); ++page) {
      for (std::string& key : layout->KeysFor(hashes[page], page, hashes.size())) keys.push_back(std::move(key));
    }
    return keys;  // 2 pages x 4 keys
  };
  const auto apply = [&](const std::vector<std::string>& keys, sci_event_kind kind, const char* tenant) {
    std::vector<sci_event> events;
    for (const std::string& key : keys) {
      sci_event event{};
      event.kind = kind;
      event.object_key = Str(key);  // no group: none is needed
      event.tenant_id = sci_str{tenant, std::strlen(tenant)};
      events.push_back(event);
    }
    ASSERT_EQ(sci_index_apply_events(index.index, sequence++, events.data(), events.size()), SCI_OK);
  };
  const std::vector<std::string> a = page_keys("a", 100), b = page_keys("b", 200);
  apply(a, SCI_EVENT_STORED, "a");
  apply(b, SCI_EVENT_STORED, "b");
  ASSERT_EQ(sci_test::Stats(index.index).groups, 4u);  // 2 tenants x 2 pages
  sci_event clear{};
  clear.kind = SCI_EVENT_TENANT_CLEARED;
  clear.tenant_id = sci_str{"a", 1};
  ASSERT_EQ(sci_index_apply_events(index.index, sequence++, &clear, 1), SCI_OK);
  EXPECT_EQ(sci_test::Stats(index.index).keys, 8u);
  EXPECT_EQ(sci_test::Stats(index.index).groups, 2u) << "the cleared tenant's pages are still counted";
  apply(b, SCI_EVENT_REMOVED, "b");
  EXPECT_EQ(sci_test::Stats(index.index).groups, 0u);
  EXPECT_EQ(sci_test::Stats(index.index).keys, 0u);
}



}  // namespace
