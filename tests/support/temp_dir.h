// A fresh directory temp/zenith_<tag>_XXXXXX, unique across tests and processes (mkdtemp),
// removed with everything in it on scope exit. Needs nothing of the framework (the platform
// tests use it too).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

namespace zenith::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& tag = "test") {
    namespace fs = std::filesystem;
    std::string name = (fs::temp_directory_path() / ("zenith_" + tag + "_XXXXXX")).string();
    if (!::mkdtemp(name.data())) throw std::runtime_error("[test] cannot create " + name);
    path_ = name;
    // mkdtemp makes it 0700; give it the mode create_directories would (processes a test
    // starts under another user, such as Slurm's, may need to read it).
    fs::permissions(path_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                               fs::perms::others_read | fs::perms::others_exec);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  // The path of `name` inside the directory.
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace zenith::testing
