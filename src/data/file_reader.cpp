#include "data/file_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "zenith/error.h"

namespace zenith::dataset::detail {

std::string read_maybe_gzip(const std::string& path, const char* component) {
  ZENITH_CHECK(std::filesystem::is_regular_file(path), "[", component, "] ", path,
               ": no such file");
  std::unique_ptr<gzFile_s, int (*)(gzFile)> f(gzopen(path.c_str(), "rb"), gzclose);
  ZENITH_CHECK(f, "[", component, "] ", path, ": cannot open: ", std::strerror(errno));
  gzbuffer(f.get(), 1 << 17);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    int n = gzread(f.get(), buf, sizeof(buf));
    if (n < 0) {
      int code = 0;
      const char* msg = gzerror(f.get(), &code);
      ZENITH_FAIL("[", component, "] ", path, ": corrupt or truncated after ", out.size(),
                  " uncompressed bytes: ", msg,
                  code == Z_BUF_ERROR ? " (truncated gzip file)" : "");
    }
    if (n == 0) break;
    out.append(buf, size_t(n));
  }
  int code = 0;
  const char* msg = gzerror(f.get(), &code);
  ZENITH_CHECK(code == Z_OK, "[", component, "] ", path,
               ": corrupt or truncated gzip stream after ", out.size(),
               " uncompressed bytes: ", msg);
  return out;
}

void require_directory(const std::string& dir, const char* component, const std::string& hint) {
  if (std::filesystem::is_directory(dir)) return;
  ZENITH_FAIL("[", component, "] ", dir, ": no such directory", hint.empty() ? "" : " (", hint,
              hint.empty() ? "" : ")");
}

std::string find_file(const std::string& dir, const std::vector<std::string>& names,
                      const char* component) {
  std::string tried;
  for (const auto& n : names) {
    std::string p = (std::filesystem::path(dir) / n).string();
    if (std::filesystem::is_regular_file(p)) return p;
    tried += (tried.empty() ? "" : ", ") + n;
  }
  ZENITH_FAIL("[", component, "] ", dir, ": missing file (looked for ", tried, ")");
}

}  // namespace zenith::dataset::detail
