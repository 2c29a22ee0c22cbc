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
  bool event_id_nil = false;  // writes event_id as nil (no publisher does; tests of its absence)
  bool stored = true;                 // "stored" / "removed"
  // The second generation's "cleared" (type AllBlocksCleared): every medium
  // of `tenant_id` is empty. It names no object, so `stored`, object_key,
  // group_id, medium and base_block_idx are not written (wire-formats.md,
  // section 5).
  bool cleared = false;
  // Non-empty: a type the known publishers never send (a newer master's
  // "deleted", say), written as event_type, and as the legacy type, of an
  // event shaped as a removal. For tests of how unknown types are read.
  std::string_view unknown_type;
  std::string_view object_key;
  std::string_view group_id;          // empty => nil
  std::string_view tenant_id = "default";
  std::string_view medium;            // empty => nil
  std::string_view backend_id = "mooncake-master-0";
  uint64_t base_block_idx = 0;        // stored only; removed writes nil
  // What the engine said about its model: the first-generation captures
  // send nil, the second-generation publisher the configured values.
  std::string_view model_name;        // empty => nil
  uint64_t block_size = 0;            // 0 => nil
  // The field order of the second-generation publisher (Mooncake
  // dev/conductor): medium, dp_rank 0 and group_id in that order, and
  // base_block_idx nil even when storing. `cleared` is always written so.
  bool second_generation = false;
};

}  // namespace sci
