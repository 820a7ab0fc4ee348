// Gzip files written without zlib, for tests of readers that take .gz input. Needs nothing of
// the framework.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "support/files.h"

namespace zenith::testing {

// CRC-32 (IEEE 802.3), as gzip computes it.
inline uint32_t crc32_ieee(const std::string& bytes) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char b : bytes) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// A gzip file (RFC 1952) whose deflate stream uses stored blocks (RFC 1951, BTYPE 00): valid
// for any reader, written without zlib.
inline std::string gzip_stored(const std::string& bytes) {
  std::string out("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff", 10);
  size_t pos = 0;
  do {
    size_t n = std::min<size_t>(65535, bytes.size() - pos);
    bool last = pos + n == bytes.size();
    out.push_back(char(last ? 1 : 0));
    out.push_back(char(n & 0xff));
    out.push_back(char(n >> 8));
    out.push_back(char(~n & 0xff));
    out.push_back(char((~n >> 8) & 0xff));
    out.append(bytes, pos, n);
    pos += n;
  } while (pos < bytes.size());
  auto le32 = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(char(v >> (8 * i)));
  };
  le32(crc32_ieee(bytes));
  le32(uint32_t(bytes.size()));
  return out;
}

inline void write_gzip(const std::filesystem::path& path, const std::string& bytes) {
  write_bytes(path, gzip_stored(bytes));
}

}  // namespace zenith::testing
