#include "log.h"

#include <atomic>
#include <string>

#include "absl/synchronization/mutex.h"

namespace sci {
namespace {

struct Sink {
  absl::Mutex mu;
  LogFn fn ABSL_GUARDED_BY(mu) = nullptr;
  void* user ABSL_GUARDED_BY(mu) = nullptr;
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
  absl::MutexLock lock(&sink.mu);
  sink.fn = fn;
  sink.user = user;
  sink.enabled.store(fn != nullptr, std::memory_order_release);
}

bool LogEnabled() { return TheSink().enabled.load(std::memory_order_acquire); }

void LogLine(LogLevel level, std::string_view msg) {
  Sink& sink = TheSink();
  if (!sink.enabled.load(std::memory_order_acquire)) return;
  std::string line(msg);  // the callback is promised a NUL-terminated string
  absl::ReaderMutexLock lock(&sink.mu);
  if (sink.fn != nullptr) sink.fn(sink.user, static_cast<int32_t>(level), line.c_str(), line.size());
}

}  // namespace sci
