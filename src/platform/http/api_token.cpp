#include "platform/http/api_token.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>

#include "core/atomic_file.h"

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
  // Written beside and renamed: never seen half-written or with a wider mode.
  core::write_file_atomic(path, token + "\n", 0600);
  return token;
}

bool token_equals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace zenith::platform
