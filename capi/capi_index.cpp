// C thunks for versions, the index, its counters and logging.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <type_traits>
#include <new>
#include <vector>

#include "capi_support.h"
#include "handles.h"
#include "common/log.h"
#include "common/prometheus_format.h"
#include "index/stat_list.h"
#include "sglang/layout.h"
#include "version.h"
#include "vllm/layout.h"

using sci::capi::Fail;
using sci::capi::Failf;
using sci::capi::Guard;
using sci::capi::HasStructSize;
using sci::capi::ToView;

namespace {

// sci_stats is written by hand in the public header; the copy below is
// generated from SCI_STAT_LIST. Both must name the same fields, of the same
// types, in the same order, with nothing else between them: each field must
// sit exactly where the previous one ends (plus alignment padding), and the
// struct must end with the last one.
constexpr size_t AlignUp(size_t offset, size_t alignment) { return (offset + alignment - 1) / alignment * alignment; }

constexpr bool SciStatsMatchesStatList() {
  size_t end = SCI_FIELD_END(sci_stats, struct_size);
#define SCI_STAT_CHECK(name, type, kind, keeper, help)                                   \
  if (!std::is_same_v<decltype(sci_stats::name), type>) return false;                   \
  if (offsetof(sci_stats, name) != AlignUp(end, alignof(type))) return false;           \
  end = SCI_FIELD_END(sci_stats, name);
  SCI_STAT_LIST(SCI_STAT_CHECK)
#undef SCI_STAT_CHECK
  return AlignUp(end, alignof(sci_stats)) == sizeof(sci_stats);
}
static_assert(SciStatsMatchesStatList(),
              "sci_stats in shared_cache_index.h and SCI_STAT_LIST in src/index/stat_list.h disagree: "
              "same fields, same types, same order");

}  // namespace

extern "C" {

uint32_t sci_abi_version(void) { return SCI_ABI_VERSION; }

const char* sci_version(void) { return SCI_VERSION_STRING; }

sci_status sci_index_new(const sci_index_options* opts, sci_index** out) {
  return Guard("sci_index_new", [&] {
    if (out == nullptr) return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_index_new: out is NULL");
    *out = nullptr;
    // A C index serves every family: it takes each family's conventions.
    sci::IndexOptions options = sci::vllm::VllmIndexOptions(sci::SGLangIndexOptions());
    if (opts != nullptr) {
      if (!HasStructSize(opts->struct_size, SCI_FIELD_END(sci_index_options, max_entries))) {
        return Failf(SCI_ERR_INVALID_ARGUMENT, "sci_index_new: opts->struct_size %u is too small (need >= %u)",
                     opts->struct_size, SCI_FIELD_END(sci_index_options, max_entries));
      }
      if (opts->max_entries != 0) options.max_entries = opts->max_entries;
      if (HasStructSize(opts->struct_size, SCI_FIELD_END(sci_index_options, residency))) {
        switch (opts->residency) {
          case SCI_RESIDENCY_OBJECT: options.residency = sci::Residency::kObject; break;
          case SCI_RESIDENCY_PER_MEDIUM: options.residency = sci::Residency::kPerMedium; break;
          default:
            return Failf(SCI_ERR_INVALID_ARGUMENT,
                         "sci_index_new: opts->residency is %u (SCI_RESIDENCY_OBJECT 0 or SCI_RESIDENCY_PER_MEDIUM 1)",
                         opts->residency);
        }
      }
      if (HasStructSize(opts->struct_size, SCI_FIELD_END(sci_index_options, medium_tiers))) {
        std::string_view text;
        if (!sci::capi::ToView(opts->medium_tiers, &text)) {
          return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_index_new: opts->medium_tiers has a NULL ptr and a non-zero len");
        }
        std::string error;
        if (!sci::MediumTiers::Parse(text, &options.tiers, &error)) {
          return Failf(SCI_ERR_INVALID_ARGUMENT, "sci_index_new: opts->medium_tiers: %s", error);
        }
      }
    }
    *out = new sci_index(options);
    return SCI_OK;
  });
}

void sci_index_free(sci_index* index) { delete index; }

void sci_index_clear(sci_index* index) {
  if (index == nullptr) return;
  sci::capi::GuardVoid("sci_index_clear", [&] { index->impl.Clear(); });
}

void sci_index_note_reconnect(sci_index* index) {
  if (index == nullptr) return;
  sci::capi::GuardVoid("sci_index_note_reconnect", [&] { index->impl.RequireEventContinuity(); });
}

sci_status sci_index_apply_events(sci_index* index, uint64_t sequence, const sci_event* events, size_t n_events) {
  return Guard("sci_index_apply_events", [&] {
    if (index == nullptr) return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_index_apply_events: index is NULL");
    if (events == nullptr && n_events > 0) {
      return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_index_apply_events: events is NULL but n_events > 0");
    }
    // Validate everything before applying anything: a bad argument changes nothing.
    std::vector<sci::Event> converted;
    try {
      converted.resize(n_events);
    } catch (const std::bad_alloc&) {
      // SCI_ERR_NO_MEMORY means "the index is cleared" (the header): the
      // batch is lost here as surely as inside ApplyBatch.
      index->impl.Clear();
      throw;
    }
    for (size_t i = 0; i < n_events; ++i) {
      const sci_event& in = events[i];
      sci::Event& event = converted[i];
      if (!ToView(in.object_key, &event.object_key) || !ToView(in.group_id, &event.group_id) ||
          !ToView(in.tenant_id, &event.tenant_id) || !ToView(in.medium, &event.medium)) {
        return Failf(SCI_ERR_INVALID_ARGUMENT,
                     "sci_index_apply_events: events[%d] has a string with a NULL ptr and a non-zero len", i);
      }
      switch (in.kind) {
        case SCI_EVENT_STORED: event.kind = sci::EventKind::kStored; break;
        case SCI_EVENT_REMOVED: event.kind = sci::EventKind::kRemoved; break;
        case SCI_EVENT_ALL_CLEARED: event.kind = sci::EventKind::kAllCleared; break;
        case SCI_EVENT_TENANT_CLEARED: event.kind = sci::EventKind::kTenantCleared; break;
        default: event.kind = sci::EventKind::kIgnored; break;  // counted, per the semantics
      }
    }
    index->impl.ApplyBatch(sequence, converted);
    return SCI_OK;
  });
}

sci_status sci_index_contains(const sci_index* index, sci_str tenant_id, sci_str object_key, bool* present) {
  return Guard("sci_index_contains", [&] {
    if (index == nullptr) return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_index_contains: index is NULL");
    if (present == nullptr) return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_index_contains: present is NULL");
    std::string_view tenant, key;
    if (!ToView(tenant_id, &tenant)) {
      return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_index_contains: tenant_id has a NULL ptr and a non-zero len");
    }
    if (!ToView(object_key, &key)) {
      return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_index_contains: object_key has a NULL ptr and a non-zero len");
    }
    *present = index->impl.Contains(tenant, key);
    return SCI_OK;
  });
}

sci_status sci_index_stats(const sci_index* index, sci_stats* stats) {
  return Guard("sci_index_stats", [&] {
    if (index == nullptr) return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_index_stats: index is NULL");
    if (stats == nullptr) return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_index_stats: stats is NULL");
    if (!HasStructSize(stats->struct_size, SCI_FIELD_END(sci_stats, fast_path_hits))) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "sci_index_stats: stats->struct_size %u is too small (need >= %u)",
                   stats->struct_size, SCI_FIELD_END(sci_stats, fast_path_hits));
    }
    const sci::Stats s = index->impl.GetStats();
    sci_stats out{};
    out.struct_size = stats->struct_size;
#define SCI_STAT_COPY(name, type, kind, keeper, help) out.name = s.name;
    SCI_STAT_LIST(SCI_STAT_COPY)
#undef SCI_STAT_COPY
    sci::capi::WriteVersioned(out, stats);
    return SCI_OK;
  });
}

sci_status sci_stats_format_prometheus(const sci_index* index, sci_str labels, char* buf, size_t buf_cap,
                                       size_t* written) {
  return Guard("sci_stats_format_prometheus", [&] {
    if (index == nullptr) return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_stats_format_prometheus: index is NULL");
    if (written == nullptr) return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_stats_format_prometheus: written is NULL");
    if (buf == nullptr && buf_cap > 0) {
      return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_stats_format_prometheus: buf is NULL but buf_cap > 0");
    }
    std::string_view label_text;
    std::string why;
    if (!ToView(labels, &label_text)) {
      return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_stats_format_prometheus: labels has a NULL ptr and a non-zero len");
    }
    if (!sci::IsValidPrometheusLabels(label_text, &why)) {
      return Failf(SCI_ERR_INVALID_ARGUMENT, "sci_stats_format_prometheus: labels: %s", why);
    }
    const std::string text = sci::FormatPrometheus(index->impl.GetStats(), label_text);
    *written = text.size();
    if (buf_cap < text.size() + 1) {
      return Failf(SCI_ERR_BUFFER_TOO_SMALL,
                   "sci_stats_format_prometheus: the text is %d bytes (*written), plus its NUL; buf_cap is %d",
                   text.size(), buf_cap);
    }
    std::memcpy(buf, text.c_str(), text.size() + 1);
    return SCI_OK;
  });
}

void sci_set_log_callback(sci_log_fn fn, void* user) { sci::SetLogCallback(fn, user); }

}  // extern "C"
