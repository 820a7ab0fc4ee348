// A fresh directory under the system temp dir, removed with everything in it on scope exit.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace zenith::testing {

struct TempDir {
  std::filesystem::path path;
  // temp/zenith_<tag>_<pid>, emptied if it exists.
  explicit TempDir(const std::string& tag) {
    path =
        std::filesystem::temp_directory_path() / ("zenith_" + tag + "_" + std::to_string(getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string str() const { return path.string(); }
};

}  // namespace zenith::testing
