// The server's data dir (DATA: token, TLS key, database, job dirs) is private to its user: made
// 0700 with a 077 umask, refused when another user owns it, and held by one server at a time.
#pragma once

#include <string>

namespace zenith::platform {

// Sets the umask to 077, creates `dir` (0700) or narrows an existing one of ours to 0700;
// throws when it is not a directory or belongs to another user (a /tmp path someone else made).
void secure_data_dir(const std::string& dir);

// An exclusive lock on DIR/server.lock for this process's lifetime, taken before anything in
// DIR is touched. A second server on the same dir fails at once, naming the pid that holds it.
class DataDirLock {
 public:
  explicit DataDirLock(const std::string& dir);
  ~DataDirLock();
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace zenith::platform
