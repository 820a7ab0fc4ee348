// Whole files as bytes or JSON, for tests that write, cut or inspect files. Needs nothing of the
// framework.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

namespace zenith::testing {

// The file's bytes; "" when it cannot be read.
inline std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
inline std::string read_bytes(const std::filesystem::path& path) { return read_all(path); }

// Writes `bytes` to `path`, creating its parent directories.
inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  const auto parent = path.parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

inline nlohmann::json read_json(const std::filesystem::path& path) {
  return nlohmann::json::parse(read_all(path));
}

}  // namespace zenith::testing
