// Tiers (issue #36; docs/index-semantics.md "Tiers"): the medium-to-tier map,
// the tier of an SGLang page by each way a query reads it (its keys, the
// page summary with its group, the verified group's fast path), the
// publisher's real second-generation bytes, and a writer moving objects
// between media while readers ask. The model-based test is in
// index_model_test.cpp (tier queries against the reference model), the vLLM
// family's in capi_vllm_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "golden_capture.h"
#include "index/index.h"
#include "index/medium_tiers.h"
#include "sglang/layout.h"
#include "sglang/page_hash.h"
#include "sglang/page_query.h"
#include "wire/message_apply.h"

namespace sci {
namespace {

constexpr uint8_t kAbsent = MediumTiers::kAbsent;

// ---- the map ----

// 1.3.0: a first-generation master evicts memory and keeps the disk copy
// without an event, so its `stored cpu` proves no tier: such a key counts
// at the slowest tier even under per-medium residency. The second
// generation announces every medium: its `stored cpu` is tier 0.
TEST(TiersByGeneration, AFirstGenerationStoreProvesNoTier) {
  for (const PublisherGeneration generation : {PublisherGeneration::kFirst, PublisherGeneration::kSecond}) {
    IndexOptions options;
    options.residency = Residency::kPerMedium;
    Index index(options);
    Event stored;
    stored.kind = EventKind::kStored;
    stored.object_key = "k";
    stored.medium = "cpu";
    stored.generation = generation;
    index.ApplyBatch(1, std::span<const Event>(&stored, 1));
    const Stats stats = index.GetStats();
    const bool first = generation == PublisherGeneration::kFirst;
    EXPECT_EQ(stats.keys_tier0, first ? 0u : 1u);
    EXPECT_EQ(stats.keys_tier1, first ? 1u : 0u);
    EXPECT_TRUE(index.Contains({}, "k"));
  }
}

TEST(MediumTiersMap, TheDefaultIsCpuThenDisk) {
  MediumTiers tiers;
  std::string error;
  ASSERT_TRUE(MediumTiers::Parse("", &tiers, &error));
  EXPECT_EQ(tiers.n_tiers(), 2);
  EXPECT_EQ(tiers.ToString(), "cpu=0,disk=1");
}

TEST(MediumTiersMap, ReadsUpToFourTiersInTheOrderWritten) {
  MediumTiers tiers;
  std::string error;
  ASSERT_TRUE(MediumTiers::Parse("hbm=0,cpu=1,ssd=2,disk=2,s3=3", &tiers, &error)) << error;
  EXPECT_EQ(tiers.n_tiers(), 4);
  EXPECT_EQ(tiers.ToString(), "hbm=0,cpu=1,ssd=2,disk=2,s3=3");
  ASSERT_TRUE(MediumTiers::Parse("cpu=0,disk=0", &tiers, &error)) << error;
  EXPECT_EQ(tiers.n_tiers(), 1);
}

TEST(MediumTiersMap, RefusesAnythingElseNamingTheItem) {
  const std::pair<const char*, const char*> cases[] = {
      {"cpu", "'cpu' is not medium=tier"},
      {"cpu=0,", "'' is not medium=tier"},
      {"=0", "'=0' is not medium=tier"},
      {"cpu=4", "tiers are 0 to 3"},
      {"cpu=01", "medium 'cpu' has tier '01'"},
      {"cpu=-1", "medium 'cpu' has tier '-1'"},
      {"cpu=0,cpu=1", "'cpu' is named twice"},
      {"cpu=0,disk=2", "tier 1 has no medium"},
      {"disk=1", "tier 0 has no medium"},
      {"a=0,b=0,c=0,d=0,e=0,f=0,g=0,h=0,i=0", "more than 8 media"},
  };
  for (const auto& [text, expected] : cases) {
    MediumTiers tiers;
    std::string error;
    EXPECT_FALSE(MediumTiers::Parse(text, &tiers, &error)) << text;
    EXPECT_NE(error.find(expected), std::string::npos) << text << ": " << error;
    EXPECT_EQ(tiers.ToString(), "cpu=0,disk=1") << "a refused map changes nothing";
  }
}

// ---- SGLang pages ----

// An index under `residency` with the map `tiers`, one layout of tp_size
// ranks (2 * tp keys a page), and a prompt of three pages.
class TierQuery : public ::testing::Test {
 protected:
  static constexpr uint32_t kPageSize = 4;

  void Make(uint32_t tp_size, Residency residency = Residency::kPerMedium, std::string_view tiers = "") {
    IndexOptions options = SGLangIndexOptions();
    options.residency = residency;
    std::string error;
    ASSERT_TRUE(MediumTiers::Parse(tiers, &options.tiers, &error)) << error;
    index_ = std::make_unique<Index>(options);
    LayoutSpec spec;
    spec.page_size = kPageSize;
    spec.tp_size = tp_size;
    layout_ = Layout::Create(spec, &error);
    ASSERT_NE(layout_, nullptr) << error;
    tokens_.resize(3 * kPageSize);
    std::iota(tokens_.begin(), tokens_.end(), 100u);
    const std::vector<std::string> hashes = PageHashesHex(tokens_, kPageSize, false);
    for (size_t page = 0; page < hashes.size(); ++page) {
      keys_.push_back(layout_->KeysFor(hashes[page], page, hashes.size()));
      groups_.push_back(layout_->GroupId(hashes[page]));
    }
  }

  void Apply(EventKind kind, size_t page, size_t key, std::string_view medium) {
    Event event;
    event.kind = kind;
    event.object_key = keys_[page][key];
    event.group_id = groups_[page];
    event.medium = medium;
    index_->ApplyBatch(++sequence_, std::span<const Event>(&event, 1));
  }
  void StorePage(size_t page, std::string_view medium) {
    for (size_t key = 0; key < keys_[page].size(); ++key) Apply(EventKind::kStored, page, key, medium);
  }

  // Each page's tier, and the answer beside them.
  std::vector<uint8_t> Tiers(TierAnswer* answer = nullptr) {
    std::vector<uint8_t> tiers(3, 0xEE);
    TierAnswer local;
    TierAnswer& out = answer != nullptr ? *answer : local;
    const PageQueryResult result = CheckTiers(*index_, *layout_, tokens_, kPageSize, tiers, &out);
    EXPECT_EQ(result.n_pages, 3u);
    EXPECT_EQ(out.prefix_pages[static_cast<size_t>(out.n_tiers - 1)], result.prefix_hits);
    last_fast_path_ = result.fast_path;
    return tiers;
  }

  std::unique_ptr<Index> index_;
  std::unique_ptr<const Layout> layout_;
  std::vector<uint32_t> tokens_;
  std::vector<std::vector<std::string>> keys_;
  std::vector<std::string> groups_;
  uint64_t sequence_ = 0;
  size_t last_fast_path_ = 0;
};

using PageTiers = std::vector<uint8_t>;

// Three ways to read a page: tp1 pages (2 keys) have no summary entry and
// are checked key by key; tp2 and tp8 pages (4 and 16 keys) are read from
// the summary and their group's tier, then from the verified group.
class TierQueryByLayout : public TierQuery, public ::testing::WithParamInterface<uint32_t> {};

TEST_P(TierQueryByLayout, APageIsAtTheSlowestTierOfItsKeysByEveryPath) {
  Make(GetParam());
  StorePage(0, "cpu");
  StorePage(1, "cpu");
  Apply(EventKind::kStored, 1, 1, "disk");
  Apply(EventKind::kRemoved, 1, 1, "cpu");  // page 1: one key on disk only
  for (int pass = 0; pass < 2; ++pass) {    // the second reads verified groups
    TierAnswer answer;
    EXPECT_EQ(Tiers(&answer), (PageTiers{0, 1, kAbsent})) << "pass " << pass;
    EXPECT_EQ(answer.n_tiers, 2);
    EXPECT_EQ(answer.prefix_pages[0], 1u);
    EXPECT_EQ(answer.prefix_pages[1], 2u);
    EXPECT_EQ(answer.pages_at[0], 1u);
    EXPECT_EQ(answer.pages_at[1], 1u);
  }
  EXPECT_EQ(last_fast_path_, 2u) << "the second pass is answered by verified groups";
  // A removal that leaves a key on disk keeps its group verified, and the
  // group's tier follows it.
  Apply(EventKind::kStored, 0, 0, "disk");
  Tiers();  // verifies page 0's group again (the store invalidated it)
  Apply(EventKind::kRemoved, 0, 0, "cpu");
  EXPECT_EQ(Tiers(), (PageTiers{1, 1, kAbsent}));
  EXPECT_EQ(last_fast_path_, 2u);
  // Back to memory: tier 0 again; all of page 2 on disk: tier 1.
  Apply(EventKind::kStored, 0, 0, "cpu");
  Apply(EventKind::kStored, 1, 1, "cpu");
  StorePage(2, "disk");
  TierAnswer answer;
  EXPECT_EQ(Tiers(&answer), (PageTiers{0, 0, 1}));
  EXPECT_EQ(answer.prefix_pages[0], 2u);
  EXPECT_EQ(answer.prefix_pages[1], 3u);
  // The last disk copy goes: page 2 is gone at every tier.
  Apply(EventKind::kRemoved, 2, 0, "disk");
  EXPECT_EQ(Tiers(), (PageTiers{0, 0, kAbsent}));
}

INSTANTIATE_TEST_SUITE_P(KeysSummaryAndGroup, TierQueryByLayout, ::testing::Values(1u, 2u, 8u),
                         [](const ::testing::TestParamInfo<uint32_t>& info) {
                           return "tp" + std::to_string(info.param);
                         });

TEST_F(TierQuery, AMediumTheMapDoesNotNameAndUnknownMediaAreAtTheSlowestTier) {
  Make(2, Residency::kPerMedium, "hbm=0,cpu=1,disk=2");
  StorePage(0, "hbm");
  StorePage(1, "cpu");
  StorePage(2, "hbm");
  TierAnswer answer;
  EXPECT_EQ(Tiers(&answer), (PageTiers{0, 1, 0}));
  EXPECT_EQ(answer.n_tiers, 3);
  EXPECT_EQ(answer.prefix_pages[0], 1u);
  EXPECT_EQ(answer.prefix_pages[1], 3u);
  EXPECT_EQ(answer.prefix_pages[2], 3u);
  Apply(EventKind::kStored, 2, 0, "nvme");  // not in the map: the slowest tier, but hbm still holds it
  EXPECT_EQ(Tiers()[2], 0);
  Apply(EventKind::kRemoved, 2, 0, "hbm");
  EXPECT_EQ(Tiers()[2], 2);
  Apply(EventKind::kStored, 0, 1, "");  // a store with no medium: its media become unknown
  EXPECT_EQ(Tiers()[0], 2);
}

TEST_F(TierQuery, TheObjectRuleKeepsNoMediaSoEveryPageIsAtTheSlowestTier) {
  Make(8, Residency::kObject);
  StorePage(0, "cpu");
  StorePage(1, "disk");
  TierAnswer answer;
  EXPECT_EQ(Tiers(&answer), (PageTiers{1, 1, kAbsent}));
  EXPECT_EQ(answer.prefix_pages[0], 0u);
  EXPECT_EQ(answer.prefix_pages[1], 2u);
  EXPECT_EQ(answer.pages_at[1], 2u);
}

TEST_F(TierQuery, SnapshotKeysHaveUnknownMediaAndAnswerFromTheirEntryAtOnce) {
  Make(8);
  const std::vector<std::string_view> keys(keys_[0].begin(), keys_[0].end());
  index_->LoadKeys(keys);
  EXPECT_EQ(Tiers()[0], 1) << "unknown media: the slowest tier";
  EXPECT_EQ(last_fast_path_, 1u) << "the first query reads the page's entry, as any";
}

TEST_F(TierQuery, AWrongBlockSizeAnswersNoPageButNamesTheTiers) {
  Make(2);
  std::vector<uint8_t> tiers(3, 0xEE);
  TierAnswer answer;
  const PageQueryResult result = CheckTiers(*index_, *layout_, tokens_, kPageSize * 2, tiers, &answer);
  EXPECT_EQ(result.n_pages, 0u);
  EXPECT_EQ(answer.n_tiers, 2);
  EXPECT_EQ(tiers, (std::vector<uint8_t>(3, 0xEE)));
  EXPECT_EQ(index_->GetStats().block_size_mismatches, 1u);
}

// ---- the real second-generation publisher ----

// The conductor capture (testdata/mooncake-publisher/media-and-cleared): the
// first page of tokens 1..10 at page size 4, tp 2, committed on cpu, copied
// to disk, two keys evicted from memory, one upserted, one deleted, then
// cleared. After each message the page's tier is what truth.jsonl's media
// say: tier 0 while every key has a cpu copy, 1 while one is on disk only,
// absent once one is gone.
TEST(TierCaptures, TheConductorCapturesPageMovesBetweenTiersAsItsTruthSays) {
  IndexOptions options = SGLangIndexOptions();
  options.residency = Residency::kPerMedium;
  Index index(options);
  LayoutSpec spec;
  spec.page_size = 4;
  spec.tp_size = 2;
  std::string error;
  const std::unique_ptr<const Layout> layout = Layout::Create(spec, &error);
  ASSERT_NE(layout, nullptr) << error;
  std::vector<uint32_t> tokens(10);
  std::iota(tokens.begin(), tokens.end(), 1u);
  const std::string hash = PageHashesHex(tokens, 4, false)[0];
  ASSERT_EQ(hash, "cf97adeedb59e05bfd73a2b4c2a8885708c4f4f70c84c64b27120e72ab733b72");
  const std::vector<std::string> keys = layout->KeysFor(hash, 0, 2);

  std::ifstream truth(std::string(SCI_TESTDATA_DIR) + "/media-and-cleared/truth.jsonl");
  ASSERT_TRUE(truth.good());
  DecodedMessage scratch;
  std::vector<uint8_t> seen;
  for (const sci_test::GoldenMessage& message : sci_test::LoadCapture("media-and-cleared")) {
    ASSERT_TRUE(ApplyMessage(index, message.FrameSpans(), scratch, &error)) << message.name << ": " << error;
    std::string line;
    ASSERT_TRUE(std::getline(truth, line)) << message.name;
    // The page's tier by the truth: each key's media list in present_per_medium.
    const std::string per_medium = line.substr(line.find("\"present_per_medium\""));
    uint8_t expected = 0;
    for (const std::string& key : keys) {
      const size_t at = per_medium.find("\"default/" + key + "\"");
      if (at == std::string::npos) {
        expected = kAbsent;
        break;
      }
      const std::string media = per_medium.substr(at, per_medium.find(']', at) - at);
      if (media.find("\"cpu\"") == std::string::npos) expected = 1;
    }
    std::vector<uint8_t> tiers(2, 0xEE);
    TierAnswer answer;
    CheckTiers(index, *layout, tokens, 4, tiers, &answer);
    EXPECT_EQ(tiers[0], expected) << message.name;
    EXPECT_EQ(answer.prefix_pages[0], expected == 0 ? 1u : 0u) << message.name;
    EXPECT_EQ(answer.prefix_pages[1], expected != kAbsent ? 1u : 0u) << message.name;
    seen.push_back(tiers[0]);
  }
  // The capture goes through every state: in memory, on disk only, gone.
  EXPECT_NE(std::find(seen.begin(), seen.end(), 0), seen.end());
  EXPECT_NE(std::find(seen.begin(), seen.end(), 1), seen.end());
  EXPECT_EQ(seen.back(), kAbsent);
}

// ---- a writer moving objects between media ----

// A tp8 page (16 keys) on cpu, but for one key that is on disk only. The
// writer hands that role from key to key: the next key gains a disk copy
// and loses its cpu one, then the previous key gains a cpu copy and loses
// its disk one. At every instant some key is on disk only, and every key on
// some medium: the page is present at tier 1 at every instant, so no reader
// may ever see it absent or at tier 0, by any path (the stores invalidate
// the group, the removals leave it verified).
TEST_F(TierQuery, AWriterMovingObjectsBetweenMediaNeverMakesAPageLookFaster) {
  Make(8);
  StorePage(0, "cpu");
  Apply(EventKind::kStored, 0, 0, "disk");
  Apply(EventKind::kRemoved, 0, 0, "cpu");
  ASSERT_EQ(Tiers()[0], 1);

  std::atomic<bool> done{false};
  std::atomic<uint64_t> wrong{0}, answers{0}, fast{0};
  auto reader = [&] {
    std::vector<uint8_t> tiers(3);
    TierAnswer answer;
    while (!done.load(std::memory_order_relaxed)) {
      const PageQueryResult result = CheckTiers(*index_, *layout_, tokens_, kPageSize, tiers, &answer);
      if (tiers[0] != 1 || answer.prefix_pages[0] != 0 || answer.prefix_pages[1] != 1) wrong.fetch_add(1);
      answers.fetch_add(1);
      fast.fetch_add(result.fast_path);
    }
  };
  std::thread a(reader), b(reader);
  const size_t n = keys_[0].size();
  for (int move = 0; move < 20000; ++move) {
    const size_t from = static_cast<size_t>(move) % n, to = (from + 1) % n;
    Apply(EventKind::kStored, 0, to, "disk");
    Apply(EventKind::kRemoved, 0, to, "cpu");
    Apply(EventKind::kStored, 0, from, "cpu");
    Apply(EventKind::kRemoved, 0, from, "disk");
  }
  // Enough answers to have met the writer everywhere, and some after it
  // (the first verifies the group again, the next take the fast path).
  const uint64_t at_end = answers.load();
  while (answers.load() < std::max<uint64_t>(2000, at_end + 100)) std::this_thread::yield();
  done.store(true);
  a.join();
  b.join();
  EXPECT_EQ(wrong.load(), 0u) << "of " << answers.load() << " answers";
  EXPECT_GT(fast.load(), 0u) << "some answers should come from the verified group";
  EXPECT_EQ(Tiers()[0], 1);
}

}  // namespace
}  // namespace sci
