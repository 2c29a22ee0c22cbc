// The little language sci-publish reads: one command per line.
//
//   # a comment (also after a command: "stored k  # why")
//   stored <key> [group=<g>] [tenant=<t>] [medium=<m>] [idx=<n>]
//   removed <key> [group=<g>] [tenant=<t>] [medium=<m>]
//   cleared [tenant=<t>]
//                  every medium of the tenant is empty (the second
//                  generation's key-less event; wire-formats.md, section 5)
//   flush          end the current batch here
//   gap [n]        end the batch, then skip n sequence numbers (default 1),
//                  as the real publisher does when its queue drops events
//   sleep <ms>     end the batch, then pause
//
// Defaults: no group (nil), tenant "default", medium "cpu", idx 0. An empty
// value (`medium=`) means nil. Tokens are separated by blanks; `%XX` (two hex
// digits) stands for any byte, so keys may hold blanks, '=', '#' or bytes
// that are not text. A literal '%' is `%25`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sci::tools {

// An event with owned strings (MooncakeEvent only holds views).
struct ScriptEvent {
  bool stored = true;
  bool cleared = false;  // a tenant's `cleared`: only tenant_id counts
  std::string object_key;
  std::string group_id;  // empty = nil
  std::string tenant_id = "default";
  std::string medium = "cpu";  // empty = nil
  uint64_t base_block_idx = 0;
};

struct ScriptCommand {
  enum class Kind { kEvent, kFlush, kGap, kSleep };
  Kind kind = Kind::kEvent;
  ScriptEvent event;   // kEvent
  uint64_t count = 0;  // kGap: sequence numbers to skip; kSleep: milliseconds
  int line = 0;        // 1-based, for messages
};

// Parses a whole script. On error returns false and sets *error to
// "line N: <what>"; *out is then unspecified.
bool ParseScript(std::string_view text, std::vector<ScriptCommand>* out, std::string* error);

}  // namespace sci::tools
