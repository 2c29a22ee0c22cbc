// The vLLM MooncakeStoreConnector family behind a sci_layout
// (layout_family.h).
#pragma once

#include <memory>

#include "layout_family.h"
#include "vllm/layout.h"

namespace sci::capi {

std::unique_ptr<const LayoutFamily> MakeVllmFamily(std::unique_ptr<const vllm::Layout> layout);

}  // namespace sci::capi
