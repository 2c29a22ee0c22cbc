// The opaque C handles are thin shells around the C++ objects.
#pragma once

#include <memory>
#include <utility>

#include "index/index.h"
#include "sglang/layout.h"
#include "shared_cache_index.h"
#include "feed/subscriber.h"

struct sci_index {
  explicit sci_index(sci::IndexOptions options) : impl(options) {}
  sci::Index impl;
};

struct sci_layout {
  explicit sci_layout(std::unique_ptr<const sci::Layout> layout) : impl(std::move(layout)) {}
  std::unique_ptr<const sci::Layout> impl;  // never null
};

struct sci_subscriber {
  explicit sci_subscriber(std::unique_ptr<sci::Subscriber> subscriber) : impl(std::move(subscriber)) {}
  std::unique_ptr<sci::Subscriber> impl;  // never null; stopping it joins the thread
};
