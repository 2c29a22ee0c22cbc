// The index's hash table (index/fingerprint_table.h) against a model, with
// keys crowded onto a few home buckets so that chains of overflow form and
// erases must undo exactly the counts their insertions made; the rule that
// splits a key's fingerprint (index/fingerprint.h), against a plain
// byte-by-byte reading of it; and the fingerprints of hash-ended strings
// (group ids): which strings are hash-ended, what tells them apart, and how
// evenly they spread.
#include "index/fingerprint_table.h"
#include "index/page_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "index/fingerprint.h"
#include "index/index.h"
#include "index/key_entry.h"

namespace sci {
namespace {

struct PackedHash {
  size_t operator()(const PackedFingerprint& k) const { return k.low() ^ (k.Unpack().high * 31); }
};

// A fingerprint whose low half (what places it) takes one of `homes` values:
// with few of them, most keys share a home and overflow past it. Its low
// three bits, which pick its filter bit (I57) and barely move its home, are
// random: keys of one home pass a bucket with different bits, and absent
// ones are stopped by the filter or walk on.
PackedFingerprint Crowded(std::mt19937_64& rng, uint64_t homes) {
  return PackedFingerprint(Fingerprint{((rng() % homes) * 0x9E3779B97F4A7C15ull & ~uint64_t{7}) | (rng() & 7), rng()});
}

void ExpectSameAs(const FingerprintTable<uint32_t>& table,
                  const std::unordered_map<PackedFingerprint, uint32_t, PackedHash>& model,
                  const std::vector<PackedFingerprint>& absent) {
  ASSERT_EQ(table.size(), model.size());
  EXPECT_EQ(table.Inconsistency(), "");
  for (const auto& [key, value] : model) {
    const uint32_t* found = table.find(key);
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(*found, value);
  }
  for (const PackedFingerprint& key : absent) {
    if (!model.contains(key)) EXPECT_FALSE(table.contains(key));
  }
}

// The packed form is the fingerprint's low half's words, then its high
// half's, low word first (built by one copy on little-endian machines): a
// table filled before a change of the constructor still finds its keys only
// if this order holds, and low() places keys by the low half.
TEST(PackedFingerprint, HoldsTheLowHalfThenTheHighHalfLowWordFirst) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1000; ++i) {
    const Fingerprint f{rng(), rng()};
    const PackedFingerprint packed(f);
    EXPECT_EQ(packed.words[0], static_cast<uint32_t>(f.low));
    EXPECT_EQ(packed.words[1], static_cast<uint32_t>(f.low >> 32));
    EXPECT_EQ(packed.words[2], static_cast<uint32_t>(f.high));
    EXPECT_EQ(packed.words[3], static_cast<uint32_t>(f.high >> 32));
    EXPECT_EQ(packed.low(), f.low);
    EXPECT_EQ(packed.Unpack(), f);
  }
}

using Model = std::unordered_map<PackedFingerprint, uint32_t, PackedHash>;

// `steps` random steps on `table` and `model` alike: two in three insert a
// new key from `make_key(rng)`, the rest erase a key seen before (present
// or not); the table is checked against the model (and its invariant)
// every `check_every` steps and at the end. Returns the keys seen.
template <typename MakeKey>
std::vector<PackedFingerprint> InsertAndEraseAgainstAModel(std::mt19937_64& rng, int steps, int check_every,
                                                           MakeKey make_key, FingerprintTable<uint32_t>& table,
                                                           Model& model) {
  std::vector<PackedFingerprint> seen;
  for (int step = 0; step < steps; ++step) {
    if (model.empty() || rng() % 3 != 0) {
      const PackedFingerprint key = make_key(rng);
      if (model.contains(key)) continue;
      const uint32_t value = static_cast<uint32_t>(rng());
      table.insert_absent(key, value);
      model[key] = value;
      seen.push_back(key);
    } else {
      const PackedFingerprint key = seen[rng() % seen.size()];
      if (uint32_t* found = table.find(key)) {
        table.erase(found);
        model.erase(key);
      } else {
        EXPECT_FALSE(model.contains(key));
      }
    }
    if (step % check_every == 0) {
      ExpectSameAs(table, model, seen);
      if (::testing::Test::HasFatalFailure()) return seen;
    }
  }
  ExpectSameAs(table, model, seen);
  return seen;
}

// InsertAndEraseAgainstAModel on a fresh table for each count of homes,
// keys from make_key(rng, homes); then keys of the same kind never stored
// must be absent.
template <typename MakeKey>
void ForEachCountOfHomes(std::initializer_list<uint64_t> counts, int steps, int check_every, MakeKey make_key) {
  for (const uint64_t homes : counts) {
    SCOPED_TRACE(homes);
    std::mt19937_64 rng(homes);
    FingerprintTable<uint32_t> table;
    Model model;
    const auto key_of = [&make_key, homes](std::mt19937_64& r) { return make_key(r, homes); };
    InsertAndEraseAgainstAModel(rng, steps, check_every, key_of, table, model);
    for (int i = 0; i < 1000; ++i) {
      const PackedFingerprint key = key_of(rng);
      if (!model.contains(key)) EXPECT_FALSE(table.contains(key));
    }
  }
}

TEST(FingerprintTable, MatchesAModelThroughInsertsErasesAndGrowth) {
  ForEachCountOfHomes({3, 50, uint64_t{1} << 40}, 20000, 997, Crowded);
}

// Homes in the last few buckets whatever the bucket count (the top of the
// low half's range), three random filter bits: probes that wrap around the
// end of the array, which keys crowded elsewhere rarely make (an outside
// review's case: an erase that did not wrap went unnoticed without it).
PackedFingerprint AtTheEnd(std::mt19937_64& rng, uint64_t homes) {
  const uint64_t low = (~uint64_t{0} - (rng() % homes) * (uint64_t{1} << 52)) & ~uint64_t{7};
  return PackedFingerprint(Fingerprint{low | (rng() & 7), rng()});
}

TEST(FingerprintTable, ProbesThatWrapAroundTheEndKeepTheirCountsAndBits) {
  ForEachCountOfHomes({1, 4, 64}, 6000, 97, AtTheEnd);
}

// Mean buckets a find of an absent random key reads.
double MeanBucketsReadWhenAbsent(const FingerprintTable<uint32_t, 2>& table, std::mt19937_64& rng) {
  constexpr int kLookups = 20000;
  size_t read = 0;
  for (int i = 0; i < kLookups; ++i) read += table.buckets_read(PackedFingerprint(Fingerprint{rng(), rng()}));
  return static_cast<double>(read) / kLookups;
}

// What I57's filter and renewal buy, in buckets read (lines) per lookup of
// an absent key, on the page table's shape (2 entries a bucket) at load
// 0.75: near one in a fresh table; under steady churn (each erase followed
// by an insertion, the size constant, as in a pool at its size), keys
// drift from their homes and filters keep bits of keys long gone, unless
// the table is renewed once worn, as ObjectStore::MakeRoom does.
TEST(FingerprintTable, AnAbsentKeyReadsAboutOneBucketFreshAndAfterChurnWithRenewal) {
  std::mt19937_64 rng(43);
  constexpr size_t kKeys = 48000;
  FingerprintTable<uint32_t, 2> renewed, worn;
  std::vector<PackedFingerprint> keys;
  // Both reserved for kKeys at the same load, then filled alike.
  renewed = renewed.Reserved(kKeys);
  worn = worn.Reserved(kKeys);
  for (size_t i = 0; i < kKeys; ++i) {
    keys.emplace_back(Fingerprint{rng(), rng()});
    renewed.insert_absent(keys.back(), 1);
    worn.insert_absent(keys.back(), 1);
  }
  ASSERT_EQ(renewed.bucket_count(), worn.bucket_count());
  const double fresh = MeanBucketsReadWhenAbsent(renewed, rng);
  EXPECT_LT(fresh, 1.6);
  size_t renewals = 0;
  for (size_t step = 0; step < 10 * kKeys; ++step) {
    const size_t victim = rng() % keys.size();
    renewed.erase(renewed.find(keys[victim]));
    worn.erase(worn.find(keys[victim]));
    keys[victim] = PackedFingerprint(Fingerprint{rng(), rng()});
    if (renewed.worn()) {
      const size_t buckets = renewed.bucket_count();
      renewed = renewed.Renewed();
      ASSERT_EQ(renewed.bucket_count(), buckets);  // the same size: nothing grows
      ASSERT_EQ(renewed.erased_since_built(), 0u);
      ++renewals;
    }
    renewed.insert_absent(keys[victim], 1);
    worn.insert_absent(keys[victim], 1);
  }
  EXPECT_EQ(renewed.bucket_count(), worn.bucket_count());
  EXPECT_GE(renewals, 15u);  // each after kKeys / 2 erases
  EXPECT_EQ(renewed.Inconsistency(), "");
  EXPECT_EQ(worn.Inconsistency(), "");
  for (const PackedFingerprint& key : keys) ASSERT_TRUE(renewed.contains(key) && worn.contains(key));
  const double after_renewal = MeanBucketsReadWhenAbsent(renewed, rng);
  const double after_wear = MeanBucketsReadWhenAbsent(worn, rng);
  EXPECT_LT(after_renewal, 2 * fresh);
  EXPECT_GT(after_wear, 3 * fresh);  // what renewal saves
  std::printf("buckets read per absent lookup at load %.2f: fresh %.2f, churned and renewed %.2f, churned %.2f\n",
              static_cast<double>(kKeys) / static_cast<double>(2 * worn.bucket_count()), fresh, after_renewal,
              after_wear);
}

// A table that erases left below kShrinkLoad (a tenant's clear) shrinks
// at its renewal to the size a growth would give the keys it has left,
// with every one of them kept and none of the erased; a table above that
// load is renewed at its size (I57).
TEST(FingerprintTable, ARenewalShrinksATableErasesLeftMostlyEmpty) {
  std::mt19937_64 rng(57);
  constexpr size_t kKeys = 100000, kKept = 4000;
  FingerprintTable<uint32_t, 2> table;
  std::vector<PackedFingerprint> keys;
  for (size_t i = 0; i < kKeys; ++i) {
    keys.emplace_back(Fingerprint{rng(), rng()});
    table.insert_absent(keys.back(), static_cast<uint32_t>(i));
  }
  const size_t full_buckets = table.bucket_count();
  // Erased down to just above the shrink load: renewed at its size.
  const auto erase_down_to = [&](size_t left) {
    while (table.size() > left) table.erase(table.find(keys[table.size() - 1]));
  };
  erase_down_to(static_cast<size_t>(0.21 * static_cast<double>(2 * full_buckets)));
  ASSERT_TRUE(table.worn());
  ASSERT_FALSE(table.sparse());
  EXPECT_EQ(table.Renewed().bucket_count(), full_buckets);
  // Just below it (0.19): shrunk.
  erase_down_to(static_cast<size_t>(0.19 * static_cast<double>(2 * full_buckets)));
  ASSERT_TRUE(table.sparse());
  EXPECT_LT(table.Renewed().bucket_count(), full_buckets / 2);
  // Below it: shrunk, to the grow load (0.55 of its entries), every kept
  // key in, with its value.
  erase_down_to(kKept);
  ASSERT_TRUE(table.worn() && table.sparse());
  const FingerprintTable<uint32_t, 2> shrunk = table.Renewed();
  EXPECT_LT(shrunk.bucket_count(), full_buckets / 10);
  EXPECT_LT(shrunk.allocated_bytes(), table.allocated_bytes() / 10);
  const double load = static_cast<double>(kKept) / static_cast<double>(2 * shrunk.bucket_count());
  EXPECT_GT(load, 0.5);
  EXPECT_LT(load, 0.6);
  EXPECT_FALSE(shrunk.full());
  EXPECT_EQ(shrunk.size(), kKept);
  EXPECT_EQ(shrunk.erased_since_built(), 0u);
  EXPECT_EQ(shrunk.Inconsistency(), "");
  for (size_t i = 0; i < kKeys; ++i) {
    const uint32_t* value = shrunk.find(keys[i]);
    if (i < kKept) {
      ASSERT_TRUE(value != nullptr && *value == i) << i;
    } else {
      ASSERT_EQ(value, nullptr) << i;
    }
  }
  // Emptied: the smallest table.
  erase_down_to(0);
  EXPECT_LE(table.Renewed().bucket_count(), 4u);
}

// A table emptied in two steps, renewed at its size between them (a first
// tenant's clear left it above kShrinkLoad), is worn by the second step
// once that leaves it sparse, though it erased fewer keys than half its
// buckets: its renewal shrinks it (I57; the third outside review's finding:
// it kept 18 times the memory it needed until churn wore it).
TEST(FingerprintTable, ATableEmptiedInTwoStepsIsWornOnceSparse) {
  std::mt19937_64 rng(58);
  FingerprintTable<uint32_t, 2> table;
  std::vector<PackedFingerprint> keys;
  for (size_t i = 0; i < 100000; ++i) {
    keys.emplace_back(Fingerprint{rng(), rng()});
    table.insert_absent(keys.back(), 1);
  }
  const size_t buckets = table.bucket_count();
  const auto erase_down_to = [&](double load) {
    while (static_cast<double>(table.size()) > load * static_cast<double>(2 * buckets)) {
      table.erase(table.find(keys[table.size() - 1]));
    }
  };
  erase_down_to(0.26);
  ASSERT_TRUE(table.worn());
  table = table.Renewed();
  ASSERT_EQ(table.bucket_count(), buckets);  // not sparse: at its size
  erase_down_to(0.03);
  ASSERT_LT(table.erased_since_built(), buckets / 2);
  ASSERT_TRUE(table.sparse());
  EXPECT_TRUE(table.worn());
  EXPECT_LT(table.Renewed().bucket_count(), buckets / 10);
  // A sparse table that erased few keys (under kWornErases, or half those it
  // holds) is not worn: a reserved table being filled never is.
  FingerprintTable<uint32_t, 2> reserved = FingerprintTable<uint32_t, 2>().Reserved(100000);
  for (size_t i = 0; i < 2000; ++i) reserved.insert_absent(keys[i], 1);
  for (size_t i = 0; i < 1000; ++i) reserved.erase(reserved.find(keys[i]));
  ASSERT_TRUE(reserved.sparse());
  EXPECT_FALSE(reserved.worn());
}

TEST(FingerprintTable, GrownHoldsTheSameEntriesAndLeavesTheOriginalAlone) {
  std::mt19937_64 rng(7);
  FingerprintTable<uint32_t> table;
  std::unordered_map<PackedFingerprint, uint32_t, PackedHash> model;
  while (!table.full() || model.size() < 100) {
    const PackedFingerprint key = Crowded(rng, 20);
    if (model.contains(key)) continue;
    table.insert_absent(key, static_cast<uint32_t>(model.size()));
    model[key] = static_cast<uint32_t>(model.size());
  }
  const size_t buckets = table.bucket_count();
  FingerprintTable<uint32_t> grown = table.Grown();
  EXPECT_EQ(table.bucket_count(), buckets);
  EXPECT_GT(grown.bucket_count(), buckets);
  EXPECT_FALSE(grown.full());
  ExpectSameAs(table, model, {});
  ExpectSameAs(grown, model, {});
  table.swap(grown);
  EXPECT_EQ(table.bucket_count(), grown.Grown().bucket_count());
  ExpectSameAs(table, model, {});
}

TEST(FingerprintTable, AReservedTableTakesWhatItWasSizedForWithoutARebuild) {
  std::mt19937_64 rng(11);
  FingerprintTable<uint32_t> table;
  std::unordered_map<PackedFingerprint, uint32_t, PackedHash> model;
  for (uint32_t i = 0; i < 100; ++i) {
    const PackedFingerprint key(Fingerprint{rng(), rng()});
    table.insert_absent(key, i);
    model[key] = i;
  }
  EXPECT_FALSE(table.holds(50000));
  FingerprintTable<uint32_t> reserved = table.Reserved(50000);
  ExpectSameAs(reserved, model, {});  // what it held comes along
  EXPECT_TRUE(reserved.holds(50000));
  const size_t buckets = reserved.bucket_count();
  for (uint32_t i = 100; i < 50000; ++i) {
    const PackedFingerprint key(Fingerprint{rng(), rng()});
    reserved.insert_absent(key, i);
    model[key] = i;
  }
  EXPECT_EQ(reserved.bucket_count(), buckets);  // no rebuild on the way
  ExpectSameAs(reserved, model, {});
  // Filled to about 75%, not to the 55-65% a growth leaves.
  const double load = 50000.0 / static_cast<double>(buckets * FingerprintTable<uint32_t>::kEntries);
  EXPECT_GT(load, 0.7);
  EXPECT_LT(load, 0.8);
  // Never smaller than what it holds.
  EXPECT_GE(reserved.Reserved(10).bucket_count() * FingerprintTable<uint32_t>::kEntries, reserved.size());
}

// Large tables are mapped and never written before use (AllocateBuckets):
// zero bytes must be an empty bucket for every value the index keeps.
struct SevenByDefault {
  uint32_t value = 7;
};
TEST(FingerprintTable, AnEmptyBucketIsZeroBytesForTheIndexsValues) {
  EXPECT_TRUE(FingerprintTable<uint32_t>::EmptyBucketIsZeroBytes());
  EXPECT_TRUE(FingerprintTable<KeyEntry>::EmptyBucketIsZeroBytes());
  EXPECT_TRUE((FingerprintTable<PageEntry, 2>::EmptyBucketIsZeroBytes()));
  EXPECT_FALSE(FingerprintTable<SevenByDefault>::EmptyBucketIsZeroBytes());  // what it would catch
  EXPECT_TRUE(Index::TablesStartAsZeroBytes());  // page entries, whole keys
}

TEST(FingerprintTable, ClearFreesEverything) {
  FingerprintTable<uint32_t> table;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 100000; ++i) table.insert_absent(PackedFingerprint(Fingerprint{rng(), rng()}), 1);
  EXPECT_GT(table.allocated_bytes(), size_t{2} << 20);  // mapped, with huge pages asked for
  table.clear();
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.allocated_bytes(), 0u);
  EXPECT_FALSE(table.contains(PackedFingerprint(Fingerprint{1, 2})));
}

// The split rule read byte by byte: after the first 64 digits of the first
// run of at least 64 hex digits, if anything follows.
size_t SplitByteByByte(std::string_view bytes) {
  size_t run = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    run = std::isxdigit(static_cast<unsigned char>(bytes[i])) ? run + 1 : 0;
    if (run == 64) return i + 1 < bytes.size() ? i + 1 : kNoFingerprintSplit;
  }
  return kNoFingerprintSplit;
}

TEST(FingerprintSplit, SglangKeysSplitAfterTheHashAndGroupIdsDoNot) {
  const std::string hash(64, 'c');
  EXPECT_EQ(FingerprintSplit(hash + "_3_k"), 64u);
  EXPECT_EQ(FingerprintSplit("model_" + hash + "__swa"), 70u);
  EXPECT_EQ(FingerprintSplit("sglang-hicache:" + hash), kNoFingerprintSplit);  // nothing after the hash
  EXPECT_EQ(FingerprintSplit(hash), kNoFingerprintSplit);
  EXPECT_EQ(FingerprintSplit("short_key"), kNoFingerprintSplit);
  // A prefix ending in digits moves the split into it; uppercase counts.
  EXPECT_EQ(FingerprintSplit("AB" + hash + "_0_k"), 64u);
  // 63 digits, a break, 64 digits: the second run.
  EXPECT_EQ(FingerprintSplit(std::string(63, 'e') + "_" + hash + "x"), 128u);
}

TEST(FingerprintSplit, AgreesWithAByteByByteReading) {
  std::mt19937_64 rng(11);
  const std::string alphabet = "0123456789abcdefABCDEF_-:xyz\x80\xff";
  for (int i = 0; i < 20000; ++i) {
    std::string key(rng() % 200, ' ');
    // Mostly digits, so that long runs form and break at random places.
    for (char& c : key) c = rng() % 8 ? alphabet[rng() % 16] : alphabet[rng() % alphabet.size()];
    ASSERT_EQ(FingerprintSplit(key), SplitByteByByte(key)) << key;
  }
}

TEST(FingerprintSplit, ASplitKeyIsItsPartsCombined) {
  const uint64_t seed = TenantSeed("default");
  const std::string head = "p_" + std::string(64, '9');
  const std::string key = head + "_1_v";
  EXPECT_EQ(FingerprintOf(seed, key),
            CombineFingerprintParts(seed, FingerprintPart(seed, head), FingerprintPart(seed, "_1_v")));
  // Whole keys and combined parts are separate domains: a key made of
  // another key's part bytes does not take its fingerprint.
  EXPECT_NE(FingerprintOf(seed, key), FingerprintPart(seed, key));
}

// ---- hash-ended strings (group ids) ----

std::string RandomHash(std::mt19937_64& rng) {
  std::string hash(64, '0');
  for (char& c : hash) c = "0123456789abcdef"[rng() % 16];
  return hash;
}

TEST(HashEndedFingerprint, IsHowAStringEndingWithItsFirstRunOfDigitsIsFingerprinted) {
  const uint64_t seed = TenantSeed("default");
  const std::string hash(64, 'c');
  const HashEndSecret group = HashEndSecretOf(seed, "sglang-hicache:");
  EXPECT_EQ(FingerprintOf(seed, "sglang-hicache:" + hash), HashEndedFingerprint(group, hash.data()));
  EXPECT_EQ(FingerprintOf(seed, hash), HashEndedFingerprint(HashEndSecretOf(seed, ""), hash.data()));
  // Not hash-ended: a longer run ends the string but its first 64 digits do
  // not (a split key), and a run of 63.
  EXPECT_EQ(FingerprintOf(seed, "x_" + hash + "9"),
            CombineFingerprintParts(seed, FingerprintPart(seed, "x_" + hash), FingerprintPart(seed, "9")));
  EXPECT_EQ(FingerprintOf(seed, "x_" + hash.substr(1)), FingerprintPart(seed, "x_" + hash.substr(1)));
}

TEST(HashEndedFingerprint, PrefixTenantCaseAndConstructionAllTellStringsApart) {
  std::mt19937_64 rng(5);
  const std::string hash = RandomHash(rng);
  std::string upper = hash;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  ASSERT_NE(upper, hash);
  const uint64_t seed = TenantSeed("default");
  const Fingerprint group = FingerprintOf(seed, "sglang-hicache:" + hash);
  EXPECT_NE(group, FingerprintOf(seed, "sglang-hicache:" + upper));
  EXPECT_NE(group, FingerprintOf(seed, "sglang-hicache:tag_" + hash));
  EXPECT_NE(group, FingerprintOf(seed, hash));
  EXPECT_NE(group, FingerprintOf(TenantSeed("other"), "sglang-hicache:" + hash));
  EXPECT_NE(group, FingerprintPart(seed, "sglang-hicache:" + hash));  // XXH3 of the same bytes
  // One digit changed anywhere changes both halves.
  for (size_t i = 0; i < hash.size(); ++i) {
    std::string other = hash;
    other[i] = other[i] == '0' ? '1' : '0';
    const Fingerprint changed = FingerprintOf(seed, "sglang-hicache:" + other);
    EXPECT_NE(changed.low, group.low) << "digit " << i;
    EXPECT_NE(changed.high, group.high) << "digit " << i;
  }
}

// A query that holds a digest fingerprints from its bytes; the writer,
// given the key's text, decodes lowercase digits to the same bytes. Both
// must agree for every digest, and any other byte in a run of otherwise
// lowercase digits must take the digits' own form.
TEST(HashEndedFingerprint, TheDigestsBytesGiveTheFingerprintOfItsLowercaseDigits) {
  std::mt19937_64 rng(11);
  const HashEndSecret secret = HashEndSecretOf(TenantSeed("default"), "prod@M@tp_rank:0@group:0@");
  for (int trial = 0; trial < 1000; ++trial) {
    std::array<uint8_t, 32> digest;
    for (uint8_t& byte : digest) byte = static_cast<uint8_t>(rng());
    if (trial == 0) digest.fill(0x00);
    if (trial == 1) digest.fill(0xFF);
    char hex[65];  // snprintf writes each pair with its NUL
    for (size_t i = 0; i < digest.size(); ++i) std::snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    std::array<uint8_t, 32> decoded;
    ASSERT_TRUE(LowercaseHexBytes(hex, decoded.data()));
    ASSERT_EQ(decoded, digest);
    EXPECT_EQ(HashEndedFingerprintOfBytes(secret, digest.data()), HashEndedFingerprint(secret, hex));
  }
  const std::string hash = RandomHash(rng);
  for (size_t i = 0; i < hash.size(); ++i) {
    for (const char other : {'A', 'F', 'g', '/', ':', '`', '\x80'}) {
      std::string changed = hash;
      changed[i] = other;
      std::array<uint8_t, 32> bytes;
      EXPECT_FALSE(LowercaseHexBytes(changed.data(), bytes.data())) << i << " " << other;
    }
  }
}

// Chi-square of the top 10 bits of each half over 1024 bins: the table
// places a key by its low half's top bits and the index shards by the high
// half, so both must spread evenly, for page hashes and for digit runs with
// structure (distinct, but mostly zeros) alike. With 1023
// degrees of freedom the statistic's mean is 1023 and its deviation 45; an
// uneven mix lands in the thousands.
double ChiSquareOfTopBits(const std::vector<uint64_t>& halves) {
  std::array<double, 1024> bins{};
  for (uint64_t h : halves) bins[h >> 54] += 1;
  const double expected = static_cast<double>(halves.size()) / bins.size();
  double chi = 0;
  for (double n : bins) chi += (n - expected) * (n - expected) / expected;
  return chi;
}

TEST(HashEndedFingerprint, SpreadsRandomAndStructuredDigitsEvenly) {
  const HashEndSecret secret = HashEndSecretOf(TenantSeed("default"), "sglang-hicache:");
  std::mt19937_64 rng(7);
  constexpr size_t kStrings = 200000;
  const auto consecutive = [](size_t i) {
    char hex[65];
    std::snprintf(hex, sizeof hex, "%064zx", i);
    return std::string(hex, 64);
  };
  // A counter in one of eight 8-digit windows, the rest zeros.
  const auto counter_in_a_window = [](size_t i) {
    std::string hash(64, '0');
    char digits[9];
    std::snprintf(digits, sizeof digits, "%08zx", i);
    hash.replace((i % 8) * 8, 8, digits);
    return hash;
  };
  const std::pair<const char*, std::function<std::string(size_t)>> sources[] = {
      {"random", [&rng](size_t) { return RandomHash(rng); }},
      {"consecutive", consecutive},
      {"counter in a window", counter_in_a_window},
  };
  for (const auto& [name, next] : sources) {
    std::vector<uint64_t> lows, highs;
    for (size_t i = 0; i < kStrings; ++i) {
      const Fingerprint f = HashEndedFingerprint(secret, next(i).data());
      lows.push_back(f.low);
      highs.push_back(f.high);
    }
    EXPECT_LT(ChiSquareOfTopBits(lows), 1023 + 6 * 45) << name << ", low half";
    EXPECT_LT(ChiSquareOfTopBits(highs), 1023 + 6 * 45) << name << ", high half";
  }
}

TEST(HashEndedFingerprint, NoTwoOfAMillionPageHashesShareEitherHalf) {
  const HashEndSecret secret = HashEndSecretOf(TenantSeed("default"), "sglang-hicache:");
  std::mt19937_64 rng(9);
  std::vector<uint64_t> lows, highs;
  for (size_t i = 0; i < 1000000; ++i) {
    const Fingerprint f = HashEndedFingerprint(secret, RandomHash(rng).data());
    lows.push_back(f.low);
    highs.push_back(f.high);
  }
  // A 64-bit collision among 10^6 random values has odds of 3 in 10^8.
  for (std::vector<uint64_t>* halves : {&lows, &highs}) {
    std::sort(halves->begin(), halves->end());
    EXPECT_EQ(std::adjacent_find(halves->begin(), halves->end()), halves->end());
  }
}

}  // namespace
}  // namespace sci
