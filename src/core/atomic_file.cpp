#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "zenith/error.h"

namespace zenith::core {

namespace {
std::string errno_text() { return std::strerror(errno); }
}  // namespace

void fsync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // some filesystems do not allow it; the rename already happened
  ::fsync(fd);
  ::close(fd);
}

AtomicFile::AtomicFile(std::string path, unsigned mode) : path_(std::move(path)) {
  static std::atomic<uint64_t> counter{0};
  std::filesystem::path target(path_);
  std::filesystem::path dir = target.parent_path().empty() ? "." : target.parent_path();
  temp_path_ = (dir / ("." + target.filename().string() + ".tmp." + std::to_string(::getpid()) +
                       "." + std::to_string(counter++)))
                   .string();
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode_t(mode));
  ZENITH_CHECK(fd_ >= 0, "[io] ", path_, ": cannot create temporary file ", temp_path_, ": ",
               errno_text());
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_path_.c_str());
}

void AtomicFile::write(const void* data, size_t size) {
  ZENITH_CHECK(fd_ >= 0 && !committed_, "[io] ", path_, ": write after commit");
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    ZENITH_CHECK(n > 0, "[io] ", path_, ": write failed: ", errno_text());
    p += n;
    size -= size_t(n);
  }
}

void AtomicFile::commit() {
  ZENITH_CHECK(fd_ >= 0 && !committed_, "[io] ", path_, ": commit twice");
  ZENITH_CHECK(::fsync(fd_) == 0, "[io] ", path_, ": fsync failed: ", errno_text());
  int rc = ::close(fd_);
  fd_ = -1;
  ZENITH_CHECK(rc == 0, "[io] ", path_, ": close failed: ", errno_text());
  ZENITH_CHECK(::rename(temp_path_.c_str(), path_.c_str()) == 0, "[io] ", path_, ": rename from ",
               temp_path_, " failed: ", errno_text());
  committed_ = true;
  std::filesystem::path dir = std::filesystem::path(path_).parent_path();
  fsync_directory(dir.empty() ? "." : dir.string());
}

void write_file_atomic(const std::string& path, std::string_view contents, unsigned mode) {
  AtomicFile f(path, mode);
  f.write(contents);
  f.commit();
}

void copy_file_atomic(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  ZENITH_CHECK(in, "[io] ", from, ": cannot open: ", errno_text());
  AtomicFile out(to);
  std::string piece(1 << 20, '\0');
  while (in) {
    in.read(piece.data(), static_cast<std::streamsize>(piece.size()));
    if (in.gcount() > 0) out.write(piece.data(), static_cast<size_t>(in.gcount()));
  }
  ZENITH_CHECK(!in.bad(), "[io] ", from, ": read failed");
  out.commit();
}

std::string read_file(const std::string& path, const char* component) {
  std::ifstream in(path, std::ios::binary);
  ZENITH_CHECK(in, "[", component, "] ", path, ": cannot open: ", errno_text());
  std::ostringstream os;
  os << in.rdbuf();
  ZENITH_CHECK(!in.bad(), "[", component, "] ", path, ": read failed");
  return os.str();
}

}  // namespace zenith::core
