#include "platform/jobs/data_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace zenith::platform {

void secure_data_dir(const std::string& dir) {
  ::umask(077);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    throw std::runtime_error("[server] cannot create the data dir " + dir + ": " +
                             std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) throw std::runtime_error("[server] " + dir + " is not a directory");
  if (st.st_uid != ::geteuid())
    throw std::runtime_error("[server] the data dir " + dir + " belongs to uid " +
                             std::to_string(st.st_uid) + ", not to this user (uid " +
                             std::to_string(::geteuid()) +
                             "): refusing to keep tokens and keys there; pass --data DIR");
  if ((st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0)
    throw std::runtime_error("[server] cannot make " + dir + " private (chmod 0700)");
}

DataDirLock::DataDirLock(const std::string& dir) {
  const std::string path = dir + "/server.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0)
    throw std::runtime_error("[server] cannot open " + path + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = "";
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    ::close(fd_);
    fd_ = -1;
    const long pid = n > 0 ? std::atol(buf) : 0;
    throw std::runtime_error("[server] the data dir " + dir +
                             " is in use by another zenith server" +
                             (pid > 0 ? " (pid " + std::to_string(pid) + ")" : "") +
                             "; stop it first or pass another --data");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    // The lock holds either way; the pid is only for the message above.
  }
}

DataDirLock::~DataDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace zenith::platform
