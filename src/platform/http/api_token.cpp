#include "platform/http/api_token.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>

namespace zenith::platform {

std::string read_token(const std::string& data_dir) {
  std::ifstream in(data_dir + "/token");
  std::string token;
  std::getline(in, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  return token;
}

std::string load_or_create_token(const std::string& data_dir) {
  const std::string path = data_dir + "/token";
  std::string existing = read_token(data_dir);
  if (!existing.empty()) {
    chmod(path.c_str(), 0600);
    return existing;
  }
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("[token] RAND_bytes failed");
  static const char* hex = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) token += hex[b >> 4], token += hex[b & 15];
  // Write beside, then rename: the token file is never seen half-written or with wider mode.
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("[token] cannot write " + tmp);
  fchmod(fd, 0600);
  std::string line = token + "\n";
  bool ok = write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ok = fsync(fd) == 0 && ok;
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error("[token] cannot write " + path);
  return token;
}

bool token_equals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace zenith::platform
