#include "capi_support.h"

#include <string>

#include "common/log.h"

namespace sci::capi {
namespace {
thread_local std::string last_error;
}

sci_status Fail(sci_status status, std::string_view message) {
  try {
    last_error.assign(message);
  } catch (...) {
    // Out of memory while reporting: no exception may cross the boundary.
    // What fits in the string's own storage is kept (a prefix of the
    // message), never a stale message from an earlier call.
    last_error.assign(message.substr(0, last_error.capacity()));
  }
  return status;
}

}  // namespace sci::capi

extern "C" const char* sci_last_error(void) { return sci::capi::last_error.c_str(); }
