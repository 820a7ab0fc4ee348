#include "platform/exec/log_tail.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <fstream>

namespace zenith::platform {

std::vector<std::string> tail_lines(const std::string& path, int n) {
  std::ifstream in(path, std::ios::binary);
  if (!in || n <= 0) return {};
  // Read at most the last 64 KiB: enough for a handful of lines, cheap on huge logs.
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  std::streamoff start = std::max<std::streamoff>(0, size - 65536);
  in.seekg(start);
  std::string line;
  std::deque<std::string> lines;
  if (start > 0) std::getline(in, line);  // skip a partial first line
  while (std::getline(in, line)) {
    lines.push_back(valid_utf8(line));
    if (static_cast<int>(lines.size()) > n) lines.pop_front();
  }
  return {lines.begin(), lines.end()};
}

bool looks_like_oom(const std::vector<std::string>& lines) {
  static const char* patterns[] = {
      "out of memory",  "Out of memory",          "OutOfMemory",        "MemoryError",
      "std::bad_alloc", "Cannot allocate memory", "CUDA out of memory", "OOM"};
  for (const auto& l : lines)
    for (const char* p : patterns)
      if (l.find(p) != std::string::npos) return true;
  return false;
}

std::string valid_utf8(std::string_view text) {
  static const char kReplacement[] = "\xEF\xBF\xBD";                      // U+FFFD
  static const std::uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};  // by sequence length
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    // Sequence length from the lead byte: 0xxxxxxx, 110xxxxx, 1110xxxx, 11110xxx; else invalid.
    const std::size_t n = lead < 0x80           ? 1
                          : (lead >> 5) == 0x6  ? 2
                          : (lead >> 4) == 0xE  ? 3
                          : (lead >> 3) == 0x1E ? 4
                                                : 0;
    bool ok = n > 0 && i + n <= text.size();
    std::uint32_t code = lead & (0x7F >> n);
    for (std::size_t k = 1; ok && k < n; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      ok = (next & 0xC0) == 0x80;
      code = (code << 6) | (next & 0x3F);
    }
    // No overlong forms, no UTF-16 surrogates, nothing past U+10FFFF.
    if (ok && n > 1)
      ok = code >= kSmallest[n] && code <= 0x10FFFF && (code < 0xD800 || code > 0xDFFF);
    if (ok) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      out += kReplacement;
      ++i;
    }
  }
  return out;
}

}  // namespace zenith::platform
