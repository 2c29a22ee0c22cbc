// The page digest memo: a digest served from it is the digest SHA-256 gives
// for the same page input, whatever the prompts, prefixes, eagle mode,
// slot collisions and clears; a request is memoised on its second sight
// and served without rehashing from its third; each thread has its own.
// References come from the hasher without a memo (itself pinned to an
// independent libcrypto interface by page_hash_test).
#include <gtest/gtest.h>

#include <cstdint>
#include <latch>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "index/index.h"
#include "sglang/layout.h"
#include "sglang/page_hash.h"
#include "sglang/page_query.h"

namespace sci {
namespace {

constexpr uint32_t kPage = 16;

std::vector<uint32_t> Prompt(uint32_t first, size_t pages, uint32_t page_size = kPage, bool eagle = false) {
  std::vector<uint32_t> tokens(pages * page_size + (eagle ? 1 : 0));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = first + static_cast<uint32_t>(i * 2654435761u);
  return tokens;
}

// Whether two pages of `prompts` (their keys distinct) would share a slot
// of a memo of kDefaultEntries entries. The memo is direct-mapped and its
// keys hold the process's secret (PageDigestMemo::Root), so which pages
// evict which differs from run to run; a test that counts exact hits and
// misses picks prompts whose pages share no slot. The keys are made as
// PageHasher::MemoKey makes them.
bool ShareAMemoSlot(const std::vector<std::vector<uint32_t>>& prompts, uint32_t page_size = kPage,
                    bool eagle = false) {
  std::set<std::pair<uint64_t, uint64_t>> keys;
  std::set<uint64_t> slots;
  for (const std::vector<uint32_t>& tokens : prompts) {
    std::vector<uint8_t> units;
    for (size_t j = 0; j + (eagle ? 1 : 0) < tokens.size(); ++j) {
      for (int k = 0; k < (eagle ? 2 : 1); ++k) {
        const uint32_t t = tokens[j + static_cast<size_t>(k)];
        for (int b = 0; b < 4; ++b) units.push_back(static_cast<uint8_t>(t >> (8 * b)));
      }
    }
    const size_t unit_bytes = eagle ? 8 : 4;
    PageDigestMemo::Key key{};
    for (size_t page = 0; page < WholePages(tokens.size(), page_size, eagle); ++page) {
      const PageDigestMemo::Key* parent = page == 0 ? nullptr : &key;
      const XXH128_hash_t h = XXH3_128bits_withSeed(units.data() + page * page_size * unit_bytes,
                                                    page_size * unit_bytes, PageDigestMemo::SeedOf(parent));
      key = PageDigestMemo::KeyOf(parent, PageDigestMemo::Key{h.low64, h.high64});
      if (!keys.insert({key.low, key.high}).second) continue;  // the same page again
      if (!slots.insert(key.low & (PageDigestMemo::kDefaultEntries - 1)).second) return true;
    }
  }
  return false;
}

// A prompt of `pages` pages from Prompt(first, ...) or after, whose pages
// share no memo slot (ShareAMemoSlot).
std::vector<uint32_t> PromptApart(uint32_t first, size_t pages, uint32_t page_size = kPage, bool eagle = false) {
  for (;; first += 1000) {
    std::vector<uint32_t> tokens = Prompt(first, pages, page_size, eagle);
    if (!ShareAMemoSlot({tokens}, page_size, eagle)) return tokens;
  }
}

// Every page hash of `tokens` through `memo`.
std::vector<std::string> MemoHex(const std::vector<uint32_t>& tokens, PageDigestMemo& memo,
                                 uint32_t page_size = kPage, bool eagle = false) {
  PageHasher hasher(tokens, page_size, eagle, &memo);
  std::vector<std::string> hashes;
  for (size_t i = 0; i < hasher.pages(); ++i) {
    char hex[kPageHashHexLength];
    ToHex(hasher.Next(), hex);
    hashes.emplace_back(hex, sizeof hex);
  }
  return hashes;
}

TEST(PageDigestMemo, RepeatedPromptIsMemoisedOnItsSecondSightAndServedFromItsThird) {
  PageDigestMemo memo;
  const std::vector<uint32_t> tokens = PromptApart(1, 20);
  const std::vector<std::string> reference = PageHashesHex(tokens, kPage, false);
  // First sight: the first page is looked up, missed and memoised; the
  // rest is hashed without the memo.
  EXPECT_EQ(MemoHex(tokens, memo), reference);
  EXPECT_EQ(memo.hits(), 0u);
  EXPECT_EQ(memo.misses(), 1u);
  EXPECT_EQ(memo.pages_hashed(), 20u);
  // Second: the first page is found, so every page is looked up; the other
  // 19 are missed, hashed and memoised.
  EXPECT_EQ(MemoHex(tokens, memo), reference);
  EXPECT_EQ(memo.hits(), 1u);
  EXPECT_EQ(memo.misses(), 20u);
  EXPECT_EQ(memo.pages_hashed(), 39u);
  // Third: nothing is hashed.
  EXPECT_EQ(MemoHex(tokens, memo), reference);
  EXPECT_EQ(memo.hits(), 21u);
  EXPECT_EQ(memo.misses(), 20u);
  EXPECT_EQ(memo.pages_hashed(), 39u);
}

// The prefix query's first page: hashed without the memo, with the same
// digest; the memo is consulted (and the sighting recorded) only if the
// caller goes on to the second page.
TEST(PageDigestMemo, HashingFirstConsultsTheMemoOnlyWhenTheRequestGoesOn) {
  PageDigestMemo memo;
  const std::vector<uint32_t> tokens = PromptApart(5, 3);
  const std::vector<std::string> reference = PageHashesHex(tokens, kPage, false);
  char hex[kPageHashHexLength];
  {
    PageHasher stops_at_the_first_page(tokens, kPage, false, &memo);
    ToHex(stops_at_the_first_page.NextHashingFirst(), hex);
    EXPECT_EQ(std::string(hex, sizeof hex), reference[0]);
  }
  EXPECT_EQ(memo.hits() + memo.misses(), 0u);
  EXPECT_EQ(memo.pages_hashed(), 1u);
  struct Pass {
    uint64_t hits, misses, hashed;
  };
  // 1: page 0 missed (memoised), page 1 hashed without the memo; 2: page 0
  // found (hashed all the same), page 1 missed and memoised; 3: both found.
  const Pass expected[3] = {{0, 1, 3}, {1, 2, 5}, {3, 2, 6}};
  for (const Pass& pass : expected) {
    PageHasher hasher(tokens, kPage, false, &memo);
    ToHex(hasher.NextHashingFirst(), hex);
    EXPECT_EQ(std::string(hex, sizeof hex), reference[0]);
    ToHex(hasher.Next(), hex);
    EXPECT_EQ(std::string(hex, sizeof hex), reference[1]);
    EXPECT_EQ(memo.hits(), pass.hits);
    EXPECT_EQ(memo.misses(), pass.misses);
    EXPECT_EQ(memo.pages_hashed(), pass.hashed);
  }
}

TEST(PageDigestMemo, SharedPrefixIsLookedUpAndTheRestIsHashed) {
  PageDigestMemo memo;
  std::vector<uint32_t> first, second;
  for (uint32_t start = 1; first.empty() || ShareAMemoSlot({first, second}); start += 1000) {
    first = Prompt(start, 12);
    second = first;
    for (size_t i = 5 * kPage; i < second.size(); ++i) second[i] += 7;  // pages 5.. differ
  }
  MemoHex(first, memo);
  MemoHex(first, memo);  // its second sight: memoised in full
  const uint64_t hits_before = memo.hits();
  EXPECT_EQ(MemoHex(second, memo), PageHashesHex(second, kPage, false));
  EXPECT_EQ(memo.hits() - hits_before, 5u);
}

TEST(PageDigestMemo, SameTokensUnderAnotherPrefixAreHashedAfresh) {
  // Page 1 holds the same tokens in both prompts, after a different page 0:
  // its SHA-256 input differs (the parent digest), so must its digest.
  PageDigestMemo memo;
  std::vector<uint32_t> a = Prompt(1, 2);
  std::vector<uint32_t> b = a;
  b[0] += 1;
  const std::vector<std::string> from_a = MemoHex(a, memo);
  const std::vector<std::string> from_b = MemoHex(b, memo);
  EXPECT_EQ(from_b, PageHashesHex(b, kPage, false));
  EXPECT_NE(from_b[1], from_a[1]);
  EXPECT_EQ(memo.hits(), 0u);
}

TEST(PageDigestMemo, EagleAndPlainPagesOfOneMemoKeepTheirOwnDigests) {
  PageDigestMemo memo;
  const std::vector<uint32_t> tokens = Prompt(3, 6, kPage, /*eagle=*/true);
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(MemoHex(tokens, memo, kPage, false), PageHashesHex(tokens, kPage, false));
    EXPECT_EQ(MemoHex(tokens, memo, kPage, true), PageHashesHex(tokens, kPage, true));
  }
  EXPECT_GT(memo.hits(), 0u);
}

TEST(PageDigestMemo, EaglePagesLongerThanTheStagingBufferHitTheMemo) {
  // 200 bigrams a page: staged in several pieces for both XXH3 and SHA-256.
  PageDigestMemo memo;
  const std::vector<uint32_t> tokens = PromptApart(9, 3, 200, /*eagle=*/true);
  const std::vector<std::string> reference = PageHashesHex(tokens, 200, true);
  for (int sight = 0; sight < 3; ++sight) EXPECT_EQ(MemoHex(tokens, memo, 200, true), reference);
  EXPECT_EQ(memo.hits(), 1u + 3u);  // the first page on the second sight, every page on the third
}

TEST(PageDigestMemo, CollidingSlotsOverwriteButNeverMislead) {
  // One slot for every page: each page evicts the last, and a lookup must
  // still tell a different page's entry from its own.
  PageDigestMemo memo(1);
  ASSERT_EQ(memo.capacity(), 1u);
  std::vector<std::vector<uint32_t>> prompts;
  for (uint32_t p = 0; p < 5; ++p) prompts.push_back(Prompt(100 * p + 1, 4));
  // Each prompt twice in a row: on its second sight its first page is found
  // (the last page memoised), and each later page misses, being evicted by
  // the page before it.
  for (int round = 0; round < 3; ++round) {
    for (const auto& tokens : prompts) {
      for (int sight = 0; sight < 2; ++sight) EXPECT_EQ(MemoHex(tokens, memo), PageHashesHex(tokens, kPage, false));
    }
  }
  EXPECT_EQ(memo.hits(), 3u * 5u);
}

TEST(PageDigestMemo, CapacityIsRoundedUpToAPowerOfTwo) {
  EXPECT_EQ(PageDigestMemo(0).capacity(), 1u);
  EXPECT_EQ(PageDigestMemo(3).capacity(), 4u);
  EXPECT_EQ(PageDigestMemo(4096).capacity(), 4096u);
  EXPECT_EQ(PageDigestMemo().capacity(), PageDigestMemo::kDefaultEntries);
}

TEST(PageDigestMemo, ClearForgetsEveryEntry) {
  PageDigestMemo memo;
  const std::vector<uint32_t> tokens = PromptApart(5, 8);
  MemoHex(tokens, memo);
  MemoHex(tokens, memo);  // memoised in full
  memo.Clear();
  const uint64_t hits_before = memo.hits();
  // A first sight again: nothing found, nothing but the first page memoised.
  EXPECT_EQ(MemoHex(tokens, memo), PageHashesHex(tokens, kPage, false));
  EXPECT_EQ(memo.hits(), hits_before);
  MemoHex(tokens, memo);
  EXPECT_EQ(MemoHex(tokens, memo), PageHashesHex(tokens, kPage, false));
  EXPECT_EQ(memo.hits() - hits_before, 1u + 8u);
}

TEST(PageDigestMemo, EachThreadHasItsOwnMemo) {
  const std::vector<uint32_t> tokens = Prompt(11, 30);
  const std::vector<std::string> reference = PageHashesHex(tokens, kPage, false);
  PageDigestMemo* mine = PageDigestMemo::ForThisThread();
  EXPECT_EQ(PageDigestMemo::ForThisThread(), mine);
  PageDigestMemo* theirs[2] = {nullptr, nullptr};
  bool right[2] = {false, false};
  // Both threads hold their memo at once: one freed by a thread that exited
  // could be reallocated at the same address for the other.
  std::latch both_hold_theirs(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      PageDigestMemo& memo = *PageDigestMemo::ForThisThread();
      theirs[t] = &memo;
      both_hold_theirs.arrive_and_wait();
      bool ok = true;
      for (int round = 0; round < 50; ++round) ok &= MemoHex(tokens, memo) == reference;
      right[t] = ok && memo.hits() > 0;
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_TRUE(right[0]);
  EXPECT_TRUE(right[1]);
  EXPECT_NE(theirs[0], theirs[1]);
  EXPECT_NE(theirs[0], mine);
  EXPECT_NE(theirs[1], mine);
}

TEST(PageDigestMemo, CheckPagesAnswersRepeatedPromptsFromTheThreadMemo) {
  Index index(SGLangIndexOptions());
  LayoutSpec spec;
  spec.page_size = kPage;
  spec.tp_size = 2;
  std::string error;
  const auto layout = Layout::Create(spec, &error);
  ASSERT_NE(layout, nullptr) << error;
  std::vector<uint32_t> tokens, other;  // other: differs from page 4 on
  for (uint32_t start = 21; tokens.empty() || ShareAMemoSlot({tokens, other}); start += 1000) {
    tokens = Prompt(start, 10);
    other = tokens;
    for (size_t i = 4 * kPage; i < other.size(); ++i) other[i] ^= 1;
  }
  const std::vector<std::string> hashes = PageHashesHex(tokens, kPage, false);
  std::vector<std::string> keys, groups;
  for (size_t page = 0; page < hashes.size(); ++page) {
    for (const std::string& key : layout->KeysFor(hashes[page], page, hashes.size())) {
      keys.push_back(key);
      groups.push_back(layout->GroupId(hashes[page]));
    }
  }
  std::vector<Event> events;
  for (size_t i = 0; i < keys.size(); ++i) events.push_back(Event{EventKind::kStored, keys[i], groups[i], {}, {}});
  index.ApplyBatch(1, events);

  PageDigestMemo& memo = *PageDigestMemo::ForThisThread();
  memo.Clear();
  std::vector<uint8_t> hits(hashes.size());
  for (int sight = 0; sight < 2; ++sight) EXPECT_EQ(CheckPages(index, *layout, tokens, kPage, hits).total_hits, 10u);
  const uint64_t hits_before = memo.hits();
  EXPECT_EQ(CheckPages(index, *layout, tokens, kPage, hits).total_hits, 10u);
  EXPECT_EQ(memo.hits() - hits_before, 10u);
  // A prompt that differs from page 4 on: four pages from the memo, the rest
  // hashed, and only those four present.
  const uint64_t before_other = memo.hits();
  const PageQueryResult result = CheckPages(index, *layout, other, kPage, hits);
  EXPECT_EQ(memo.hits() - before_other, 4u);
  EXPECT_EQ(result.total_hits, 4u);
  EXPECT_EQ(result.prefix_hits, 4u);
}

}  // namespace
}  // namespace sci
