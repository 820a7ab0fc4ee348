// Whole-file reads for dataset sources, gzip-compressed or not (zlib detects which).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zenith::dataset::detail {

// The file's (decompressed) bytes; errors start with [component] and name the path.
std::string read_maybe_gzip(const std::string& path, const char* component);

// Fails unless `dir` is a directory; `hint` (may be empty) says where to get it.
void require_directory(const std::string& dir, const char* component, const std::string& hint);

// The first of `dir`/name for each of `names` that exists; fails listing all tried.
std::string find_file(const std::string& dir, const std::vector<std::string>& names,
                      const char* component);

// Big-endian 32-bit integer at `p`.
inline uint32_t read_be32(const unsigned char* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

}  // namespace zenith::dataset::detail
