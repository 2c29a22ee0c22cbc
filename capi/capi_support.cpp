#include "capi_support.h"

#include <string>

#include "common/log.h"
#include "common/thread_owned.h"

namespace sci::capi {
namespace {
// The calling thread's last error message. ThreadOwned: a call that fails
// while its thread exits, after the exit freed the message (from the
// destructor of a caller's thread_local made before it, or of a pthread
// key), returns its status with no message, not writing to a freed string.
struct LastError {
  std::string message;
};
}  // namespace

sci_status Fail(sci_status status, std::string_view message) {
  LastError* last = nullptr;
  try {
    last = ThreadOwned<LastError>::Get();
    if (last != nullptr) last->message.assign(message);
  } catch (...) {
    // Out of memory while reporting: no exception may cross the boundary.
    // What fits in the string's own storage is kept (a prefix of the
    // message), never a stale message from an earlier call; with no
    // string yet, sci_last_error() stays "".
    if (last != nullptr) last->message.assign(message.substr(0, last->message.capacity()));
  }
  return status;
}

}  // namespace sci::capi

extern "C" const char* sci_last_error(void) {
  const sci::capi::LastError* last = sci::ThreadOwned<sci::capi::LastError>::Peek();
  return last == nullptr ? "" : last->message.c_str();
}
