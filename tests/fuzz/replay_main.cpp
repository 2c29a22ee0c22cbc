// Replays fuzzer inputs without libFuzzer: each argument is a file or a
// directory of files, fed one by one to LLVMFuzzerTestOneInput. This is how
// the committed corpus and every crash reproducer run in CI, built with the
// normal compiler (and under the ASan/UBSan build of the test suite).
// A missing directory is skipped (a harness may have no reproducer yet);
// finding no input at all fails, so a moved corpus is noticed.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void Replay(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // A copy of exactly the input's size, so ASan sees a read past its end.
  LLVMFuzzerTestOneInput(bytes.empty() ? nullptr : bytes.data(), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  size_t replayed = 0;
  for (int a = 1; a < argc; ++a) {
    const std::filesystem::path arg(argv[a]);
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(arg)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        if (entry.is_regular_file() && entry.path().filename().string()[0] != '.') files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
    } else if (std::filesystem::is_regular_file(arg)) {
      files.push_back(arg);
    } else {
      std::printf("skipped %s (not there)\n", argv[a]);
      continue;
    }
    for (const auto& file : files) {
      Replay(file);
      ++replayed;
    }
    std::printf("%s: %zu inputs\n", argv[a], files.size());
  }
  std::printf("replayed %zu inputs, every invariant held\n", replayed);
  return replayed == 0 ? 1 : 0;
}
