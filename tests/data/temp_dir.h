// A per-test temporary directory, removed afterwards, and small file helpers.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace zenith::testing {

class TempDir {
 public:
  TempDir() {
    auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("zenith_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" +
             std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

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

inline void write_gzip(const std::string& path, const std::string& bytes) {
  write_bytes(path, gzip_stored(bytes));
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

}  // namespace zenith::testing
