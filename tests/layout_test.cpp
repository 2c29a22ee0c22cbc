// SGLang key derivation, checked against hand-written key lists for small
// cases (docs/sglang-hicache.md), the layout ids that scope
// verifications, and the validation of specs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "index/fingerprint.h"
#include "sglang/layout.h"

namespace sci {
namespace {

using Keys = std::vector<std::string>;

LayoutSpec Mha(uint32_t tp, uint32_t pp) {
  LayoutSpec spec;
  spec.page_size = 4;
  spec.tp_size = tp;
  spec.pp_size = pp;
  return spec;
}

LayoutSpec WithPools(std::vector<PoolSpec> pools) {
  LayoutSpec spec = Mha(8, 1);  // ignored once pools are advertised
  spec.pools = std::move(pools);
  return spec;
}

PoolSpec AllPages(std::vector<std::string> suffixes) { return PoolSpec{std::move(suffixes), HitPolicy::kAllPages, 0}; }
PoolSpec Trailing(std::vector<std::string> suffixes, uint32_t t) {
  return PoolSpec{std::move(suffixes), HitPolicy::kTrailingPages, t};
}

std::unique_ptr<const Layout> Make(const LayoutSpec& spec) {
  std::string error;
  std::unique_ptr<const Layout> layout = Layout::Create(spec, &error);
  EXPECT_NE(layout, nullptr) << error;
  return layout;
}

// Keys of a page in a one-page request (every pool covers it).
Keys KeysOf(const LayoutSpec& spec, std::string_view hash = "h") { return Make(spec)->KeysFor(hash, 0, 1); }

std::string ErrorOf(const LayoutSpec& spec) {
  std::string error;
  EXPECT_EQ(Layout::Create(spec, &error), nullptr);
  return error;
}

// ---- keys without pools ----

TEST(LayoutKeys, MhaTp2Pp2MatchesTheDocExample) {
  EXPECT_EQ(KeysOf(Mha(2, 2)), (Keys{"h_0_0_k", "h_0_0_v", "h_1_0_k", "h_1_0_v", "h_0_1_k", "h_0_1_v", "h_1_1_k",
                                     "h_1_1_v"}));
}

TEST(LayoutKeys, MhaWithoutPipelineHasRankSuffixesOnly) {
  EXPECT_EQ(KeysOf(Mha(1, 1)), (Keys{"h_0_k", "h_0_v"}));
  EXPECT_EQ(KeysOf(Mha(2, 1)), (Keys{"h_0_k", "h_0_v", "h_1_k", "h_1_v"}));
}

TEST(LayoutKeys, ZeroParallelSizesBehaveAsOne) {
  EXPECT_EQ(KeysOf(Mha(0, 0)), KeysOf(Mha(1, 1)));
  EXPECT_EQ(KeysOf(Mha(2, 0)), KeysOf(Mha(2, 1)));
}

TEST(LayoutKeys, Tp8IsSixteenKeysPerPage) { EXPECT_EQ(KeysOf(Mha(8, 1)).size(), 16u); }

TEST(LayoutKeys, MlaWithoutPipelineIsOneDoubleUnderscoreKey) {
  LayoutSpec spec = Mha(8, 1);
  spec.is_mla_model = true;
  EXPECT_EQ(KeysOf(spec), (Keys{"h__k"}));
}

TEST(LayoutKeys, MlaWithPipelineIsOneKeyPerStage) {
  LayoutSpec spec = Mha(8, 2);
  spec.is_mla_model = true;
  EXPECT_EQ(KeysOf(spec), (Keys{"h_0_k", "h_1_k"}));
}

TEST(LayoutKeys, MlaIgnoresSplitHeads) {
  LayoutSpec spec = Mha(2, 1);
  spec.is_mla_model = true;
  spec.should_split_heads = true;
  spec.tp_lcm_size = 8;
  EXPECT_EQ(KeysOf(spec), (Keys{"h__k"}));
}

TEST(LayoutKeys, SplitHeadsSpreadsOverTpLcmRanks) {
  LayoutSpec spec = Mha(2, 1);
  spec.should_split_heads = true;
  spec.tp_lcm_size = 4;
  EXPECT_EQ(KeysOf(spec), (Keys{"h_0_k", "h_0_v", "h_1_k", "h_1_v", "h_2_k", "h_2_v", "h_3_k", "h_3_v"}));
}

TEST(LayoutKeys, SplitHeadsWithPipelineNamesRankAndStage) {
  LayoutSpec spec = Mha(1, 2);
  spec.should_split_heads = true;
  spec.tp_lcm_size = 2;
  EXPECT_EQ(KeysOf(spec), (Keys{"h_0_0_k", "h_0_0_v", "h_1_0_k", "h_1_0_v", "h_0_1_k", "h_0_1_v", "h_1_1_k",
                                "h_1_1_v"}));
}

TEST(LayoutKeys, SplitHeadsNeverUsesFewerRanksThanTp) {
  LayoutSpec spec = Mha(4, 1);
  spec.should_split_heads = true;
  spec.tp_lcm_size = 2;  // smaller than tp: tp wins
  EXPECT_EQ(KeysOf(spec), KeysOf(Mha(4, 1)));
  spec.tp_lcm_size = 0;  // unset: tp
  EXPECT_EQ(KeysOf(spec), KeysOf(Mha(4, 1)));
}

TEST(LayoutKeys, TpLcmWithoutSplitHeadsIsIgnored) {
  LayoutSpec spec = Mha(2, 1);
  spec.tp_lcm_size = 8;
  EXPECT_EQ(KeysOf(spec), KeysOf(Mha(2, 1)));
}

TEST(LayoutKeys, TagPrefixesKeysWithoutPools) {
  LayoutSpec spec = Mha(1, 1);
  spec.extra_backend_tag = "tag";
  EXPECT_EQ(KeysOf(spec), (Keys{"tag_h_0_k", "tag_h_0_v"}));
}

TEST(LayoutKeys, KeyPrefixIsIgnoredWithoutPools) {
  LayoutSpec spec = Mha(1, 1);
  spec.key_prefix = "kp";
  EXPECT_EQ(KeysOf(spec), (Keys{"h_0_k", "h_0_v"}));
}

// ---- keys with advertised pools ----

TEST(LayoutKeys, PoolsReplaceTheDerivedKeysWithLogicalPlusSuffix) {
  EXPECT_EQ(KeysOf(WithPools({AllPages({"__kv", "__idx"}), AllPages({"_x"})})), (Keys{"h__kv", "h__idx", "h_x"}));
}

TEST(LayoutKeys, PoolsPreferKeyPrefixOverTag) {
  LayoutSpec spec = WithPools({AllPages({"__kv"})});
  spec.key_prefix = "kp";
  spec.extra_backend_tag = "tag";
  EXPECT_EQ(KeysOf(spec), (Keys{"kp_h__kv"}));
  // The group id still carries the tag, not the key prefix.
  EXPECT_EQ(Make(spec)->GroupId("h"), "sglang-hicache:tag_h");
}

TEST(LayoutKeys, PoolsFallBackToTheTag) {
  LayoutSpec spec = WithPools({AllPages({"__kv"})});
  spec.extra_backend_tag = "tag";
  EXPECT_EQ(KeysOf(spec), (Keys{"tag_h__kv"}));
}

TEST(LayoutKeys, PoolsWithNeitherPrefixNorTagUseTheBareHash) {
  EXPECT_EQ(KeysOf(WithPools({AllPages({"__kv"})})), (Keys{"h__kv"}));
}

TEST(LayoutKeys, TrailingPoolCoversOnlyTheLastPages) {
  const auto layout = Make(WithPools({AllPages({"__kv"}), Trailing({"__swa"}, 2)}));
  EXPECT_EQ(layout->KeysFor("h", 0, 4), (Keys{"h__kv"}));
  EXPECT_EQ(layout->KeysFor("h", 1, 4), (Keys{"h__kv"}));
  EXPECT_EQ(layout->KeysFor("h", 2, 4), (Keys{"h__kv", "h__swa"}));
  EXPECT_EQ(layout->KeysFor("h", 3, 4), (Keys{"h__kv", "h__swa"}));
}

TEST(LayoutKeys, TrailingCountBeyondTheRequestCoversEveryPage) {
  const auto layout = Make(WithPools({AllPages({"__kv"}), Trailing({"__swa"}, 10)}));
  for (size_t page = 0; page < 3; ++page) EXPECT_EQ(layout->KeysFor("h", page, 3), (Keys{"h__kv", "h__swa"}));
}

TEST(LayoutKeys, TrailingZeroCoversNoPage) {
  const auto layout = Make(WithPools({AllPages({"__kv"}), Trailing({"__swa"}, 0)}));
  EXPECT_EQ(layout->KeysFor("h", 0, 1), (Keys{"h__kv"}));
}

TEST(LayoutKeys, OnlyTrailingPoolsLeaveEarlierPagesWithoutKeys) {
  const auto layout = Make(WithPools({Trailing({"__swa"}, 1)}));
  EXPECT_EQ(layout->KeysFor("h", 0, 2), Keys{});
  EXPECT_EQ(layout->LevelFor(0, 2).n_suffixes, 0u);
  EXPECT_EQ(layout->KeysFor("h", 1, 2), (Keys{"h__swa"}));
}

TEST(LayoutKeys, SeveralTrailingCountsKeepPoolOrder) {
  const auto layout = Make(WithPools({Trailing({"_c"}, 3), AllPages({"_a"}), Trailing({"_b"}, 1)}));
  EXPECT_EQ(layout->KeysFor("h", 9, 10), (Keys{"h_c", "h_a", "h_b"}));
  EXPECT_EQ(layout->KeysFor("h", 8, 10), (Keys{"h_c", "h_a"}));
  EXPECT_EQ(layout->KeysFor("h", 7, 10), (Keys{"h_c", "h_a"}));
  EXPECT_EQ(layout->KeysFor("h", 6, 10), (Keys{"h_a"}));
  EXPECT_EQ(layout->KeysFor("h", 0, 10), (Keys{"h_a"}));
  EXPECT_EQ(layout->levels().size(), 3u);
}

// ---- group ids ----

TEST(LayoutGroupId, IsNamespacedPageHash) {
  EXPECT_EQ(Make(Mha(1, 1))->GroupId("h"), "sglang-hicache:h");
}

TEST(LayoutGroupId, CarriesTheTag) {
  LayoutSpec spec = Mha(1, 1);
  spec.extra_backend_tag = "tag";
  EXPECT_EQ(Make(spec)->GroupId("h"), "sglang-hicache:tag_h");
}

// ---- slots ----

// A level's keys as (tenant, slot names): what a page entry must hold.
std::vector<std::string> KeySetOf(const Layout& layout, size_t level) {
  std::vector<std::string> out{std::to_string(layout.tenant_seed())};
  for (const SlotName& slot : layout.Slots(layout.levels()[level])) out.push_back(slot.prefix + "|" + slot.suffix);
  return out;
}

TEST(LayoutSlots, LayoutsDerivingTheSameKeysNameTheSameSlots) {
  LayoutSpec a = Mha(2, 2);
  LayoutSpec b = Mha(2, 2);
  b.page_size = 64;  // hashing differs, keys per hash do not
  b.is_eagle = true;
  LayoutSpec c = Mha(2, 2);
  c.tp_lcm_size = 16;  // ignored without split heads
  EXPECT_EQ(KeySetOf(*Make(a), 0), KeySetOf(*Make(b), 0));
  EXPECT_EQ(KeySetOf(*Make(a), 0), KeySetOf(*Make(c), 0));
  EXPECT_EQ(KeySetOf(*Make(Mha(0, 0)), 0), KeySetOf(*Make(Mha(1, 1)), 0));
}

TEST(LayoutSlots, LayoutsDerivingDifferentKeysNeverNameTheSameSlots) {
  LayoutSpec tagged = Mha(2, 1);
  tagged.extra_backend_tag = "tag";
  LayoutSpec tenant = Mha(2, 1);
  tenant.tenant_id = "tenant-a";
  LayoutSpec mla = Mha(2, 1);
  mla.is_mla_model = true;
  LayoutSpec prefixed = WithPools({AllPages({"_0_k", "_0_v", "_1_k", "_1_v"})});
  prefixed.key_prefix = "kp";
  const std::vector<std::vector<std::string>> sets = {
      KeySetOf(*Make(Mha(2, 1)), 0), KeySetOf(*Make(Mha(1, 1)), 0), KeySetOf(*Make(Mha(2, 2)), 0),
      KeySetOf(*Make(tagged), 0),    KeySetOf(*Make(tenant), 0),    KeySetOf(*Make(mla), 0),
      KeySetOf(*Make(prefixed), 0),
  };
  for (size_t i = 0; i < sets.size(); ++i) {
    for (size_t j = i + 1; j < sets.size(); ++j) EXPECT_NE(sets[i], sets[j]) << i << " vs " << j;
  }
}

TEST(LayoutSlots, DefaultTenantSpelledOutIsTheSameTenant) {
  LayoutSpec named = Mha(2, 1);
  named.tenant_id = "default";
  EXPECT_EQ(KeySetOf(*Make(named), 0), KeySetOf(*Make(Mha(2, 1)), 0));
}

TEST(LayoutSlots, EachCoverageLevelAddsItsPoolsSlots) {
  const auto layout = Make(WithPools({AllPages({"__kv"}), Trailing({"__swa"}, 2), Trailing({"__x"}, 1)}));
  ASSERT_EQ(layout->levels().size(), 3u);
  EXPECT_EQ(KeySetOf(*layout, 0).size(), 2u);
  EXPECT_EQ(KeySetOf(*layout, 1).size(), 3u);
  EXPECT_EQ(KeySetOf(*layout, 2).size(), 4u);
  for (const SlotName& slot : layout->Slots(layout->levels()[2])) {
    EXPECT_TRUE(slot.named && slot.is_slot) << slot.suffix;
  }
  // A layout whose only pool is the base level's key set names that level's slots.
  EXPECT_EQ(KeySetOf(*layout, 0), KeySetOf(*Make(WithPools({AllPages({"__kv"})})), 0));
}

// ---- validation ----

TEST(LayoutValidation, RejectsZeroPageSize) {
  LayoutSpec spec = Mha(1, 1);
  spec.page_size = 0;
  EXPECT_EQ(ErrorOf(spec), "page_size is 0");
}

TEST(LayoutValidation, RejectsAbsurdParallelSizes) {
  EXPECT_EQ(ErrorOf(Mha(1025, 1)), "tp_size is 1025 (more than 1024)");
  EXPECT_EQ(ErrorOf(Mha(1, 1025)), "pp_size is 1025 (more than 1024)");
  LayoutSpec lcm = Mha(1, 1);
  lcm.tp_lcm_size = 5000;
  EXPECT_EQ(ErrorOf(lcm), "tp_lcm_size is 5000 (more than 1024)");
}

TEST(LayoutValidation, RejectsMoreThan4096KeysPerPage) {
  EXPECT_NE(Make(Mha(1024, 2)), nullptr);  // exactly 4096
  EXPECT_EQ(ErrorOf(Mha(1024, 4)), "tp_size 1024, pp_size 4, tp_lcm_size 0 give 8192 keys per page (more than 4096)");
  LayoutSpec split = Mha(2, 4);
  split.should_split_heads = true;
  split.tp_lcm_size = 1024;
  EXPECT_NE(ErrorOf(split).find("8192 keys per page"), std::string::npos);
  LayoutSpec mla = Mha(1024, 1024);
  mla.is_mla_model = true;  // one key per stage
  EXPECT_NE(Make(mla), nullptr);
}

TEST(LayoutValidation, RejectsAPoolWithoutSuffixes) {
  EXPECT_EQ(ErrorOf(WithPools({AllPages({"__kv"}), AllPages({})})), "pools[1].suffixes is empty");
}

TEST(LayoutValidation, RejectsAnEmptySuffix) {
  EXPECT_EQ(ErrorOf(WithPools({AllPages({"__kv", ""})})), "pools[0].suffixes[1] is empty");
}

TEST(LayoutValidation, RejectsAnUnknownHitPolicy) {
  PoolSpec pool = AllPages({"__kv"});
  pool.hit_policy = static_cast<HitPolicy>(7);
  EXPECT_EQ(ErrorOf(WithPools({pool})), "pools[0].hit_policy is 7 (want all_pages 0 or trailing_pages 1)");
}

TEST(LayoutValidation, RejectsTooManyPoolSuffixes) {
  std::vector<std::string> suffixes;
  for (int i = 0; i < 2049; ++i) suffixes.push_back("_" + std::to_string(i));
  EXPECT_EQ(ErrorOf(WithPools({AllPages(suffixes), AllPages(suffixes)})),
            "pools have 4098 suffixes in total (more than 4096 keys per page)");
}

TEST(LayoutValidation, RejectsKeysThatWouldNotFitTheKeyBuffer) {
  LayoutSpec prefixed = WithPools({AllPages({"__kv"})});
  prefixed.key_prefix = std::string(1000, 'p');
  EXPECT_EQ(ErrorOf(prefixed), "key_prefix is too long: keys would be 1069 bytes (at most 1024)");
  LayoutSpec suffixed = WithPools({AllPages({"__kv", std::string(1000, 's')})});
  EXPECT_EQ(ErrorOf(suffixed), "pools[0].suffixes[1] is too long: keys would be 1064 bytes (at most 1024)");
  LayoutSpec tagged = Mha(1, 1);
  tagged.extra_backend_tag = std::string(1000, 't');
  EXPECT_NE(ErrorOf(tagged).find("extra_backend_tag is 1000 bytes"), std::string::npos);
}

TEST(LayoutValidation, LongestKeyIsKnownAfterCreation) {
  LayoutSpec spec = Mha(2, 2);
  spec.extra_backend_tag = "tag";
  EXPECT_EQ(Make(spec)->max_key_length(), std::string("tag_").size() + 64 + std::string("_1_1_k").size());
}

}  // namespace
}  // namespace sci
