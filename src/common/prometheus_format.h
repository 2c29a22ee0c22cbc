// The index's counters in the Prometheus text exposition format (0.0.4), so
// an operator's scraper can read them without knowing this library.
#pragma once

#include <string>
#include <string_view>

#include "index/stats.h"

namespace sci {

// Whether `labels` is a valid Prometheus label list body: empty, or
// name="value" pairs separated by commas (values with \\, \" and \n escapes).
bool IsValidPrometheusLabels(std::string_view labels, std::string* error);

// Renders every counter as HELP / TYPE / sample lines, names prefixed "sci_",
// counters suffixed "_total". `labels` (already validated) is added to every
// sample.
std::string FormatPrometheus(const Stats& stats, std::string_view labels);

}  // namespace sci
