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
    // Out of memory while reporting: keep the previous message rather than
    // let an exception cross the boundary.
  }
  return status;
}

}  // namespace sci::capi

extern "C" const char* sci_last_error(void) { return sci::capi::last_error.c_str(); }
