// The runtime config an SGLang HiCache worker publishes
// (docs/sglang-hicache.md field names), read into a LayoutSpec: the same reading as the Rust crate's
// LayoutBuilder::from_json, fields and error paths alike, so a config means
// one layout whichever binding reads it.
#pragma once

#include <string>
#include <string_view>

#include "sglang/layout.h"

namespace sci {

// Reads
//   {"page_size":64,"tp_size":8,"pp_size":1,"tp_lcm_size":0,"is_mla_model":false,
//    "is_eagle":false,"should_split_heads":false,"extra_backend_tag":"",
//    "key_prefix":"","tenant_id":"","pools":[{"suffixes":["__k"],
//    "hit_policy":"all_pages" | "trailing_pages","trailing_pages":4}]}
// onto *spec: a field absent or null keeps *spec's value (a fresh spec's
// defaults are the config's), `pools` given replaces *spec's pools, and
// unknown fields are ignored (workers publish more than the layout).
// page_size is required unless *spec already has one (a caller with its own
// source for it, such as sci-publish's --page-size).
//
// On error returns false, leaves *spec alone and sets *error to the field's
// path and the problem: "page_size is missing", "tp_size must be an unsigned
// 32-bit integer, got \"8\"", "pools[1].trailing_pages is missing (required
// by hit_policy \"trailing_pages\")", "not valid JSON: ...". Values are
// judged against each other by Layout::Create, not here.
bool ParseRuntimeConfigJson(std::string_view json, LayoutSpec* spec, std::string* error);

}  // namespace sci
