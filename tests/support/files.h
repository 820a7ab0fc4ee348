// Whole files as bytes, for tests. Needs nothing of the framework.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace zenith::testing {

// The file's bytes; "" when it cannot be read.
inline std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Writes `bytes` to `path`, creating its parent directories.
inline void write_bytes(const std::string& path, const std::string& bytes) {
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

}  // namespace zenith::testing
