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

}  // namespace

void SetLogCallback(LogFn fn, void* user) {
  Sink& sink = TheSink();
  std::unique_lock<std::shared_mutex> lock(sink.mu);
  sink.fn = fn;
  sink.user = user;
  sink.enabled.store(fn != nullptr, std::memory_order_release);
}

bool LogEnabled() { return TheSink().enabled.load(std::memory_order_acquire); }

void LogLine(LogLevel level, std::string_view msg) {
  Sink& sink = TheSink();
  if (!sink.enabled.load(std::memory_order_acquire)) return;
  std::string line(msg);  // the callback is promised a NUL-terminated string
  std::shared_lock<std::shared_mutex> lock(sink.mu);
  if (sink.fn != nullptr) sink.fn(sink.user, static_cast<int32_t>(level), line.c_str(), line.size());
}

}  // namespace sci
