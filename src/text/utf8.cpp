#include "text/utf8.h"

namespace zenith::text::detail {

int valid_char_len(std::string_view s, size_t i, size_t* prefix_len) {
  auto byte = [&](size_t k) { return uint8_t(s[i + k]); };
  uint8_t c = byte(0);
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;  // the second byte's range (Unicode table 3-7)
  if (c < 0x80) {
    need = 1;
  } else if (c >= 0xC2 && c <= 0xDF) {
    need = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    if (prefix_len) *prefix_len = 1;
    return 0;
  }
  size_t k = 1;
  for (; k < need; ++k) {
    if (i + k >= s.size()) {
      if (prefix_len) *prefix_len = k;
      return -1;
    }
    uint8_t b = byte(k);
    bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) {
      if (prefix_len) *prefix_len = k;
      return 0;
    }
  }
  if (prefix_len) *prefix_len = need;
  return int(need);
}

size_t find_invalid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (uint8_t(s[i]) < 0x80) {
      ++i;
      continue;
    }
    int n = valid_char_len(s, i);
    if (n <= 0) return i;
    i += size_t(n);
  }
  return std::string_view::npos;
}

size_t append_lossy(std::string_view bytes, bool per_byte, bool final, std::string& out) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  size_t i = 0;
  while (i < bytes.size()) {
    size_t start = i;
    while (i < bytes.size() && uint8_t(bytes[i]) < 0x80) ++i;  // ASCII runs
    out.append(bytes.substr(start, i - start));
    if (i == bytes.size()) break;
    size_t prefix = 0;
    int n = valid_char_len(bytes, i, &prefix);
    if (n > 0) {
      out.append(bytes.substr(i, size_t(n)));
      i += size_t(n);
    } else if (n < 0 && !final) {
      return i;  // wait for the rest of the character
    } else {
      out.append(kReplacement);
      i += per_byte ? 1 : prefix;
    }
  }
  return bytes.size();
}

void append_code_point(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

uint32_t decode_code_point(std::string_view s, size_t i) {
  auto c = uint8_t(s[i]);
  size_t n = char_len(s, i);
  uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (uint8_t(s[i + k]) & 0x3F);
  return cp;
}

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet alphabet = [] {
    ByteAlphabet a;
    a.byte_of_code_point.fill(-1);
    // Printable Latin-1 bytes stand for themselves; the others take code points from 256 up.
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      int cp = printable(b) ? b : next++;
      append_code_point(uint32_t(cp), a.char_of_byte[size_t(b)]);
      a.byte_of_code_point[size_t(cp)] = int16_t(b);
    }
    return a;
  }();
  return alphabet;
}

}  // namespace zenith::text::detail
