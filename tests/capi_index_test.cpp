// The C ABI as a C caller sees it: only the public header and the shared
// library. Every entry point rejects bad arguments cleanly and changes
// nothing when it does.
#include <gtest/gtest.h>
#include <pthread.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "capi_test_support.h"
#include "shared_cache_index.h"

namespace {

sci_str S(const char* s) { return sci_str{s, std::strlen(s)}; }

sci_event Stored(const char* key, const char* group = "") {
  return sci_event{SCI_EVENT_STORED, S(key), S(group), S(""), S("")};
}

using sci_test::IndexHandle;
using sci_test::Stats;

bool Contains(const sci_index* index, const char* key, const char* tenant = "") {
  bool present = false;
  EXPECT_EQ(sci_index_contains(index, S(tenant), S(key), &present), SCI_OK);
  return present;
}

TEST(CapiVersion, AbiVersionMatchesTheHeader) { EXPECT_EQ(sci_abi_version(), SCI_ABI_VERSION); }

TEST(CapiVersion, VersionIsMajorMinorPatch) {
  const std::string v = sci_version();
  int major = -1, minor = -1, patch = -1;
  EXPECT_EQ(std::sscanf(v.c_str(), "%d.%d.%d", &major, &minor, &patch), 3) << v;
}

TEST(CapiErrors, LastErrorIsEmptyBeforeAnyFailureOnThisThread) {
  std::string seen;
  std::thread([&] { seen = sci_last_error(); }).join();
  EXPECT_EQ(seen, "");
}

TEST(CapiErrors, LastErrorIsPerThread) {
  EXPECT_EQ(sci_index_new(nullptr, nullptr), SCI_ERR_INVALID_ARGUMENT);
  std::string other;
  std::thread([&] { other = sci_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_NE(std::string(sci_last_error()).find("out"), std::string::npos);
}

// A call failing while its thread exits, from the destructor of a caller's
// thread_local made before the thread's first failure (so destroyed after
// the library's message): it returns its status, and sci_last_error() is
// "" (the message could not be kept), never freed memory.
struct FailsAtExit {
  sci_status* status = nullptr;
  std::string* message = nullptr;
  ~FailsAtExit() {
    if (status == nullptr) return;
    *status = sci_index_new(nullptr, nullptr);
    *message = sci_last_error();
  }
};

TEST(CapiErrors, ACallFailingAsItsThreadExitsReturnsItsStatus) {
  sci_status status = SCI_OK;
  std::string message = "unset";
  std::thread([&] {
    thread_local FailsAtExit client;
    client.status = &status;
    client.message = &message;
    EXPECT_EQ(sci_index_new(nullptr, nullptr), SCI_ERR_INVALID_ARGUMENT);
    EXPECT_STREQ(sci_last_error(), "sci_index_new: out is NULL");
  }).join();
  EXPECT_EQ(status, SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(message, "");
}

// The same from a caller's pthread-key destructor, which glibc runs after
// every thread_local destructor, in rounds: a failing call in the first
// round, with the message gone, and in the second.
struct KeyRounds {
  pthread_key_t key{};
  int round = 0;
  sci_status status[2] = {SCI_OK, SCI_OK};
  std::string message[2] = {"unset", "unset"};
};

TEST(CapiErrors, ACallFailingInAPthreadKeyDestructorReturnsItsStatus) {
  static KeyRounds rounds;
  ASSERT_EQ(pthread_key_create(&rounds.key,
                               [](void*) {
                                 const int round = rounds.round++;
                                 rounds.status[round] = sci_index_new(nullptr, nullptr);
                                 rounds.message[round] = sci_last_error();
                                 if (round == 0) (void)pthread_setspecific(rounds.key, &rounds);  // once more
                               }),
            0);
  std::thread([] {
    EXPECT_EQ(sci_index_new(nullptr, nullptr), SCI_ERR_INVALID_ARGUMENT);
    ASSERT_EQ(pthread_setspecific(rounds.key, &rounds), 0);
  }).join();
  ASSERT_EQ(rounds.round, 2);
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(rounds.status[round], SCI_ERR_INVALID_ARGUMENT) << round;
    EXPECT_EQ(rounds.message[round], "") << round;
  }
  pthread_key_delete(rounds.key);
}

TEST(CapiIndexNew, RejectsNullOut) {
  EXPECT_EQ(sci_index_new(nullptr, nullptr), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(sci_last_error(), "sci_index_new: out is NULL");
}

TEST(CapiIndexNew, RejectsZeroOrTooSmallStructSize) {
  // Too small for max_entries, the one field of 1.0 (a 1.1 caller's size,
  // which ends there, is accepted: AcceptsTheSizeOfAnOlderCaller).
  const auto too_small = static_cast<uint32_t>(offsetof(sci_index_options, max_entries) + sizeof(uint64_t) - 1);
  for (uint32_t size : {0u, 4u, too_small}) {
    sci_index_options opts{};
    opts.struct_size = size;
    sci_index* index = reinterpret_cast<sci_index*>(0x1);
    EXPECT_EQ(sci_index_new(&opts, &index), SCI_ERR_INVALID_ARGUMENT) << size;
    EXPECT_EQ(index, nullptr);
    EXPECT_NE(std::string(sci_last_error()).find("struct_size"), std::string::npos);
  }
}

TEST(CapiIndexNew, RejectsAnUnknownResidencyNamingIt) {
  sci_index_options opts = SCI_INDEX_OPTIONS_INIT;
  opts.residency = 2;
  sci_index* index = reinterpret_cast<sci_index*>(0x1);
  EXPECT_EQ(sci_index_new(&opts, &index), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(index, nullptr);
  EXPECT_NE(std::string(sci_last_error()).find("opts->residency is 2"), std::string::npos) << sci_last_error();
}

// A caller compiled against 1.1 passes the struct as it ended there: the
// residency it has no field for is not read (whatever lies beyond), and the
// object rule applies.
TEST(CapiIndexNew, AcceptsTheSizeOfAnOlderCaller) {
  sci_index_options opts = SCI_INDEX_OPTIONS_INIT;
  opts.struct_size = static_cast<uint32_t>(offsetof(sci_index_options, max_entries) + sizeof(uint64_t));
  opts.residency = 77;  // beyond the 1.1 struct: never read
  sci_index* index = nullptr;
  ASSERT_EQ(sci_index_new(&opts, &index), SCI_OK) << sci_last_error();
  const sci_event events[] = {
      {SCI_EVENT_STORED, {"k", 1}, {}, {}, {"cpu", 3}},
      {SCI_EVENT_STORED, {"k", 1}, {}, {}, {"disk", 4}},
      {SCI_EVENT_REMOVED, {"k", 1}, {}, {}, {"cpu", 3}},
  };
  ASSERT_EQ(sci_index_apply_events(index, 1, events, 3), SCI_OK);
  bool present = true;
  ASSERT_EQ(sci_index_contains(index, {}, {"k", 1}, &present), SCI_OK);
  EXPECT_FALSE(present);  // the object rule: any removal drops the key
  sci_index_free(index);
}

// The per-medium rule through the C API: a key stays while a medium holds
// it, and SCI_EVENT_TENANT_CLEARED empties its tenant alone.
TEST(CapiIndexNew, PerMediumResidencyAndTenantClears) {
  sci_index_options opts = SCI_INDEX_OPTIONS_INIT;
  opts.residency = SCI_RESIDENCY_PER_MEDIUM;
  sci_index* index = nullptr;
  ASSERT_EQ(sci_index_new(&opts, &index), SCI_OK) << sci_last_error();
  const sci_event events[] = {
      {SCI_EVENT_STORED, {"k", 1}, {}, {}, {"cpu", 3}},
      {SCI_EVENT_STORED, {"k", 1}, {}, {}, {"disk", 4}},
      {SCI_EVENT_REMOVED, {"k", 1}, {}, {}, {"cpu", 3}},
      {SCI_EVENT_STORED, {"other", 5}, {}, {"tenant-b", 8}, {"cpu", 3}},
  };
  ASSERT_EQ(sci_index_apply_events(index, 1, events, 4), SCI_OK);
  bool present = false;
  ASSERT_EQ(sci_index_contains(index, {}, {"k", 1}, &present), SCI_OK);
  EXPECT_TRUE(present);  // still on disk
  const sci_event clear_b = {SCI_EVENT_TENANT_CLEARED, {}, {}, {"tenant-b", 8}, {}};
  ASSERT_EQ(sci_index_apply_events(index, 2, &clear_b, 1), SCI_OK);
  ASSERT_EQ(sci_index_contains(index, {"tenant-b", 8}, {"other", 5}, &present), SCI_OK);
  EXPECT_FALSE(present);
  ASSERT_EQ(sci_index_contains(index, {}, {"k", 1}, &present), SCI_OK);
  EXPECT_TRUE(present);  // another tenant's clear
  const sci_event removed_disk = {SCI_EVENT_REMOVED, {"k", 1}, {}, {}, {"disk", 4}};
  ASSERT_EQ(sci_index_apply_events(index, 3, &removed_disk, 1), SCI_OK);
  ASSERT_EQ(sci_index_contains(index, {}, {"k", 1}, &present), SCI_OK);
  EXPECT_FALSE(present);
  sci_stats stats = SCI_STATS_INIT;
  ASSERT_EQ(sci_index_stats(index, &stats), SCI_OK);
  EXPECT_EQ(stats.tenant_clears, 1u);
  EXPECT_EQ(stats.medium_removals_kept, 1u);
  sci_index_free(index);
}

TEST(CapiIndexNew, AcceptsALargerStructFromANewerCaller) {
  struct Newer {
    sci_index_options v1;
    uint64_t future_field;
  } opts{};
  opts.v1.struct_size = sizeof opts;
  opts.v1.max_entries = 2;
  opts.future_field = 12345;
  sci_index* index = nullptr;
  ASSERT_EQ(sci_index_new(&opts.v1, &index), SCI_OK);
  std::vector<sci_event> events = {Stored("a"), Stored("b"), Stored("c")};
  ASSERT_EQ(sci_index_apply_events(index, 1, events.data(), events.size()), SCI_OK);
  EXPECT_EQ(Stats(index).keys, 2u);
  EXPECT_EQ(Stats(index).capacity_refusals, 1u);
  sci_index_free(index);
}

TEST(CapiIndexFree, NullIsANoOp) {
  sci_index_free(nullptr);
  sci_index_clear(nullptr);
}

TEST(CapiApplyEvents, AppliesAndQueries) {
  IndexHandle h;
  std::vector<sci_event> events = {Stored("a", "g"), Stored("b")};
  ASSERT_EQ(sci_index_apply_events(h.index, 1, events.data(), events.size()), SCI_OK);
  EXPECT_TRUE(Contains(h.index, "a"));
  EXPECT_TRUE(Contains(h.index, "b", "default"));
  EXPECT_FALSE(Contains(h.index, "b", "other"));
  const sci_stats s = Stats(h.index);
  EXPECT_EQ(s.keys, 2u);
  EXPECT_EQ(s.groups, 0u);  // page entries: neither key carries a digest
  EXPECT_TRUE(s.has_sequence);
  EXPECT_EQ(s.last_sequence, 1u);
}

TEST(CapiApplyEvents, RejectsNullIndex) {
  sci_event e = Stored("a");
  EXPECT_EQ(sci_index_apply_events(nullptr, 1, &e, 1), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(sci_last_error(), "sci_index_apply_events: index is NULL");
}

TEST(CapiApplyEvents, RejectsNullEventsWithACountAndChangesNothing) {
  IndexHandle h;
  EXPECT_EQ(sci_index_apply_events(h.index, 1, nullptr, 3), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sci_last_error()).find("events"), std::string::npos);
  EXPECT_FALSE(Stats(h.index).has_sequence);
}

TEST(CapiApplyEvents, NullEventsWithZeroCountIsAnEmptyBatch) {
  IndexHandle h;
  EXPECT_EQ(sci_index_apply_events(h.index, 4, nullptr, 0), SCI_OK);
  EXPECT_EQ(Stats(h.index).last_sequence, 4u);
}

TEST(CapiApplyEvents, BadStringRejectsTheWholeBatchAndChangesNothing) {
  IndexHandle h;
  std::vector<sci_event> events = {Stored("a"), Stored("b")};
  events[1].group_id = sci_str{nullptr, 5};
  EXPECT_EQ(sci_index_apply_events(h.index, 1, events.data(), events.size()), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sci_last_error()).find("events[1]"), std::string::npos);
  EXPECT_FALSE(Contains(h.index, "a"));
  EXPECT_FALSE(Stats(h.index).has_sequence);
  EXPECT_EQ(Stats(h.index).batches_applied, 0u);
}

TEST(CapiApplyEvents, UnknownKindIsIgnoredAndCounted) {
  IndexHandle h;
  sci_event e = Stored("a");
  e.kind = 42;
  ASSERT_EQ(sci_index_apply_events(h.index, 1, &e, 1), SCI_OK);
  EXPECT_FALSE(Contains(h.index, "a"));
  EXPECT_EQ(Stats(h.index).ignored_events, 1u);
}

TEST(CapiApplyEvents, AllClearedKindClears) {
  IndexHandle h;
  sci_event stored = Stored("a");
  ASSERT_EQ(sci_index_apply_events(h.index, 1, &stored, 1), SCI_OK);
  sci_event cleared{SCI_EVENT_ALL_CLEARED, S(""), S(""), S(""), S("")};
  ASSERT_EQ(sci_index_apply_events(h.index, 2, &cleared, 1), SCI_OK);
  EXPECT_FALSE(Contains(h.index, "a"));
  EXPECT_EQ(Stats(h.index).clears, 1u);
}

TEST(CapiClear, ForgetsKeysAndCursor) {
  IndexHandle h;
  sci_event e = Stored("a");
  ASSERT_EQ(sci_index_apply_events(h.index, 9, &e, 1), SCI_OK);
  sci_index_clear(h.index);
  EXPECT_FALSE(Contains(h.index, "a"));
  const sci_stats s = Stats(h.index);
  EXPECT_FALSE(s.has_sequence);
  EXPECT_EQ(s.clears, 1u);
  EXPECT_EQ(s.keys, 0u);
}

TEST(CapiContains, RejectsNullArguments) {
  IndexHandle h;
  bool present = true;
  EXPECT_EQ(sci_index_contains(nullptr, S(""), S("a"), &present), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(sci_last_error(), "sci_index_contains: index is NULL");
  EXPECT_EQ(sci_index_contains(h.index, S(""), S("a"), nullptr), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(sci_last_error(), "sci_index_contains: present is NULL");
  EXPECT_EQ(sci_index_contains(h.index, sci_str{nullptr, 1}, S("a"), &present), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sci_last_error()).find("tenant_id"), std::string::npos);
  EXPECT_EQ(sci_index_contains(h.index, S(""), sci_str{nullptr, 2}, &present), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(sci_last_error()).find("object_key"), std::string::npos);
}

TEST(CapiContains, NullPointerWithZeroLengthIsTheEmptyString) {
  IndexHandle h;
  bool present = true;
  EXPECT_EQ(sci_index_contains(h.index, sci_str{nullptr, 0}, sci_str{nullptr, 0}, &present), SCI_OK);
  EXPECT_FALSE(present);
}

TEST(CapiStats, RejectsNullAndTooSmallStructSize) {
  IndexHandle h;
  EXPECT_EQ(sci_index_stats(nullptr, nullptr), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sci_index_stats(h.index, nullptr), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(sci_last_error(), "sci_index_stats: stats is NULL");
  // Too small: short of release 1.0's last field (fast_path_hits).
  for (uint32_t size : {0u, 8u, static_cast<uint32_t>(offsetof(sci_stats, fast_path_hits) + 7)}) {
    sci_stats stats;
    std::memset(&stats, 0xAB, sizeof stats);
    stats.struct_size = size;
    EXPECT_EQ(sci_index_stats(h.index, &stats), SCI_ERR_INVALID_ARGUMENT) << size;
    EXPECT_NE(std::string(sci_last_error()).find("struct_size"), std::string::npos);
    EXPECT_EQ(stats.keys, 0xABABABABABABABABull);  // nothing written
  }
}

TEST(CapiStats, WritesNoMoreThanTheCallersStructAndZeroesUnknownTail) {
  IndexHandle h;
  struct Newer {
    sci_stats v1;
    uint64_t future[2];
  } stats;
  std::memset(&stats, 0xCD, sizeof stats);
  stats.v1.struct_size = sizeof stats;
  ASSERT_EQ(sci_index_stats(h.index, &stats.v1), SCI_OK);
  EXPECT_EQ(stats.v1.struct_size, sizeof stats);
  EXPECT_EQ(stats.v1.keys, 0u);
  EXPECT_EQ(stats.future[0], 0u);
  EXPECT_EQ(stats.future[1], 0u);
}

// A caller compiled against 1.0 knows the struct up to fast_path_hits: it
// gets those fields, and not one byte past them.
TEST(CapiStats, ACallerOfRelease10GetsItsFieldsAndNothingBeyond) {
  IndexHandle h;
  const size_t v10_size = offsetof(sci_stats, fast_path_hits) + sizeof(uint64_t);
  sci_stats stats;
  std::memset(&stats, 0xCD, sizeof stats);
  stats.struct_size = static_cast<uint32_t>(v10_size);
  ASSERT_EQ(sci_index_stats(h.index, &stats), SCI_OK);
  EXPECT_EQ(stats.fast_path_hits, 0u);
  const unsigned char* tail = reinterpret_cast<const unsigned char*>(&stats) + v10_size;
  for (size_t i = 0; i < sizeof stats - v10_size; ++i) EXPECT_EQ(tail[i], 0xCD) << "byte " << v10_size + i;
}

struct LogCapture {
  std::vector<std::pair<int, std::string>> lines;
  static void Fn(void* user, int32_t level, const char* msg, size_t len) {
    EXPECT_EQ(msg[len], '\0');
    static_cast<LogCapture*>(user)->lines.emplace_back(level, std::string(msg, len));
  }
};

TEST(CapiLog, GapIsReportedThroughTheCallbackAndNullSilences) {
  LogCapture capture;
  sci_set_log_callback(&LogCapture::Fn, &capture);
  IndexHandle h;
  sci_event e = Stored("a");
  ASSERT_EQ(sci_index_apply_events(h.index, 1, &e, 1), SCI_OK);
  ASSERT_EQ(sci_index_apply_events(h.index, 3, &e, 1), SCI_OK);
  sci_set_log_callback(nullptr, nullptr);
  ASSERT_EQ(sci_index_apply_events(h.index, 9, &e, 1), SCI_OK);
  ASSERT_EQ(capture.lines.size(), 1u);
  EXPECT_EQ(capture.lines[0].first, SCI_LOG_WARN);
  EXPECT_EQ(capture.lines[0].second, "sequence gap: expected 2, got 3; index cleared");
}

}  // namespace
