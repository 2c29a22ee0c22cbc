// The opaque C handles are thin shells around the C++ objects.
#pragma once

#include <atomic>
#include <memory>
#include <utility>

#include "index/index.h"
#include "sglang/layout.h"
#include "vllm/layout.h"
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

// A layout of one family: exactly one of the two is set.
struct sci_layout {
  explicit sci_layout(std::unique_ptr<const sci::Layout> layout) : impl(std::move(layout)) {}
  explicit sci_layout(std::unique_ptr<const sci::vllm::Layout> layout) : vllm(std::move(layout)) {}
  std::unique_ptr<const sci::Layout> impl;         // SGLang HiCache
  std::unique_ptr<const sci::vllm::Layout> vllm;   // vLLM MooncakeStoreConnector
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
