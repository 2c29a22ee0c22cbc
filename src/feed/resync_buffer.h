// The stream a resync holds back while its snapshot downloads (resync.h):
// messages in arrival order, the first `memory_bytes` of them in memory, the
// rest spilled to an unlinked temporary file (up to `spill_bytes`) and read
// back in order by the replay.
//
// Why a file: a resync lasts as long as its snapshot takes to download and
// load (30M keys: about 20 s), and a busy master goes on publishing
// meanwhile (100k events/s of production messages: about 30 MB/s). Held in
// memory, that stream would cost more than the download itself, or, capped
// in memory, fail the resync every time (the stream outruns it). Spilled, it
// costs disk (page cache the kernel may write back and drop), written and
// read once, sequentially. The file is unlinked as soon as it is created, so
// nothing is left behind whatever happens to the process.
//
// Owned by the subscriber's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>
#include <zmq.hpp>

namespace sci {

class ResyncBuffer {
 public:
  struct Limits {
    size_t memory_bytes = 0;  // held in memory (frames plus a per-message overhead)
    size_t spill_bytes = 0;   // spilled to the file beyond that; 0: never spill
    std::string spill_dir;    // where the file is made; empty: $TMPDIR, else /tmp
  };

  explicit ResyncBuffer(Limits limits) : limits_(std::move(limits)) {}
  ~ResyncBuffer() { Clear(); }
  ResyncBuffer(const ResyncBuffer&) = delete;
  ResyncBuffer& operator=(const ResyncBuffer&) = delete;

  // Appends a message, moving its frames out of `frames`. False when it
  // does not fit (both limits reached, or the file cannot be made or
  // written: `*error` says which); the buffer is unchanged then.
  bool Add(std::span<zmq::message_t> frames, std::string* error);

  bool empty() const { return messages_ == 0; }
  size_t messages() const { return messages_; }
  size_t memory_bytes() const { return memory_bytes_; }
  size_t spilled_bytes() const { return spilled_bytes_; }
  // What one message costs against the limits.
  static size_t CostOf(std::span<const zmq::message_t> frames);

  // Calls apply(frames) for every message in order (frames: spans valid
  // during the call), stopping at the first call that returns false. False
  // if apply stopped it or the file could not be read back (`*error`).
  template <typename Apply>
  bool ForEach(Apply&& apply, std::string* error);

  // Forgets every message and closes (deletes) the file.
  void Clear();

 private:
  bool Spill(std::span<const zmq::message_t> frames, std::string* error);
  // The next spilled message into read_frames_; false at a read error.
  bool ReadSpilled(std::string* error);

  const Limits limits_;
  std::vector<std::vector<zmq::message_t>> in_memory_;
  size_t messages_ = 0;
  size_t memory_bytes_ = 0;
  size_t spilled_bytes_ = 0;
  size_t spilled_messages_ = 0;
  std::FILE* file_ = nullptr;
  bool read_back_ = false;  // ForEach moved the file position off its end
  std::vector<uint8_t> read_bytes_;  // the spilled message being replayed
  std::vector<size_t> read_sizes_;
  std::vector<std::span<const uint8_t>> read_frames_;
  std::vector<std::span<const uint8_t>> spans_;
};

template <typename Apply>
bool ResyncBuffer::ForEach(Apply&& apply, std::string* error) {
  for (const std::vector<zmq::message_t>& message : in_memory_) {
    spans_.clear();
    for (const zmq::message_t& f : message) spans_.emplace_back(static_cast<const uint8_t*>(f.data()), f.size());
    if (!apply(std::span<const std::span<const uint8_t>>(spans_))) return false;
  }
  if (spilled_messages_ == 0) return true;
  read_back_ = true;
  if (std::fflush(file_) != 0 || std::fseek(file_, 0, SEEK_SET) != 0) {
    *error = "cannot read back the resync spill file";
    return false;
  }
  for (size_t i = 0; i < spilled_messages_; ++i) {
    if (!ReadSpilled(error)) return false;
    if (!apply(std::span<const std::span<const uint8_t>>(read_frames_))) return false;
  }
  return true;
}

}  // namespace sci
