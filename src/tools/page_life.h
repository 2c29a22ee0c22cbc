// The life of one workload page on a second-generation Mooncake master
// (docs/wire-formats.md, section 5: `stored` and `removed` name one medium
// each; an object is present while some medium holds it). Which steps a
// page goes through is fixed by its number n, the how-manieth distinct page
// of the workload (from 0), so that a run covers every kind of event and a
// test can tell the end state of each page:
//
//   commit         every n     stored cpu
//   offload        n % 2 == 0  stored disk
//   evict memory   n % 4 == 0  removed cpu (the disk copy stays)
//   upsert         n % 3 == 2  removed on every medium held, then stored cpu
//   delete         n % 5 == 4  removed on every medium held
//
// in that order, each step for every key of the page before the next step.
// At the end, under the per-medium rule every page is present but the
// deleted ones; under the object rule the memory-evicted ones are missing
// too, unless an upsert stored them again (n % 12 == 8).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "publish_script.h"

namespace sci::tools {

// Emits the page's events. `page` carries the group, tenant and idx of
// every event; its key, medium and kind are set here.
void ForEachPageLifeEvent(uint64_t n, std::span<const std::string> keys, ScriptEvent page,
                          const std::function<void(const ScriptEvent&)>& emit);

}  // namespace sci::tools
