// The data dir is private (0700, files 0600 by the umask) and held by one server at a time.
#include "platform/jobs/data_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/temp_dir.h"

namespace zp = zenith::platform;
using zenith::testing::TempDir;

namespace {

unsigned mode_of(const std::string& path) {
  struct stat st;
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

// Restores the test process's umask.
struct UmaskGuard {
  mode_t old = ::umask(022);
  ~UmaskGuard() { ::umask(old); }
};

}  // namespace

TEST(PlatformDataDir, CreatedPrivateAndFilesInItToo) {
  UmaskGuard guard;
  TempDir dir("data_dir");
  const std::string data = dir / "data";
  zp::secure_data_dir(data);
  EXPECT_EQ(mode_of(data), 0700u);
  { std::ofstream(data + "/file") << "x"; }
  EXPECT_EQ(mode_of(data + "/file"), 0600u);
  std::filesystem::create_directories(data + "/sub");
  EXPECT_EQ(mode_of(data + "/sub"), 0700u);
  // An existing dir of ours that others could read is narrowed.
  const std::string wide = dir / "wide";
  std::filesystem::create_directories(wide);
  ::chmod(wide.c_str(), 0755);
  zp::secure_data_dir(wide);
  EXPECT_EQ(mode_of(wide), 0700u);
}

TEST(PlatformDataDir, NotADirectoryIsRefused) {
  UmaskGuard guard;
  TempDir dir("data_dir");
  { std::ofstream(dir / "file") << "x"; }
  EXPECT_THROW(zp::secure_data_dir(dir / "file"), std::runtime_error);
}

TEST(PlatformDataDir, SecondLockNamesTheHolder) {
  TempDir dir("data_dir");
  auto first = std::make_unique<zp::DataDirLock>(dir.str());
  try {
    zp::DataDirLock second(dir.str());
    FAIL() << "a second lock on one data dir was granted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("in use by another zenith server (pid " +
                                         std::to_string(::getpid()) + ")"),
              std::string::npos)
        << e.what();
  }
  first.reset();
  EXPECT_NO_THROW(zp::DataDirLock again(dir.str()));  // released with its holder
}
