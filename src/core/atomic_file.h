// Crash-safe file writes: data goes to a temporary file in the target's directory, which is
// fsynced and renamed over the target, then the directory is fsynced. A reader sees either the
// old file or the complete new one, never a half-written one.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace zenith::core {

class AtomicFile {
 public:
  // Creates "<dir>/.<name>.tmp.<pid>.<n>" with `mode` (before the umask); the target is
  // untouched until commit().
  explicit AtomicFile(std::string path, unsigned mode = 0644);
  ~AtomicFile();  // removes the temporary file unless committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t size);
  void write(std::string_view s) { write(s.data(), s.size()); }
  // fsync, rename over the target, fsync the directory.
  void commit();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

// Makes renames and removals in `dir` durable (ignored where the filesystem refuses).
void fsync_directory(const std::string& dir);

// Writes `contents` to `path` atomically (a new file gets `mode`, before the umask).
void write_file_atomic(const std::string& path, std::string_view contents, unsigned mode = 0644);

// Copies the file `from` to `to` atomically, in pieces (for large files).
void copy_file_atomic(const std::string& from, const std::string& to);

// The whole file as bytes; errors name the component and the path.
std::string read_file(const std::string& path, const char* component);

}  // namespace zenith::core
