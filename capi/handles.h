// The opaque C handles are thin shells around the C++ objects.
#pragma once

#include <atomic>
#include <memory>
#include <utility>

#include "index/index.h"
#include "layout_family.h"
#include "shared_cache_index.h"
#include "feed/subscriber.h"

namespace sci::capi {

// What an index handle shares with the subscriber feeding it. A subscriber
// stopped from its own log callback has a thread that finishes its step
// after sci_subscriber_stop returns, possibly after sci_index_free too: the
// thread keeps this alive until it exits.
struct IndexCore {
  explicit IndexCore(IndexOptions options) : index(options) {}
  Index index;
  // One subscriber per index: set by sci_subscriber_start, cleared by stop.
  std::atomic<bool> has_subscriber{false};
};

}  // namespace sci::capi

struct sci_index {
  explicit sci_index(sci::IndexOptions options)
      : core(std::make_shared<sci::capi::IndexCore>(options)), impl(core->index) {}
  std::shared_ptr<sci::capi::IndexCore> core;
  sci::Index& impl;  // core->index
};

// A layout of one family, chosen when it is made (capi_layout.cpp): the
// thunks ask it their questions and never which family it is.
struct sci_layout {
  explicit sci_layout(std::unique_ptr<const sci::capi::LayoutFamily> layout_family)
      : family(std::move(layout_family)) {}
  std::unique_ptr<const sci::capi::LayoutFamily> family;  // never null
};

struct sci_subscriber {
  sci_subscriber(std::shared_ptr<sci::capi::IndexCore> index_core, std::unique_ptr<sci::Subscriber> subscriber)
      : core(std::move(index_core)), impl(std::move(subscriber)) {}
  // Stops the subscriber (see sci::Subscriber::Stop), then lets the index
  // take another one.
  ~sci_subscriber() {
    impl.reset();
    core->has_subscriber.store(false);
  }
  std::shared_ptr<sci::capi::IndexCore> core;
  std::unique_ptr<sci::Subscriber> impl;  // never null
};
