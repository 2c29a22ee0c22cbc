// A deterministic SGLang HiCache workload for sci-publish: prompts of
// pseudo-random token ids, some sharing a prefix, and the Mooncake objects
// SGLang workers would store for their pages under a given layout (keys and
// group ids come from sci::Layout, never re-derived here).
//
// Token ids. Token j of prompt p is
//   SplitMix64(seed * 0x9E3779B97F4A7C15 + stream * 0xBF58476D1CE4E5B9 + j) % vocab
// with stream 0 for the positions of the shared prefix (the same in every
// prompt) and stream p + 1 elsewhere. A prompt of P pages has P * page_size
// tokens (one more with eagle, whose units are bigrams), and the shared
// prefix covers the tokens of its S pages (one more with eagle), so exactly
// the first S pages hash alike across prompts.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "command_line.h"
#include "sglang/layout.h"
#include "publish_script.h"

namespace sci::tools {

struct WorkloadSpec {
  uint32_t prompts = 1;
  uint32_t pages = 16;  // whole pages per prompt
  uint32_t shared_prefix_pages = 0;
  uint64_t seed = 1;
  uint32_t vocab = 32000;
};

uint64_t SplitMix64(uint64_t x);

std::vector<std::vector<uint32_t>> MakePrompts(const WorkloadSpec& spec, uint32_t page_size, bool eagle);

// The generation of the Mooncake stream the workload is published in
// (docs/wire-formats.md, section 5).
enum class Generation {
  kFirst,   // one stored event per object, on cpu
  kSecond,  // per-medium events: each page's life as page_life.h says
};

// Emits the events of every object of every distinct page of `prompts`,
// page by page (a page's keys in layout order, with the page's group id and
// the layout's tenant). A page shared by several prompts is published once,
// as SGLang stores it once. The first generation stores each object; the
// second gives each page the life of page_life.h (n counting distinct
// pages from 0) and, with `end_with_cleared`, ends with a `cleared` of the
// tenant.
void ForEachWorkloadEvent(const Layout& layout, std::string_view tenant,
                          const std::vector<std::vector<uint32_t>>& prompts, Generation generation,
                          bool end_with_cleared, const std::function<void(const ScriptEvent&)>& emit);

// The layout flags of sci-publish (see kLayoutFlags), applied on top of
// `*spec` (which --layout-json may have filled first: sci::ParseRuntimeConfigJson).
bool ApplyLayoutFlags(const CommandLine& flags, LayoutSpec* spec, std::string* error);

}  // namespace sci::tools
