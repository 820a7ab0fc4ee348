// An image's size from its header, before any decoding: a small PNG or JPEG can declare (and
// inflate to) billions of pixels, so /classify checks the pixel count first.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace zenith::serve {

struct ImageSize {
  int64_t width = 0;
  int64_t height = 0;
};

// Width and height from a PNG's IHDR chunk or a JPEG's start-of-frame segment; nullopt when the
// bytes are neither or the header is cut short.
std::optional<ImageSize> image_size(std::string_view bytes);

}  // namespace zenith::serve
