// Page queries through a slot plan (index/slot_plan.h,
// ObjectStore::PageHas): a layout's slots resolved once answer a page
// exactly as looking up each of its keys would, for slots that are
// numbered, never stored, stored whole once numbers ran out, and not slots
// at all (a prefix ending in a hex digit); and a plan knows when a new slot
// number makes it stale.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "index/fingerprint.h"
#include "index/key_shape.h"
#include "index/object_store.h"
#include "index/slot_plan.h"

namespace sci {
namespace {

PageDigest DigestOf(uint64_t n) {
  PageDigest digest{};
  std::mt19937_64 bytes(n * 0x9E3779B97F4A7C15ull + 1);
  for (size_t i = 0; i < digest.size(); i += 8) {
    const uint64_t word = bytes();
    for (size_t j = 0; j < 8; ++j) digest[i + j] = static_cast<uint8_t>(word >> (8 * j));
  }
  return digest;
}

std::vector<SlotName> Tp2() { return {{"", "_0_k"}, {"", "_0_v"}, {"", "_1_k"}, {"", "_1_v"}}; }

bool AllKeysPresent(const ObjectStore& store, uint64_t seed, const PageDigest& digest,
                    const std::vector<SlotName>& slots) {
  for (const SlotName& slot : slots) {
    if (!store.Contains(seed, KeyOf(slot.prefix, digest, slot.suffix))) return false;
  }
  return true;
}

TEST(SlotPlan, KnowsWhichNamesAreSlots) {
  EXPECT_TRUE(SlotPlan::IsSlot({"", "_0_k"}));
  EXPECT_TRUE(SlotPlan::IsSlot({"llama@tp_rank:1@", ""}));
  EXPECT_TRUE(SlotPlan::IsSlot({"", "abc_k"}));         // hex right after the digest is the suffix's
  EXPECT_FALSE(SlotPlan::IsSlot({"cafe", "_0_k"}));     // the run would start in the prefix
  EXPECT_FALSE(SlotPlan::IsSlot({std::string(64, 'a') + "/", ""}));  // the prefix's own run comes first
  EXPECT_FALSE(SlotPlan::IsSlot({std::string(64, 'A') + "/", ""}));  // ... and does not decompose
  const std::string key = KeyOf("m@", DigestOf(3), "_x");
  const KeyShape shape = ShapeOf(key);
  ASSERT_TRUE(shape.decomposes);
  EXPECT_EQ(shape.prefix, "m@");
  EXPECT_EQ(shape.suffix, "_x");
  EXPECT_EQ(shape.digest, DigestOf(3));
}

TEST(SlotPlan, APlanIsStaleOnceASlotGetsANumber) {
  ObjectStore store;
  const uint64_t seed = TenantSeed("");
  const SlotPlan before = store.ResolvePlan(Tp2());
  EXPECT_TRUE(before.never_present());  // nothing stored: no slot numbered
  store.Store(seed, KeyOf("", DigestOf(1), "_0_k"), 0);
  EXPECT_FALSE(before.current(store.slot_names()));
  const SlotPlan after = store.ResolvePlan(Tp2());
  EXPECT_TRUE(after.current(store.slot_names()));
  EXPECT_TRUE(after.never_present());  // "_0_v" etc. still unnumbered
  for (const SlotName& slot : Tp2()) store.Store(seed, KeyOf(slot.prefix, DigestOf(1), slot.suffix), 0);
  const SlotPlan full = store.ResolvePlan(Tp2());
  EXPECT_FALSE(full.never_present());
  ASSERT_EQ(full.banks().size(), 1u);  // four slots met together: one bank, one entry read
  EXPECT_EQ(std::popcount(full.banks()[0].required), 4);
  EXPECT_TRUE(store.PageHas(seed, DigestOf(1), full));
  EXPECT_FALSE(store.PageHas(seed, DigestOf(2), full));
  EXPECT_FALSE(store.PageHas(TenantSeed("other"), DigestOf(1), full));
}

// A plan that proves nothing answers no page, in every build: one never
// resolved, one moved from, one of no names. (A review found a moved-from
// plan answering every page present.)
TEST(SlotPlan, APlanThatProvesNothingAnswersNoPage) {
  ObjectStore store;
  const uint64_t seed = TenantSeed("");
  for (const SlotName& slot : Tp2()) store.Store(seed, KeyOf(slot.prefix, DigestOf(1), slot.suffix), 0);
  SlotPlan resolved = store.ResolvePlan(Tp2());
  ASSERT_TRUE(store.PageHas(seed, DigestOf(1), resolved));
  const SlotPlan moved = std::move(resolved);
  EXPECT_TRUE(store.PageHas(seed, DigestOf(1), moved));
  EXPECT_FALSE(resolved.current(store.slot_names()));  // NOLINT(bugprone-use-after-move): what is tested
  EXPECT_FALSE(resolved.proves_something());            // NOLINT(bugprone-use-after-move)
  EXPECT_FALSE(SlotPlan().proves_something());
  const SlotPlan empty = store.ResolvePlan({});
  EXPECT_TRUE(empty.current(store.slot_names()));
  EXPECT_FALSE(store.PageHas(seed, DigestOf(2), empty));
  EXPECT_FALSE(store.PageHas(seed, DigestOf(1), empty));
}

// Random stores and removals of several layouts' keys, with slot numbers
// run out part way (a flood of one-off slots): after every step, every
// page answers through its plan exactly as its keys one by one.
TEST(SlotPlan, APageAnswersAsItsKeysOneByOne) {
  const std::vector<std::vector<SlotName>> layouts = {
      Tp2(),
      {{"m@tp_rank:0@", ""}, {"m@tp_rank:1@", ""}},
      {{"", "_0_k"}, {"", "__swa"}},               // shares a slot with Tp2
      {{"beef", "_0_k"}, {"", "_0_v"}},            // one name is not a slot
      {{"late@", ""}, {"", "_late"}},              // first stored after numbers run out
  };
  for (uint64_t seed_number = 0; seed_number < 6; ++seed_number) {
    SCOPED_TRACE(seed_number);
    std::mt19937_64 random(seed_number);
    ObjectStore store;
    const uint64_t tenants[2] = {TenantSeed(""), TenantSeed("t1")};
    const MediaSet media[3] = {0, 1, 2};
    for (int step = 0; step < 4000; ++step) {
      if (step == 1500) {  // numbers run out: every later new slot is stored whole
        for (uint32_t i = store.slot_names().size(); i < SlotNames::kCapacity; ++i) {
          store.Store(tenants[0], KeyOf("flood" + std::to_string(i) + "@", DigestOf(999), ""), 0);
        }
        ASSERT_TRUE(store.slot_names().full());
      }
      const size_t layout = random() % (step < 1500 ? layouts.size() - 1 : layouts.size());
      const auto& slots = layouts[layout];
      const SlotName& slot = slots[random() % slots.size()];
      const uint64_t tenant = tenants[random() % 2];
      const PageDigest digest = DigestOf(random() % 24);
      const std::string key = KeyOf(slot.prefix, digest, slot.suffix);
      if (random() % 3 != 0) {
        store.Store(tenant, key, media[random() % 3]);
      } else {
        store.Remove(tenant, key, media[random() % 3]);
      }
      if (step % 50 != 0) continue;
      for (const auto& asked : layouts) {
        const SlotPlan plan = store.ResolvePlan(asked);
        for (const uint64_t t : tenants) {
          for (uint64_t d = 0; d < 24; ++d) {
            ASSERT_EQ(store.PageHas(t, DigestOf(d), plan), AllKeysPresent(store, t, DigestOf(d), asked))
                << "step " << step << " digest " << d;
          }
        }
      }
    }
    EXPECT_EQ(store.Inconsistency(), "");
  }
}

}  // namespace
}  // namespace sci
