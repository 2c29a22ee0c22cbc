#include "common/prometheus_format.h"

#include <cstdint>

#include "absl/strings/str_format.h"

namespace sci {
namespace {

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }

enum class Type { kCounter, kGauge };

struct Metric {
  const char* name;
  Type type;
  const char* help;
  uint64_t value;
};

}  // namespace

bool IsValidPrometheusLabels(std::string_view labels, std::string* error) {
  size_t i = 0;
  const size_t n = labels.size();
  while (i < n) {
    const size_t name_start = i;
    if (!IsNameStart(labels[i])) {
      *error = absl::StrFormat("label name expected at offset %d", i);
      return false;
    }
    while (i < n && IsNameChar(labels[i])) ++i;
    if (labels.substr(name_start, 2) == "__") {
      *error = "label names starting with __ are reserved";
      return false;
    }
    if (i + 1 >= n || labels[i] != '=' || labels[i + 1] != '"') {
      *error = absl::StrFormat("expected =\" after label name at offset %d", i);
      return false;
    }
    i += 2;
    for (;; ++i) {
      if (i >= n) {
        *error = "unterminated label value";
        return false;
      }
      const char c = labels[i];
      if (c == '"') break;
      if (c == '\n') {
        *error = "raw newline in label value (escape it as \\n)";
        return false;
      }
      if (c == '\\') {
        if (i + 1 >= n || (labels[i + 1] != '\\' && labels[i + 1] != '"' && labels[i + 1] != 'n')) {
          *error = absl::StrFormat("bad escape in label value at offset %d", i);
          return false;
        }
        ++i;
      }
    }
    ++i;  // closing quote
    if (i < n) {
      if (labels[i] != ',' || i + 1 == n) {
        *error = absl::StrFormat("expected , between labels at offset %d", i);
        return false;
      }
      ++i;
    }
  }
  return true;
}

std::string FormatPrometheus(const Stats& s, std::string_view labels) {
  const Metric metrics[] = {
      {"sci_keys", Type::kGauge, "Object keys present in the index.", s.keys},
      {"sci_groups", Type::kGauge, "Logical groups (pages) known to the index.", s.groups},
      {"sci_verified_groups", Type::kGauge, "Groups verified complete: their pages answer with one lookup.",
       s.verified_groups},
      {"sci_batches_applied_total", Type::kCounter, "Event batches applied in sequence.", s.batches_applied},
      {"sci_events_applied_total", Type::kCounter, "Object events applied.", s.events_applied},
      {"sci_duplicate_batches_total", Type::kCounter, "Batches ignored because their sequence repeated the last one.",
       s.duplicate_batches},
      {"sci_sequence_gaps_total", Type::kCounter, "Sequence gaps or regressions: each cleared the index.",
       s.sequence_gaps},
      {"sci_clears_total", Type::kCounter, "Times the index was emptied (gap, all-cleared event, stale publisher, API).",
       s.clears},
      {"sci_malformed_messages_total", Type::kCounter, "Messages dropped as malformed (nothing applied).",
       s.malformed_messages},
      {"sci_ignored_events_total", Type::kCounter, "Events ignored: no object key, or a type the index does not use.",
       s.ignored_events},
      {"sci_capacity_refusals_total", Type::kCounter, "Keys or groups not stored because the index was full.",
       s.capacity_refusals},
      {"sci_last_sequence", Type::kGauge, "Sequence number of the last batch applied (0 when none).", s.last_sequence},
      {"sci_has_sequence", Type::kGauge, "1 when a batch has been applied since the last clear.", s.has_sequence},
      {"sci_subscriber_connected", Type::kGauge, "1 while the subscriber is connected to its publisher.",
       s.subscriber_connected},
      {"sci_subscriber_connects_total", Type::kCounter, "Subscriber connections established.", s.subscriber_connects},
      {"sci_subscriber_disconnects_total", Type::kCounter, "Subscriber connections lost.", s.subscriber_disconnects},
      {"sci_messages_received_total", Type::kCounter, "Messages received by the subscriber.", s.messages_received},
      {"sci_queries_total", Type::kCounter, "Page queries answered.", s.queries},
      {"sci_pages_checked_total", Type::kCounter, "Pages examined by page queries.", s.pages_checked},
      {"sci_page_hits_total", Type::kCounter, "Pages found fully present.", s.page_hits},
      {"sci_fast_path_hits_total", Type::kCounter, "Page hits answered by a verified group (one lookup).",
       s.fast_path_hits},
      {"sci_resyncs_total", Type::kCounter, "Snapshots loaded and caught up with the stream.", s.resyncs},
      {"sci_resync_failures_total", Type::kCounter,
       "Resyncs failed: download error, time-out, malformed snapshot, buffer overflow or gap.", s.resync_failures},
      {"sci_snapshot_keys", Type::kGauge, "Keys loaded by the last completed resync.", s.snapshot_keys},
      {"sci_resyncing", Type::kGauge, "1 while a resync is under way (queries answer miss).", s.resyncing},
      {"sci_leader_changes_total", Type::kCounter, "New Mooncake leader views followed (etcd).", s.leader_changes},
      {"sci_etcd_failures_total", Type::kCounter, "Leader-view reads that found no etcd endpoint answering.",
       s.etcd_failures},
  };
  std::string out;
  out.reserve(4096);
  const std::string label_block = labels.empty() ? std::string() : "{" + std::string(labels) + "}";
  for (const Metric& m : metrics) {
    absl::StrAppendFormat(&out, "# HELP %s %s\n# TYPE %s %s\n%s%s %d\n", m.name, m.help, m.name,
                          m.type == Type::kCounter ? "counter" : "gauge", m.name, label_block, m.value);
  }
  return out;
}

}  // namespace sci
