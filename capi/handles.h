// The opaque C handles are thin shells around the C++ objects.
#pragma once

#include "index.h"
#include "shared_cache_index.h"

struct sci_index {
  explicit sci_index(sci::IndexOptions options) : impl(options) {}
  sci::Index impl;
};
