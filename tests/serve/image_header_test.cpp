// An image's size from its header, before decoding: what /classify checks against its pixel
// limit (a small PNG can declare and inflate to billions of pixels).
#include "serve/image_header.h"

#include <gtest/gtest.h>

#include "data/image_codec.h"
#include "zenith/tensor.h"

using namespace zenith;

TEST(ImageHeader, PngAndJpegSizesWithoutDecoding) {
  Tensor image = Tensor::zeros({30, 50, 3}, DType::u8);  // 30 high, 50 wide
  for (const std::string& bytes : {vision::encode_png(image), vision::encode_jpeg(image)}) {
    auto size = serve::image_size(bytes);
    ASSERT_TRUE(size);
    EXPECT_EQ(size->width, 50);
    EXPECT_EQ(size->height, 30);
  }
  // A PNG header alone (no pixel data) still says what it would inflate to.
  std::string png = vision::encode_png(image).substr(0, 24);
  png[16] = png[17] = '\0', png[18] = char(0x4e), png[19] = char(0x20);  // width 20000
  png[20] = png[21] = '\0', png[22] = char(0x4e), png[23] = char(0x20);  // height 20000
  auto size = serve::image_size(png);
  ASSERT_TRUE(size);
  EXPECT_EQ(size->width * size->height, 400000000);
}

TEST(ImageHeader, TruncatedOrForeignBytesHaveNoSize) {
  const std::string jpeg = vision::encode_jpeg(Tensor::zeros({8, 8, 3}, DType::u8));
  EXPECT_FALSE(serve::image_size(""));
  EXPECT_FALSE(serve::image_size("GIF89a......"));
  EXPECT_FALSE(
      serve::image_size(vision::encode_png(Tensor::zeros({8, 8, 3}, DType::u8)).substr(0, 20)));
  EXPECT_FALSE(serve::image_size(jpeg.substr(0, 6)));
  EXPECT_FALSE(serve::image_size(std::string("\xFF\xD8\xFF\xE0\x00\x01", 6)));  // length < 2
}
