// UTF-8 helpers of the tokenizers: character boundaries, validation, lossy conversion of token
// bytes, and byte-level BPE's byte <-> character alphabet.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace zenith::text::detail {

// Length of the UTF-8 character starting at s[i] when s holds valid UTF-8.
inline size_t char_len(std::string_view s, size_t i) {
  auto c = uint8_t(s[i]);
  size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  return i + n <= s.size() ? n : s.size() - i;
}

// Length of the valid UTF-8 character at s[i]; 0 if the bytes there are invalid, -1 if they are
// a valid but incomplete start (s ends inside the character). `prefix_len` gets the number of
// bytes that form a valid prefix (the "maximal subpart" of an invalid sequence, at least 1).
int valid_char_len(std::string_view s, size_t i, size_t* prefix_len = nullptr);

// Byte offset of the first invalid UTF-8 byte in s, or npos.
size_t find_invalid_utf8(std::string_view s);

// Appends `bytes` to `out` with invalid sequences replaced by U+FFFD: one per maximal invalid
// subpart (Rust's String::from_utf8_lossy, WHATWG TextDecoder) or, with per_byte, one per byte
// (SentencePiece). Returns the number of bytes consumed: all of them when `final`, otherwise a
// valid but incomplete character at the end is left for the next call.
size_t append_lossy(std::string_view bytes, bool per_byte, bool final, std::string& out);

void append_code_point(uint32_t cp, std::string& out);
uint32_t decode_code_point(std::string_view s, size_t i);  // s[i..] holds a valid character

// GPT-2's byte-level alphabet: each byte as a printable character ("Ġ" for the space).
struct ByteAlphabet {
  std::array<std::string, 256> char_of_byte;
  std::array<int16_t, 324> byte_of_code_point;  // -1 where a code point is not in the alphabet
};
const ByteAlphabet& byte_alphabet();

}  // namespace zenith::text::detail
