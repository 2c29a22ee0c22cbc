// Loads the golden captures of the real Mooncake publisher
// (testdata/mooncake-publisher/<name>/msgNNNN.frameK.bin + expected.jsonl).
// Standard library only, so C-API tests can use it too.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

namespace sci_test {

inline std::string CaptureDir(const std::string& capture) { return std::string(SCI_TESTDATA_DIR) + "/" + capture; }

struct GoldenMessage {
  std::string name;                 // "msg0003"
  std::array<std::string, 3> frames;

  std::array<std::span<const uint8_t>, 3> FrameSpans() const {
    std::array<std::span<const uint8_t>, 3> spans;
    for (size_t k = 0; k < frames.size(); ++k) {
      spans[k] = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(frames[k].data()), frames[k].size());
    }
    return spans;
  }
};

inline bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

// Every message of a capture, in order (msg0000, msg0001, ... until the
// first missing file). Empty if the capture is not there.
inline std::vector<GoldenMessage> LoadCapture(const std::string& capture) {
  std::vector<GoldenMessage> messages;
  for (int i = 0;; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "msg%04d", i);
    GoldenMessage message;
    message.name = name;
    bool complete = true;
    for (int k = 0; k < 3 && complete; ++k) {
      complete = ReadFile(CaptureDir(capture) + "/" + name + ".frame" + std::to_string(k) + ".bin",
                          &message.frames[k]);
    }
    if (!complete) break;
    messages.push_back(std::move(message));
  }
  return messages;
}

// expected.jsonl, one JSON text per message.
inline std::vector<std::string> LoadExpectedLines(const std::string& capture) {
  std::vector<std::string> lines;
  std::ifstream in(CaptureDir(capture) + "/expected.jsonl");
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// A capture's name as a test name: GoogleTest allows letters, digits and '_'.
inline std::string CaptureTestName(const char* capture) {
  std::string name = capture;
  for (char& c : name) c = c == '-' ? '_' : c;
  return name;
}

inline const std::array<const char*, 4> kCaptures = {"basic", "burst", "overflow", "displaced-gap"};

}  // namespace sci_test
