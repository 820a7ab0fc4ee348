#include "serve/image_header.h"

namespace zenith::serve {

namespace {

uint32_t be(std::string_view b, size_t at, int n) {
  uint32_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(b[at + size_t(i)]);
  return v;
}

}  // namespace

std::optional<ImageSize> image_size(std::string_view b) {
  // PNG: signature, then IHDR (length 13): width and height as big-endian 32-bit numbers.
  if (b.size() >= 24 && b.substr(0, 8) == std::string_view("\x89PNG\r\n\x1a\n", 8) &&
      b.substr(12, 4) == "IHDR")
    return ImageSize{be(b, 16, 4), be(b, 20, 4)};
  // JPEG: SOI, then segments FF xx [length] until a start-of-frame (SOF0..SOF15 but DHT C4,
  // JPG C8 and DAC CC): precision, height, width.
  if (b.size() < 4 || be(b, 0, 2) != 0xFFD8) return std::nullopt;
  size_t at = 2;
  while (at + 4 <= b.size()) {
    if (static_cast<unsigned char>(b[at]) != 0xFF) return std::nullopt;
    const unsigned marker = static_cast<unsigned char>(b[at + 1]);
    if (marker == 0xFF) {  // fill byte
      ++at;
      continue;
    }
    if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {  // no length
      at += 2;
      continue;
    }
    if (marker == 0xD9 || marker == 0xDA) return std::nullopt;  // end, or scan before a frame
    const uint32_t length = be(b, at + 2, 2);
    if (length < 2) return std::nullopt;
    const bool sof =
        marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
    if (sof) {
      if (at + 9 > b.size()) return std::nullopt;
      return ImageSize{be(b, at + 7, 2), be(b, at + 5, 2)};
    }
    at += 2 + length;
  }
  return std::nullopt;
}

}  // namespace zenith::serve
