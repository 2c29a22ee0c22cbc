#include "common/log.h"

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <string>

namespace sci {
namespace {

struct Sink {
  std::shared_mutex mu;  // shared while a line is delivered: threads log in parallel
  LogFn fn = nullptr;  // guarded by mu
  void* user = nullptr;  // guarded by mu
  // Checked without the lock so that a silent library costs one load.
  std::atomic<bool> enabled{false};
};

Sink& TheSink() {
  static Sink* sink = new Sink();  // never destroyed: logging may run during exit
  return *sink;
}

// This thread's deliveries in progress (a callback may log again, through a
// library call it makes), and a callback it asked for meanwhile. The shared
// lock is held by the outermost delivery only, so a nested one neither locks
// twice nor waits for a writer that waits for this thread.
struct ThreadDelivery {
  int depth = 0;
  bool has_pending = false;
  LogFn pending_fn = nullptr;
  void* pending_user = nullptr;
};
thread_local ThreadDelivery this_thread_delivery;

void Install(LogFn fn, void* user) {
  Sink& sink = TheSink();
  // Waits for the deliveries in flight on other threads: once this returns,
  // the previous callback is not running and never runs again.
  std::unique_lock<std::shared_mutex> lock(sink.mu);
  sink.fn = fn;
  sink.user = user;
  sink.enabled.store(fn != nullptr, std::memory_order_release);
}

}  // namespace

void SetLogCallback(LogFn fn, void* user) {
  ThreadDelivery& delivery = this_thread_delivery;
  if (delivery.depth > 0) {
    // Called from inside a callback: this thread holds the lock shared, so
    // installing now would wait for itself. It takes effect once the
    // outermost callback on this thread has returned (the last call wins).
    delivery.has_pending = true;
    delivery.pending_fn = fn;
    delivery.pending_user = user;
    return;
  }
  Install(fn, user);
}

bool LogEnabled() { return TheSink().enabled.load(std::memory_order_acquire); }

void LogLine(LogLevel level, std::string_view msg) {
  Sink& sink = TheSink();
  if (!sink.enabled.load(std::memory_order_acquire)) return;
  std::string line(msg);  // the callback is promised a NUL-terminated string
  ThreadDelivery& delivery = this_thread_delivery;
  // A line logged by a library call made from a callback is delivered under
  // the lock its outer delivery already holds.
  const bool outermost = delivery.depth == 0;
  std::shared_lock<std::shared_mutex> lock(sink.mu, std::defer_lock);
  if (outermost) lock.lock();
  ++delivery.depth;
  if (sink.fn != nullptr) sink.fn(sink.user, static_cast<int32_t>(level), line.c_str(), line.size());
  --delivery.depth;
  if (!outermost) return;
  lock.unlock();
  if (delivery.has_pending) {
    delivery.has_pending = false;
    Install(delivery.pending_fn, delivery.pending_user);
  }
}

}  // namespace sci
