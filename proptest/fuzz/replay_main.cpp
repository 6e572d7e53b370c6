// Runs a fuzz target's LLVMFuzzerTestOneInput once on each file given, or on each file of each
// directory given: the seed corpus and the past findings (fuzz/regressions/) replayed as an
// ordinary test, without libFuzzer. A finding aborts, which fails the test and names the file last
// printed. A path that does not exist, or nothing to replay at all, is an error too, so that a
// misplaced corpus cannot pass unnoticed.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

/// The files to replay: the path itself, or the regular files in it, in name order.
std::vector<fs::path> inputs(const fs::path& path) {
  if (!fs::is_directory(path)) return {path};
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(path)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::uint8_t> contents(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: " << argv[0] << " FILE_OR_DIRECTORY...\n";
    return 2;
  }
  std::size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path path = argv[i];
    if (!fs::exists(path)) {
      std::cerr << path.string() << ": no such file or directory\n";
      return 2;
    }
    for (const fs::path& file : inputs(path)) {
      std::cout << file.string() << std::endl;  // flushed: a finding aborts right after
      const std::vector<std::uint8_t> bytes = contents(file);
      LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
      ++replayed;
    }
  }
  if (replayed == 0) {
    std::cerr << "nothing to replay\n";
    return 2;
  }
  std::cout << "replayed " << replayed << " inputs, no finding\n";
  return 0;
}
