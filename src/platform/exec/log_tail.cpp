#include "platform/exec/log_tail.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <deque>
#include <fstream>

#include "platform/jobs/quantity.h"

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

namespace {

// The last line that looks like an out-of-memory failure, or nullptr.
const std::string* oom_line(const std::vector<std::string>& lines) {
  static const char* patterns[] = {
      "out of memory",   "Out of memory",          "OutOfMemory",        "MemoryError",
      "std::bad_alloc",  "Cannot allocate memory", "CUDA out of memory", "OOM",
      "memory exhausted"};
  for (auto l = lines.rbegin(); l != lines.rend(); ++l)
    for (const char* p : patterns)
      if (l->find(p) != std::string::npos) return &*l;
  return nullptr;
}

}  // namespace

bool looks_like_oom(const std::vector<std::string>& lines) { return oom_line(lines) != nullptr; }

std::string oom_reason(std::int64_t memory_bytes, const std::vector<std::string>& lines) {
  std::string s = ": out of memory";
  if (memory_bytes > 0) s += " (limit " + format_size(memory_bytes) + " per rank)";
  const std::string* line = oom_line(lines);
  if (!line) return s;
  // The rank's own words (what it was allocating, what it held), without the log's timestamp.
  std::string_view said = *line;
  if (const auto space = said.find(' '); space != std::string_view::npos && space > 0 &&
                                         std::isdigit(static_cast<unsigned char>(said[0])))
    said.remove_prefix(space + 1);
  constexpr std::size_t kMost = 300;
  return s + ": " + std::string(said.substr(0, kMost)) + (said.size() > kMost ? "..." : "");
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
