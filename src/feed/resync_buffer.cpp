#include "feed/resync_buffer.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

#include "common/format.h"

namespace sci {
namespace {

// Bytes a message held in memory costs beyond its frames (vectors, message_t).
constexpr size_t kInMemoryOverheadBytes = 256;
// The write buffer of the spill file: sequential writes in large pieces.
constexpr size_t kSpillWriteBuffer = size_t{1} << 20;

// A spilled message: its frame count, then each frame's size and bytes,
// sizes as 8 native-endian bytes (the file is read back by this process).
bool WriteAll(std::FILE* file, const void* data, size_t n) { return std::fwrite(data, 1, n, file) == n; }
bool ReadAll(std::FILE* file, void* data, size_t n) { return std::fread(data, 1, n, file) == n; }

}  // namespace

size_t ResyncBuffer::CostOf(std::span<const zmq::message_t> frames) {
  size_t bytes = kInMemoryOverheadBytes;
  for (const zmq::message_t& f : frames) bytes += f.size();
  return bytes;
}

bool ResyncBuffer::Add(std::span<zmq::message_t> frames, std::string* error) {
  const size_t cost = CostOf(frames);
  // Once a message is spilled, every later one is too: the replay reads
  // memory first, then the file, and the order must be the stream's.
  if (spilled_messages_ == 0 && memory_bytes_ + cost <= limits_.memory_bytes) {
    std::vector<zmq::message_t> message;
    message.reserve(frames.size());
    for (zmq::message_t& f : frames) message.push_back(std::move(f));
    in_memory_.push_back(std::move(message));
    memory_bytes_ += cost;
    ++messages_;
    return true;
  }
  if (spilled_bytes_ + cost > limits_.spill_bytes) {
    *error = limits_.spill_bytes == 0
                 ? sci::StrFormat("buffer of %d bytes full", limits_.memory_bytes)
                 : sci::StrFormat("buffer of %d bytes and spill file of %d bytes full", limits_.memory_bytes,
                                   limits_.spill_bytes);
    return false;
  }
  if (!Spill(frames, error)) return false;
  spilled_bytes_ += cost;
  ++spilled_messages_;
  ++messages_;
  return true;
}

bool ResyncBuffer::Spill(std::span<const zmq::message_t> frames, std::string* error) {
  if (file_ == nullptr) {
    std::string dir = limits_.spill_dir;
    if (dir.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      dir = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
    }
    std::string path = dir + "/sci-resync-XXXXXX";
    const int fd = ::mkstemp(path.data());
    if (fd < 0) {
      *error = sci::StrFormat("cannot create a spill file in %s: %s", dir, std::strerror(errno));
      return false;
    }
    ::unlink(path.c_str());  // gone with its last descriptor, whatever happens
    file_ = ::fdopen(fd, "w+b");
    if (file_ == nullptr) {
      *error = sci::StrFormat("cannot open the spill file: %s", std::strerror(errno));
      ::close(fd);
      return false;
    }
    std::setvbuf(file_, nullptr, _IOFBF, kSpillWriteBuffer);
  } else if (read_back_) {
    // Appending after a replay read the file (a buffer kept for the next
    // download): back to its end first.
    if (std::fseek(file_, 0, SEEK_END) != 0) {
      *error = sci::StrFormat("cannot append to the spill file: %s", std::strerror(errno));
      return false;
    }
    read_back_ = false;
  }
  const long start = std::ftell(file_);
  const uint64_t n = frames.size();
  bool ok = WriteAll(file_, &n, sizeof n);
  for (const zmq::message_t& f : frames) {
    const uint64_t size = f.size();
    ok = ok && WriteAll(file_, &size, sizeof size) && WriteAll(file_, f.data(), f.size());
  }
  if (!ok) {
    *error = sci::StrFormat("cannot write the spill file: %s", std::strerror(errno));
    // Back to the end of the last whole message: the file stays readable.
    std::clearerr(file_);
    if (start >= 0) (void)std::fseek(file_, start, SEEK_SET);
    return false;
  }
  return true;
}

bool ResyncBuffer::ReadSpilled(std::string* error) {
  uint64_t n = 0;
  if (!ReadAll(file_, &n, sizeof n) || n > 64) {
    *error = "cannot read back the resync spill file";
    return false;
  }
  // Every frame into one byte array, then the spans into it (the array
  // may move while it grows).
  read_bytes_.clear();
  std::vector<size_t>& sizes = read_sizes_;
  sizes.clear();
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t size = 0;
    if (!ReadAll(file_, &size, sizeof size) || size > limits_.spill_bytes) {
      *error = "cannot read back the resync spill file";
      return false;
    }
    const size_t at = read_bytes_.size();
    read_bytes_.resize(at + size);
    if (size > 0 && !ReadAll(file_, read_bytes_.data() + at, size)) {
      *error = "cannot read back the resync spill file";
      return false;
    }
    sizes.push_back(size);
  }
  read_frames_.clear();
  size_t at = 0;
  for (size_t size : sizes) {
    read_frames_.emplace_back(read_bytes_.data() + at, size);
    at += size;
  }
  return true;
}

void ResyncBuffer::Clear() {
  in_memory_.clear();
  messages_ = 0;
  memory_bytes_ = 0;
  spilled_bytes_ = 0;
  spilled_messages_ = 0;
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  read_back_ = false;
}

}  // namespace sci
