// Operators scrape the counters as Prometheus text: names, types, labels,
// buffer handling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "shared_cache_index.h"

namespace {

sci_str S(const char* s) { return sci_str{s, std::strlen(s)}; }

class Prometheus : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(sci_index_new(nullptr, &index_), SCI_OK);
    sci_event e{SCI_EVENT_STORED, S("k"), S("g"), S(""), S("")};
    ASSERT_EQ(sci_index_apply_events(index_, 1, &e, 1), SCI_OK);
    ASSERT_EQ(sci_index_apply_events(index_, 3, &e, 1), SCI_OK);  // a gap
  }
  void TearDown() override { sci_index_free(index_); }

  std::string Render(const char* labels) {
    size_t needed = 0;
    EXPECT_EQ(sci_stats_format_prometheus(index_, S(labels), nullptr, 0, &needed), SCI_ERR_BUFFER_TOO_SMALL);
    std::vector<char> buf(needed + 1);
    size_t written = 0;
    EXPECT_EQ(sci_stats_format_prometheus(index_, S(labels), buf.data(), buf.size(), &written), SCI_OK);
    EXPECT_EQ(written, needed);
    EXPECT_EQ(buf[written], '\0');
    return std::string(buf.data(), written);
  }

  sci_index* index_ = nullptr;
};

TEST_F(Prometheus, RendersCountersAndGaugesWithTypes) {
  const std::string text = Render("");
  EXPECT_NE(text.find("# TYPE sci_keys gauge\nsci_keys 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE sci_sequence_gaps_total counter\nsci_sequence_gaps_total 1\n"), std::string::npos);
  EXPECT_NE(text.find("sci_last_sequence 3\n"), std::string::npos);
  EXPECT_NE(text.find("sci_subscriber_connected 0\n"), std::string::npos);
  EXPECT_NE(text.find("# HELP sci_fast_path_hits_total "), std::string::npos);
  EXPECT_NE(text.find("# TYPE sci_resyncing gauge\nsci_resyncing 0\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE sci_resync_failures_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE sci_stores_withheld_total counter\nsci_stores_withheld_total 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE sci_tail_numbers gauge\nsci_tail_numbers 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE sci_summarised_pages gauge\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE sci_groups_adopted_total counter\nsci_groups_adopted_total 0\n"), std::string::npos);
  // "k" is no page key (no 64-digit hash): no stray.
  EXPECT_NE(text.find("# TYPE sci_stray_keys gauge\nsci_stray_keys 0\n"), std::string::npos);
  // The object rule keeps no media: every key at the slowest tier of the default map (cpu=0, disk=1).
  EXPECT_NE(text.find("# TYPE sci_keys_tier0 gauge\nsci_keys_tier0 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE sci_keys_tier1 gauge\nsci_keys_tier1 1\n"), std::string::npos) << text;
  // Every sample line follows its HELP and TYPE lines: 53 metrics (the 21 of
  // 1.0, the 10 of 1.1, the 2 of 1.2, the 15 of 1.3, the 4 of 1.3.0 and the 1
  // of 1.4, stores_past_slot_capacity), 3 lines each.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 53 * 3);
  EXPECT_NE(text.find("# TYPE sci_disconnect_clears_total counter\nsci_disconnect_clears_total 0\n"),
            std::string::npos);
}

TEST_F(Prometheus, LabelsGoOnEverySample) {
  const std::string text = Render(R"(pool="a",node="x\"y")");
  EXPECT_NE(text.find("sci_keys{pool=\"a\",node=\"x\\\"y\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("sci_clears_total{pool=\"a\",node=\"x\\\"y\"} 1\n"), std::string::npos);
}

TEST_F(Prometheus, RejectsInvalidLabels) {
  char buf[8192];
  size_t written = 0;
  for (const char* bad : {"pool", "pool=a", "pool=\"a", "1x=\"a\"", "a=\"b\",", "__x=\"y\"", "a=\"b\\q\""}) {
    EXPECT_EQ(sci_stats_format_prometheus(index_, S(bad), buf, sizeof buf, &written), SCI_ERR_INVALID_ARGUMENT)
        << bad;
    EXPECT_NE(std::string(sci_last_error()).find("labels"), std::string::npos);
  }
}

TEST_F(Prometheus, TooSmallBufferWritesNothingAndReportsTheSize) {
  char buf[16];
  std::memset(buf, 'Z', sizeof buf);
  size_t written = 0;
  EXPECT_EQ(sci_stats_format_prometheus(index_, S(""), buf, sizeof buf, &written), SCI_ERR_BUFFER_TOO_SMALL);
  EXPECT_GT(written, sizeof buf);
  EXPECT_EQ(buf[0], 'Z');
}

// The error message and *written give one number: the text's length without
// its NUL, as the header documents; a buffer of that size plus one suffices.
TEST_F(Prometheus, TooSmallBufferMessageNamesTheLengthWrittenReports) {
  size_t written = 0;
  EXPECT_EQ(sci_stats_format_prometheus(index_, S(""), nullptr, 0, &written), SCI_ERR_BUFFER_TOO_SMALL);
  const std::string error = sci_last_error();
  EXPECT_NE(error.find("the text is " + std::to_string(written) + " bytes"), std::string::npos) << error;
  EXPECT_EQ(error.find(std::to_string(written + 1)), std::string::npos) << error;
  std::vector<char> exact(written);
  EXPECT_EQ(sci_stats_format_prometheus(index_, S(""), exact.data(), exact.size(), &written),
            SCI_ERR_BUFFER_TOO_SMALL);
  std::vector<char> enough(written + 1);
  EXPECT_EQ(sci_stats_format_prometheus(index_, S(""), enough.data(), enough.size(), &written), SCI_OK);
}

TEST_F(Prometheus, RejectsNullArguments) {
  size_t written = 0;
  char buf[8];
  EXPECT_EQ(sci_stats_format_prometheus(nullptr, S(""), nullptr, 0, &written), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sci_stats_format_prometheus(index_, S(""), nullptr, 0, nullptr), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sci_stats_format_prometheus(index_, S(""), nullptr, 8, &written), SCI_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(sci_stats_format_prometheus(index_, sci_str{nullptr, 3}, buf, 8, &written), SCI_ERR_INVALID_ARGUMENT);
}

}  // namespace
