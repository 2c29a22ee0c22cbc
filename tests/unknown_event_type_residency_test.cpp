// An event of a type the decoder does not know that names a key drops the
// key under both residency rules (index-semantics.md, "Residency"): its
// medium says nothing about what the event did to the key's other media.
// The messages are the second-generation publisher's bytes (the encoder of
// src/encode/), the unknown one shaped as its removal with another type.
#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "encode/mooncake_encoder.h"
#include "encoded_batches.h"
#include "index/index.h"
#include "sglang/layout.h"
#include "sglang/page_query.h"
#include "wire/message_apply.h"

namespace sci {
namespace {

// The first page of tokens 1..10 at page size 4, tp 2 MHA: four keys
// (testdata/mooncake-publisher/media-and-cleared, its README).
constexpr std::string_view kPageHash = "cf97adeedb59e05bfd73a2b4c2a8885708c4f4f70c84c64b27120e72ab733b72";
const std::vector<uint32_t> kTokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};

MooncakeEvent PageKeyEvent(const std::string& key, const std::string& group, std::string_view medium) {
  MooncakeEvent e;
  e.second_generation = true;
  e.stored = true;
  e.object_key = key;
  e.group_id = group;
  e.medium = medium;
  return e;
}

class UnknownEventType : public ::testing::TestWithParam<Residency> {};

TEST_P(UnknownEventType, NamingAKeyOnOneOfItsMediaDropsTheKeyAndThePage) {
  LayoutSpec spec;
  spec.page_size = 4;
  spec.tp_size = 2;
  std::string error;
  const std::unique_ptr<const Layout> layout = Layout::Create(spec, &error);
  ASSERT_NE(layout, nullptr) << error;
  const std::vector<std::string> keys = layout->KeysFor(std::string(kPageHash), 0, 1);
  ASSERT_EQ(keys.size(), 4u);
  const std::string group = "sglang-hicache:" + std::string(kPageHash);

  IndexOptions options;
  options.residency = GetParam();
  Index index(options);
  sci::testing::EncodedBatches publisher;
  // Every key of the page on cpu, then offloaded to disk too.
  for (std::string_view medium : {"cpu", "disk"}) {
    std::vector<MooncakeEvent> events;
    for (const std::string& key : keys) events.push_back(PageKeyEvent(key, group, medium));
    publisher.Send(index, events);
  }
  uint8_t hits[2] = {};
  ASSERT_EQ(CheckPages(index, *layout, kTokens, 4, hits).total_hits, 1u);
  ASSERT_EQ(CheckPages(index, *layout, kTokens, 4, hits).fast_path, 1u);  // verified by the first query

  MooncakeEvent deleted = PageKeyEvent(keys[0], group, "disk");
  deleted.unknown_type = "deleted";
  publisher.Send(index, {deleted});

  // Still on cpu by the per-medium rule, were "deleted" a removal of disk;
  // but nobody knows what "deleted" did: a miss, never a false hit.
  EXPECT_FALSE(index.Contains("default", keys[0]));
  for (size_t k = 1; k < keys.size(); ++k) EXPECT_TRUE(index.Contains("default", keys[k])) << keys[k];
  const PageQueryResult result = CheckPages(index, *layout, kTokens, 4, hits);
  EXPECT_EQ(hits[0], 0);
  EXPECT_EQ(result.total_hits, 0u);
  EXPECT_EQ(result.fast_path, 0u);
  EXPECT_EQ(CheckPrefix(index, *layout, kTokens, 4).prefix_hits, 0u);
  const Stats stats = index.GetStats();
  EXPECT_EQ(stats.keys, 3u);
  EXPECT_EQ(stats.ignored_events, 1u);
  EXPECT_EQ(stats.medium_removals_kept, 0u);
  EXPECT_EQ(stats.malformed_messages, 0u);
}

INSTANTIATE_TEST_SUITE_P(BothRules, UnknownEventType,
                         ::testing::Values(Residency::kObject, Residency::kPerMedium),
                         [](const ::testing::TestParamInfo<Residency>& info) {
                           return info.param == Residency::kObject ? std::string("Object")
                                                                   : std::string("PerMedium");
                         });

}  // namespace
}  // namespace sci
