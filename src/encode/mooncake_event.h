// One object event as the Mooncake master's production publisher writes it
// (docs/wire-formats.md, section 1). The encoder writes it and
// ReadMooncakePayload reads it back with every field, the ones the index
// does not need included, for the tools and tests. (The library's decoder,
// src/wire/, keeps only what the index applies: sci::Event.)
#pragma once

#include <cstdint>
#include <string_view>

namespace sci {

struct MooncakeEvent {
  uint64_t event_id = 0;
  bool stored = true;                 // "stored" / "removed"
  std::string_view object_key;
  std::string_view group_id;          // empty => nil
  std::string_view tenant_id = "default";
  std::string_view medium;            // empty => nil
  std::string_view backend_id = "mooncake-master-0";
  uint64_t base_block_idx = 0;        // stored only; removed writes nil
};

}  // namespace sci
