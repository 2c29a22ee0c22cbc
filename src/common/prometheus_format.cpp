#include "common/prometheus_format.h"

#include <cstdint>

#include "common/format.h"
#include "index/stat_list.h"

namespace sci {
namespace {

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }

// By the kind column of SCI_STAT_LIST: monotonic counters end in "_total".
#define SCI_PROMETHEUS_SUFFIX_COUNTER "_total"
#define SCI_PROMETHEUS_SUFFIX_GAUGE ""
#define SCI_PROMETHEUS_TYPE_COUNTER "counter"
#define SCI_PROMETHEUS_TYPE_GAUGE "gauge"

struct Metric {
  const char* name;
  const char* type;
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
      *error = sci::StrFormat("label name expected at offset %d", i);
      return false;
    }
    while (i < n && IsNameChar(labels[i])) ++i;
    if (labels.substr(name_start, 2) == "__") {
      *error = "label names starting with __ are reserved";
      return false;
    }
    if (i + 1 >= n || labels[i] != '=' || labels[i + 1] != '"') {
      *error = sci::StrFormat("expected =\" after label name at offset %d", i);
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
          *error = sci::StrFormat("bad escape in label value at offset %d", i);
          return false;
        }
        ++i;
      }
    }
    ++i;  // closing quote
    if (i < n) {
      if (labels[i] != ',' || i + 1 == n) {
        *error = sci::StrFormat("expected , between labels at offset %d", i);
        return false;
      }
      ++i;
    }
  }
  return true;
}

std::string FormatPrometheus(const Stats& s, std::string_view labels) {
  const Metric metrics[] = {
#define SCI_STAT_METRIC(name, type, kind, keeper, help) \
  {"sci_" #name SCI_PROMETHEUS_SUFFIX_##kind, SCI_PROMETHEUS_TYPE_##kind, help, static_cast<uint64_t>(s.name)},
      SCI_STAT_LIST(SCI_STAT_METRIC)
#undef SCI_STAT_METRIC
  };
  std::string out;
  out.reserve(4096);
  // Built by appending, not by operator+ on temporaries: GCC 12 reports a
  // false -Wrestrict on `"{" + std::string(labels) + "}"` at -O2.
  std::string label_block;
  if (!labels.empty()) {
    label_block.reserve(labels.size() + 2);
    label_block.push_back('{');
    label_block.append(labels);
    label_block.push_back('}');
  }
  for (const Metric& m : metrics) {
    sci::StrAppendFormat(&out, "# HELP %s %s\n# TYPE %s %s\n%s%s %d\n", m.name, m.help, m.name,
                          m.type, m.name, label_block, m.value);
  }
  return out;
}

}  // namespace sci
