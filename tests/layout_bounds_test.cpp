// Issue #34, R3: every number a layout reads -- from vLLM's descriptor,
// SGLang's runtime config or sci_layout_spec -- either takes part in
// overflow-free arithmetic or is refused with SCI_ERR_INVALID_ARGUMENT
// naming its field. Each numeric field is tried at its bounds (0, 1, the
// largest accepted value and the one past it, values about 2^32 and 2^64,
// negative and fractional ones, and combinations whose products overflow)
// through the public C API; an accepted extreme layout is then queried, and
// it must answer what its chunks say. 1.2 computed a sliding window's
// chunks in 32 bits: windows within block_size of 2^32 wrapped to 0 chunks
// and the group vouched for nothing (prefix 4 with only the full-attention
// chunks stored).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "capi_test_support.h"
#include "query/digest.h"
#include "shared_cache_index.h"
#include "vllm/block_hash.h"

namespace {

using sci_test::IndexHandle;

// What a layout call should do: build, or refuse naming `field`.
struct Want {
  bool ok;
  std::string field;  // with !ok: text sci_last_error must contain
};
const Want kOk{true, ""};
Want Refused(std::string field) { return Want{false, std::move(field)}; }

void ExpectLayout(const std::string& json, const Want& want) {
  SCOPED_TRACE(json);
  sci_layout* layout = nullptr;
  const sci_status status = sci_layout_new_json(sci_str{json.data(), json.size()}, &layout);
  if (want.ok) {
    EXPECT_EQ(status, SCI_OK) << sci_last_error();
    EXPECT_NE(layout, nullptr);
  } else {
    EXPECT_EQ(status, SCI_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(layout, nullptr);
    EXPECT_NE(std::string(sci_last_error()).find(want.field), std::string::npos)
        << "the error does not name " << want.field << ": " << sci_last_error();
  }
  sci_layout_free(layout);
}

// Numbers as JSON text, so the ones no uint32_t holds can be written.
const char* const k2p32m1 = "4294967295";
const char* const k2p32 = "4294967296";
const char* const k2p32p1 = "4294967297";
const char* const k2p64m1 = "18446744073709551615";
const char* const k2p64 = "18446744073709551616";

// A vLLM descriptor; each argument is a value's JSON text.
struct Descriptor {
  std::string schema_version = "1";
  std::string seed_policy = "\"pythonhashseed-0\"";
  std::string main_event_block_size = "16";
  std::string lcm_block_size = "null";
  std::string group_id = "0";
  std::string block_size = "16";
  std::string hash_block_size = "16";
  std::string window;  // set: a second, sliding-window group (block 16) with this window
  std::string window_block_size = "16";

  std::string Json() const {
    std::string groups = R"([{"group_id": )" + group_id + R"(, "kind": "full_attention", "block_size": )" +
                         block_size + R"(, "hash_block_size": )" + hash_block_size +
                         R"(, "key_prefixes": ["m@tp_rank:0@group:0"]})";
    if (!window.empty()) {
      groups += R"(, {"kind": "sliding_window", "block_size": )" + window_block_size + R"(, "hash_block_size": )" +
                hash_block_size + R"(, "sliding_window": )" + window + R"(, "key_prefixes": ["m@tp_rank:0@group:1"]})";
    }
    groups += "]";
    return R"({"schema_version": )" + schema_version + R"(, "hash": {"algorithm": "sha256", "seed_policy": )" +
           seed_policy + R"(}, "main_event_block_size": )" + main_event_block_size +
           R"(, "coordinator": {"lcm_block_size": )" + lcm_block_size + R"(}, "groups": )" + groups + "}";
  }
};

TEST(LayoutBounds, VllmSchemaVersion) {
  const std::pair<const char*, Want> cases[] = {
      {"0", Refused("schema_version")},   {"1", kOk},
      {"2", Refused("schema_version")},   {k2p32m1, Refused("schema_version")},
      {k2p32, Refused("schema_version")}, {k2p64m1, Refused("schema_version")},
      {k2p64, Refused("schema_version")}, {"-1", Refused("schema_version")},
      {"1.5", Refused("schema_version")}, {"1e0", Refused("schema_version")},
  };
  for (const auto& [value, want] : cases) {
    Descriptor d;
    d.schema_version = value;
    ExpectLayout(d.Json(), want);
  }
}

TEST(LayoutBounds, VllmSeedPolicy) {
  const std::pair<const char*, Want> cases[] = {
      {"0", kOk},
      {"1", kOk},
      {"4294967294", kOk},
      {k2p32m1, kOk},
      {k2p32, Refused("hash.seed_policy")},
      {k2p32p1, Refused("hash.seed_policy")},
      {"9999999999", Refused("hash.seed_policy")},
      {k2p64m1, Refused("hash.seed_policy")},
      {k2p64, Refused("hash.seed_policy")},
      {"-1", Refused("hash.seed_policy")},
      {"", Refused("hash.seed_policy")},
  };
  for (const auto& [value, want] : cases) {
    Descriptor d;
    d.seed_policy = std::string("\"pythonhashseed-") + value + "\"";
    ExpectLayout(d.Json(), want);
  }
}

// main_event_block_size, coordinator.lcm_block_size, a group's block_size
// and hash_block_size: at least 1, and their lcm (the alignment) at most 2^24.
TEST(LayoutBounds, VllmBlockSizes) {
  struct Case {
    std::string main, lcm, block, hash;
    Want want;
  };
  const Case cases[] = {
      {"0", "null", "1", "1", Refused("main_event_block_size")},
      {"1", "null", "1", "1", kOk},
      {"16777216", "null", "1", "1", kOk},  // 2^24: the largest alignment
      {"16777217", "null", "1", "1", Refused("main_event_block_size")},
      {k2p32m1, "null", "1", "1", Refused("main_event_block_size")},
      {k2p32, "null", "1", "1", Refused("main_event_block_size")},
      {k2p64, "null", "1", "1", Refused("main_event_block_size")},
      {"-16", "null", "1", "1", Refused("main_event_block_size")},
      {"16.0", "null", "1", "1", Refused("main_event_block_size")},
      {"16", "0", "16", "16", Refused("coordinator.lcm_block_size")},
      {"16", "1", "16", "16", kOk},
      {"16", "16777216", "16", "16", kOk},
      {"16", "16777217", "16", "16", Refused("lcm_block_size")},
      {"16", k2p32m1, "16", "16", Refused("lcm_block_size")},
      {"16", k2p32, "16", "16", Refused("coordinator.lcm_block_size")},
      {"16", k2p64m1, "16", "16", Refused("coordinator.lcm_block_size")},
      // lcm(2^24 - 1, 2^24) = 2^48 - 2^24: each alone is fine, together not.
      {"16777215", "16777216", "1", "1", Refused("lcm_block_size")},
      {"16", "null", "0", "16", Refused("groups[0].block_size")},
      {"16", "null", "8", "16", Refused("groups[0].block_size")},
      {"1", "null", "1", "1", kOk},
      {"16", "null", "16777216", "16", kOk},
      {"16", "null", "16777232", "16", Refused("groups[].block_size")},  // 2^24 + 16
      {"16", "null", "4294967280", "16", Refused("groups[].block_size")},  // 2^32 - 16
      {"16", "null", k2p32, "16", Refused("groups[0].block_size")},
      {"16", "null", k2p64m1, "16", Refused("groups[0].block_size")},
      {"16", "null", "16", "0", Refused("groups[0].hash_block_size")},
      {"16", "null", "16", "32", Refused("groups[0].block_size")},
      {"16777216", "null", "16777216", "16777216", kOk},
      {k2p32m1, "null", k2p32m1, k2p32m1, Refused("main_event_block_size")},
      {"16", "null", "16", k2p32, Refused("groups[0].hash_block_size")},
      {"16", "null", "16", k2p64, Refused("groups[0].hash_block_size")},
  };
  for (const Case& c : cases) {
    Descriptor d;
    d.main_event_block_size = c.main;
    d.lcm_block_size = c.lcm;
    d.block_size = c.block;
    d.hash_block_size = c.hash;
    ExpectLayout(d.Json(), c.want);
  }
}

TEST(LayoutBounds, VllmGroupId) {
  const std::pair<const char*, Want> cases[] = {
      {"0", kOk},          {"1", kOk}, {k2p32m1, kOk}, {k2p32, Refused("groups[0].group_id")},
      {k2p64, Refused("groups[0].group_id")}, {"-1", Refused("groups[0].group_id")},
  };
  for (const auto& [value, want] : cases) {
    Descriptor d;
    d.group_id = value;
    ExpectLayout(d.Json(), want);
  }
}

TEST(LayoutBounds, VllmSlidingWindow) {
  const std::pair<const char*, Want> cases[] = {
      {"0", Refused("groups[1].sliding_window")},
      {"1", kOk},
      {"2", kOk},
      {"4294967279", kOk},  // 2^32 - 17
      {"4294967283", kOk},  // wrapped to 0 chunks in 1.2
      {"4294967294", kOk},
      {k2p32m1, kOk},
      {k2p32, Refused("groups[1].sliding_window")},
      {k2p64m1, Refused("groups[1].sliding_window")},
      {k2p64, Refused("groups[1].sliding_window")},
      {"-1", Refused("groups[1].sliding_window")},
      {"1.5", Refused("groups[1].sliding_window")},
  };
  for (const auto& [value, want] : cases) {
    Descriptor d;
    d.window = value;
    ExpectLayout(d.Json(), want);
  }
}

TEST(LayoutBounds, VllmCounts) {
  // groups: at most 64.
  for (size_t n : {size_t{64}, size_t{65}}) {
    std::string groups;
    for (size_t g = 0; g < n; ++g) {
      groups += std::string(g == 0 ? "" : ", ") +
                R"({"kind": "full_attention", "block_size": 16, "hash_block_size": 16, "key_prefixes": ["g)" +
                std::to_string(g) + "\"]}";
    }
    ExpectLayout(R"({"schema_version": 1, "hash": {"algorithm": "sha256"}, "main_event_block_size": 16, "groups": [)" +
                     groups + "]}",
                 n <= 64 ? kOk : Refused("groups"));
  }
  // key_prefixes: at most 4096 per group, each short enough for a 1024-byte key.
  for (size_t n : {size_t{4096}, size_t{4097}}) {
    std::string prefixes;
    for (size_t p = 0; p < n; ++p) prefixes += std::string(p == 0 ? "\"" : ", \"") + "p" + std::to_string(p) + "\"";
    ExpectLayout(R"({"schema_version": 1, "hash": {"algorithm": "sha256"}, "main_event_block_size": 16, "groups": [)"
                 R"({"kind": "full_attention", "block_size": 16, "hash_block_size": 16, "key_prefixes": [)" +
                     prefixes + "]}]}",
                 n <= 4096 ? kOk : Refused("groups[0].key_prefixes"));
  }
  for (size_t length : {size_t{1024 - 65}, size_t{1024 - 64}}) {
    ExpectLayout(R"({"schema_version": 1, "hash": {"algorithm": "sha256"}, "main_event_block_size": 16, "groups": [)"
                 R"({"kind": "full_attention", "block_size": 16, "hash_block_size": 16, "key_prefixes": [")" +
                     std::string(length, 'p') + "\"]}]}",
                 length <= 1024 - 65 ? kOk : Refused("groups[0].key_prefixes[0]"));
  }
}

// The windows about 2^32, queried: with only the full-attention chunks
// stored the sliding-window group holds no chunk a prefix needs, so the
// prefix is 0; with every chunk of both groups stored, it is the whole
// request but its last token.
TEST(LayoutBounds, AWindowNear2To32NeedsEveryChunkOfTheRequest) {
  const std::vector<uint32_t> tokens = [] {
    std::vector<uint32_t> t(81);  // 5 blocks and a token
    std::iota(t.begin(), t.end(), 7u);
    return t;
  }();
  const std::vector<sci::vllm::BlockDigest> chain = sci::vllm::HashChain(sci::vllm::HashAlgorithm::kSha256, "0",
                                                                          tokens, 16);
  for (const char* window : {"4294967279", "4294967283", "4294967294", k2p32m1}) {
    SCOPED_TRACE(window);
    Descriptor d;
    d.window = window;
    const std::string json = d.Json();
    sci_layout* layout = nullptr;
    ASSERT_EQ(sci_layout_new_json(sci_str{json.data(), json.size()}, &layout), SCI_OK) << sci_last_error();
    IndexHandle index;
    const auto store_group = [&](int group) {
      std::vector<std::string> keys;
      for (const sci::vllm::BlockDigest& digest : chain) {
        std::string hex(sci::kPageHashHexLength, '\0');
        sci::ToHex(digest, hex.data());
        keys.push_back("m@tp_rank:0@group:" + std::to_string(group) + "@" + hex);
      }
      std::vector<sci_event> events;
      for (const std::string& key : keys) {
        sci_event event{};
        event.kind = SCI_EVENT_STORED;
        event.object_key = sci_str{key.data(), key.size()};
        events.push_back(event);
      }
      ASSERT_EQ(sci_index_apply_events(index.index, 1 + group, events.data(), events.size()), SCI_OK);
    };
    const auto prefix = [&] {
      size_t blocks = 99;
      EXPECT_EQ(sci_index_check_prefix(index.index, layout, tokens.data(), tokens.size(), 16, &blocks), SCI_OK);
      return blocks;
    };
    store_group(0);
    EXPECT_EQ(prefix(), 0u) << "the window's group vouched for a prefix none of its chunks is stored for";
    store_group(1);
    EXPECT_EQ(prefix(), 5u);
    sci_layout_free(layout);
  }
}

// SGLang's runtime config (JSON) and sci_layout_spec.
std::string SglangJson(const std::string& field, const std::string& value, const std::string& extra = "") {
  std::string json = "{";
  if (field != "page_size") json += R"("page_size": 64, )";
  json += "\"" + field + "\": " + value + extra + "}";
  return json;
}

TEST(LayoutBounds, SglangScalars) {
  struct Case {
    const char* field;
    std::string value;
    Want want;
  };
  const Case cases[] = {
      {"page_size", "0", Refused("page_size")},
      {"page_size", "1", kOk},
      {"page_size", "4294967294", kOk},
      {"page_size", k2p32m1, kOk},
      {"page_size", k2p32, Refused("page_size")},
      {"page_size", k2p64m1, Refused("page_size")},
      {"page_size", k2p64, Refused("page_size")},
      {"page_size", "-1", Refused("page_size")},
      {"page_size", "64.5", Refused("page_size")},
      {"tp_size", "0", kOk},
      {"tp_size", "1", kOk},
      {"tp_size", "1024", kOk},
      {"tp_size", "1025", Refused("tp_size")},
      {"tp_size", k2p32m1, Refused("tp_size")},
      {"tp_size", k2p32, Refused("tp_size")},
      {"tp_size", k2p64, Refused("tp_size")},
      {"tp_size", "-1", Refused("tp_size")},
      {"pp_size", "0", kOk},
      {"pp_size", "1024", kOk},
      {"pp_size", "1025", Refused("pp_size")},
      {"pp_size", k2p32m1, Refused("pp_size")},
      {"pp_size", k2p32, Refused("pp_size")},
      {"tp_lcm_size", "0", kOk},
      {"tp_lcm_size", "1024", kOk},
      {"tp_lcm_size", "1025", Refused("tp_lcm_size")},
      {"tp_lcm_size", k2p32m1, Refused("tp_lcm_size")},
      {"tp_lcm_size", k2p32, Refused("tp_lcm_size")},
  };
  for (const Case& c : cases) ExpectLayout(SglangJson(c.field, c.value), c.want);
  // Products: keys per page = ranks x pp x 2, at most 4096.
  ExpectLayout(SglangJson("tp_size", "1024", R"(, "pp_size": 2)"), kOk);
  ExpectLayout(SglangJson("tp_size", "1024", R"(, "pp_size": 3)"), Refused("tp_size"));
  ExpectLayout(SglangJson("tp_size", "1024", R"(, "pp_size": 1024)"), Refused("pp_size"));
  ExpectLayout(SglangJson("tp_lcm_size", "1024", R"(, "should_split_heads": true, "pp_size": 3)"),
               Refused("tp_lcm_size"));
  ExpectLayout(SglangJson("tp_size", "1024", R"(, "pp_size": 1024, "is_mla_model": true)"), kOk);  // pp keys only
}

TEST(LayoutBounds, SglangTrailingPages) {
  const std::pair<const char*, Want> cases[] = {
      {"0", kOk},
      {"1", kOk},
      {k2p32m1, kOk},
      {k2p32, Refused("pools[0].trailing_pages")},
      {k2p64, Refused("pools[0].trailing_pages")},
      {"-1", Refused("pools[0].trailing_pages")},
  };
  for (const auto& [value, want] : cases) {
    ExpectLayout(std::string(R"({"page_size": 4, "pools": [{"suffixes": ["__k"], "hit_policy": "trailing_pages", )"
                             R"("trailing_pages": )") +
                     value + "}]}",
                 want);
  }
}

// The extremes accepted, queried: no page the request does not have, no crash.
TEST(LayoutBounds, SglangExtremesAnswerWhatTheirPagesSay) {
  IndexHandle index;
  const std::vector<uint32_t> tokens(100, 5);
  for (const char* json : {R"({"page_size": 4294967295})", R"({"page_size": 1, "tp_size": 1024, "pp_size": 2})",
                           R"({"page_size": 4, "pools": [{"suffixes": ["__k"], "hit_policy": "trailing_pages",
                               "trailing_pages": 4294967295}]})"}) {
    SCOPED_TRACE(json);
    sci_layout* layout = nullptr;
    ASSERT_EQ(sci_layout_new_json(sci_str{json, std::strlen(json)}, &layout), SCI_OK) << sci_last_error();
    const uint32_t block = sci_layout_block_size(layout);
    std::vector<uint8_t> hits(tokens.size());
    sci_page_result result = SCI_PAGE_RESULT_INIT;
    ASSERT_EQ(sci_index_check_pages(index.index, layout, tokens.data(), tokens.size(), block, hits.data(), hits.size(),
                                    &result),
              SCI_OK);
    EXPECT_EQ(result.n_pages, tokens.size() / block);
    EXPECT_EQ(result.total_hits, 0u);
    size_t prefix = 99;
    ASSERT_EQ(sci_index_check_prefix(index.index, layout, tokens.data(), tokens.size(), block, &prefix), SCI_OK);
    EXPECT_EQ(prefix, 0u);
    sci_layout_free(layout);
  }
}

// sci_layout_spec: the same bounds, and counts a caller passes that would
// walk off its arrays or multiply past the per-page bound.
TEST(LayoutBounds, SglangSpecStruct) {
  const auto make = [](sci_layout_spec spec, const Want& want) {
    sci_layout* layout = nullptr;
    const sci_status status = sci_layout_new(&spec, &layout);
    if (want.ok) {
      EXPECT_EQ(status, SCI_OK) << sci_last_error();
    } else {
      EXPECT_EQ(status, SCI_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(sci_last_error()).find(want.field), std::string::npos) << sci_last_error();
    }
    sci_layout_free(layout);
  };
  sci_layout_spec base = SCI_LAYOUT_SPEC_INIT;
  base.page_size = 64;
  for (uint32_t page_size : {0u, 1u, UINT32_MAX - 1, UINT32_MAX}) {
    sci_layout_spec spec = base;
    spec.page_size = page_size;
    make(spec, page_size == 0 ? Refused("page_size") : kOk);
  }
  for (uint32_t size : {0u, 1u, 1024u, 1025u, UINT32_MAX}) {
    for (uint32_t sci_layout_spec::*field : {&sci_layout_spec::tp_size, &sci_layout_spec::pp_size,
                                             &sci_layout_spec::tp_lcm_size}) {
      sci_layout_spec spec = base;
      spec.*field = size;
      make(spec, size <= 1024 ? kOk : Refused("_size"));
    }
  }
  // 4096 keys per page: pools and suffixes counted before they are read.
  const sci_str suffix{"__k", 3};
  std::vector<sci_str> suffixes(4097, suffix);
  std::vector<sci_pool> pools(2);
  for (sci_pool& pool : pools) {
    pool.suffixes = suffixes.data();
    pool.hit_policy = SCI_HIT_TRAILING_PAGES;
    pool.trailing_pages = UINT32_MAX;
  }
  sci_layout_spec spec = base;
  spec.pools = pools.data();
  pools[0].n_suffixes = 4096;
  spec.n_pools = 1;
  make(spec, kOk);
  pools[0].n_suffixes = 4097;
  make(spec, Refused("n_suffixes"));
  pools[0].n_suffixes = 4096;
  pools[1].n_suffixes = 1;
  spec.n_pools = 2;
  make(spec, Refused("4096"));
  pools[0].n_suffixes = SIZE_MAX;
  make(spec, Refused("n_suffixes"));
  spec.n_pools = SIZE_MAX;
  make(spec, Refused("n_pools"));
}

}  // namespace
