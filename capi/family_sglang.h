// The SGLang HiCache family behind a sci_layout (layout_family.h).
#pragma once

#include <memory>

#include "layout_family.h"
#include "sglang/layout.h"

namespace sci::capi {

std::unique_ptr<const LayoutFamily> MakeSGLangFamily(std::unique_ptr<const Layout> layout);

// The layout inside a family MakeSGLangFamily made (the fuzz harnesses
// derive the keys they store from it).
const Layout& SGLangLayoutOf(const LayoutFamily& family);

}  // namespace sci::capi
