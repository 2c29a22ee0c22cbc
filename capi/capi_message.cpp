// C thunk for applying one wire message: argument checks and translation
// only; decoding and applying live in src/wire/message_apply.cpp.
#include <new>
#include <vector>

#include "capi_support.h"
#include "handles.h"
#include "wire/message_apply.h"

using sci::capi::Fail;
using sci::capi::Failf;
using sci::capi::Guard;

extern "C" sci_status sci_index_apply_message(sci_index* index, const sci_bytes* frames, size_t n_frames) {
  return Guard("sci_index_apply_message", [&] {
    if (index == nullptr) return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_index_apply_message: index is NULL");
    if (frames == nullptr && n_frames > 0) {
      return Fail(SCI_ERR_INVALID_ARGUMENT, "sci_index_apply_message: frames is NULL but n_frames > 0");
    }
    for (size_t i = 0; i < n_frames; ++i) {
      if (frames[i].ptr == nullptr && frames[i].len > 0) {
        return Failf(SCI_ERR_INVALID_ARGUMENT,
                     "sci_index_apply_message: frames[%d] has a NULL ptr and a non-zero len", i);
      }
    }
    std::vector<std::span<const uint8_t>> views;
    try {
      views.resize(n_frames);
    } catch (const std::bad_alloc&) {
      // SCI_ERR_NO_MEMORY means "the index is cleared" (the header): the
      // caller's message is lost here as surely as in ApplyMessage.
      index->impl.Clear();
      throw;
    }
    for (size_t i = 0; i < n_frames; ++i) views[i] = std::span<const uint8_t>(frames[i].ptr, frames[i].len);
    sci::DecodedMessage scratch;
    std::string reason;
    // Clears the index if it throws std::bad_alloc (Guard: SCI_ERR_NO_MEMORY).
    if (!sci::ApplyMessage(index->impl, views, scratch, &reason)) {
      return Failf(SCI_ERR_DECODE, "sci_index_apply_message: %s", reason);
    }
    return SCI_OK;
  });
}
