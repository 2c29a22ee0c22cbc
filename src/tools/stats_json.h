// Every counter of the index as one JSON object, for the tools' final line.
#pragma once

#include "index/stat_list.h"
#include "index/stats.h"
#include "json_line.h"

namespace sci::tools {

// Keys in the order of SCI_STAT_LIST (the order of sci_stats).
inline Json StatsJson(const Stats& s) {
  Json json = Json::object();
#define SCI_STAT_JSON(name, type, kind, keeper, help) json[#name] = s.name;
  SCI_STAT_LIST(SCI_STAT_JSON)
#undef SCI_STAT_JSON
  return json;
}

}  // namespace sci::tools
