// ImageFolderDataset with PNG and JPEG files written by the codec, and JSON lines.
#include <gtest/gtest.h>

#include "data/image_codec.h"
#include "support/files.h"
#include "support/op_check.h"
#include "support/temp_dir.h"
#include "zenith/data.h"

namespace zt = zenith::testing;
using zenith::DType;
using zenith::Tensor;

namespace {

Tensor gradient_image(int64_t h, int64_t w, int64_t c, int seed) {
  Tensor t = Tensor::empty({h, w, c}, DType::u8);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<uint8_t>()[i] = uint8_t((i * 7 + seed) % 256);
  return t;
}

TEST(ImageCodec, PngRoundTripIsExactJpegIsClose) {
  Tensor rgb = gradient_image(6, 5, 3, 1);
  Tensor back = zenith::vision::decode_image(zenith::vision::encode_png(rgb), "x.png");
  EXPECT_EQ(back.shape(), rgb.shape());
  EXPECT_TRUE(zt::all_close(back.to(DType::f64), rgb.to(DType::f64), 0, 0));
  Tensor gray = gradient_image(4, 4, 1, 3);
  Tensor g = zenith::vision::decode_image(zenith::vision::encode_png(gray), "g.png", 0);
  EXPECT_EQ(g.shape(), (zenith::Shape{4, 4, 1}));
  Tensor flat = Tensor::full({16, 16, 3}, 120, DType::u8);
  Tensor j = zenith::vision::decode_image(zenith::vision::encode_jpeg(flat), "x.jpg");
  EXPECT_EQ(j.shape(), flat.shape());
  EXPECT_TRUE(zt::all_close(j.to(DType::f64), flat.to(DType::f64), 0, 3));
  EXPECT_TRUE(zt::throws_with([] { zenith::vision::decode_image("GIF89a....", "a.gif"); },
                              "a.gif: neither PNG nor JPEG"));
  std::string png = zenith::vision::encode_png(rgb);
  EXPECT_TRUE(zt::throws_with(
      [&] { zenith::vision::decode_image(png.substr(0, png.size() / 2), "cut.png"); },
      "cut.png: bad PNG"));
  std::string jpg = zenith::vision::encode_jpeg(flat);
  jpg[200] ^= 0x5a;
  jpg.resize(300);
  // libjpeg may recover from a damaged body with a warning; it must not crash either way.
  try {
    zenith::vision::decode_image(jpg, "cut.jpg");
  } catch (const zenith::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cut.jpg"), std::string::npos);
  }
}

TEST(ImageFolder, ClassesAreSortedSubFolders) {
  zt::TempDir dir;
  zt::write_bytes(dir / "cat/1.png", zenith::vision::encode_png(gradient_image(8, 8, 3, 1)));
  zt::write_bytes(dir / "cat/2.JPG", zenith::vision::encode_jpeg(gradient_image(8, 8, 3, 2)));
  zt::write_bytes(dir / "ant/a.png", zenith::vision::encode_png(gradient_image(8, 8, 1, 3)));
  zt::write_bytes(dir / "ant/notes.txt", "not an image");
  auto ds = zenith::dataset::ImageFolderDataset(dir.str());
  ASSERT_EQ(ds.get_dataset_size(), 3);
  EXPECT_EQ(ds.get(0)[1].item(), 0);                          // ant
  EXPECT_EQ(ds.get(0)[0].shape(), (zenith::Shape{8, 8, 3}));  // gray decoded as RGB
  EXPECT_EQ(ds.get(1)[1].item(), 1);
  EXPECT_EQ(ds.get(2)[1].item(), 1);
  auto gray = zenith::dataset::ImageFolderDataset(dir.str(), 1);
  EXPECT_EQ(gray.get(1)[0].shape(), (zenith::Shape{8, 8, 1}));
  auto batch = ds.batch(3).get(0);
  EXPECT_EQ(batch[0].shape(), (zenith::Shape{3, 8, 8, 3}));

  zt::write_bytes(dir / "dog/broken.png", "\x89PNG\r\n\x1a\n garbage");
  auto broken = zenith::dataset::ImageFolderDataset(dir.str());
  EXPECT_TRUE(zt::throws_with([&] { broken.get(3); }, dir / "dog/broken.png" + ": bad PNG"));
  // The error surfaces from the iterator at the failing item.
  auto it = broken.create_iterator(0, 2);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(it.next());
  EXPECT_TRUE(zt::throws_with([&] { it.next(); }, "broken.png"));
}

TEST(ImageFolder, MixedSizesFailAtBatchWithAClearMessage) {
  zt::TempDir dir;
  zt::write_bytes(dir / "a/1.png", zenith::vision::encode_png(gradient_image(8, 8, 3, 1)));
  zt::write_bytes(dir / "a/2.png", zenith::vision::encode_png(gradient_image(9, 8, 3, 1)));
  auto ds = zenith::dataset::ImageFolderDataset(dir.str());
  EXPECT_TRUE(zt::throws_with([&] { ds.batch(2).get(0); }, "resize images to one size"));
  auto resized = ds.map({zenith::vision::Resize({8, 8})}).batch(2).get(0);
  EXPECT_EQ(resized[0].shape(), (zenith::Shape{2, 8, 8, 3}));
  EXPECT_TRUE(zt::throws_with([&] { zenith::dataset::ImageFolderDataset(dir / "a"); },
                              "no class sub-folders"));
}

TEST(JsonLines, ColumnsFromKeys) {
  zt::TempDir dir;
  zt::write_bytes(dir / "d.jsonl",
                  "{\"x\": [1.5, 2], \"y\": 1}\n\n{\"x\": [3, 4], \"y\": 0, \"z\": \"ignored\"}\n");
  auto ds = zenith::dataset::JsonLinesDataset(dir / "d.jsonl", {"x", "y"});
  ASSERT_EQ(ds.get_dataset_size(), 2);
  auto b = ds.batch(2).get(0);
  EXPECT_EQ(b[0].dtype(), DType::f32);
  EXPECT_EQ(b[0].shape(), (zenith::Shape{2, 2}));
  EXPECT_EQ(b[1].dtype(), DType::i64);
  EXPECT_EQ(b[1].to_int_vector(), (std::vector<int64_t>{1, 0}));
  zt::write_bytes(dir / "bad.jsonl", "{\"x\": 1, \"y\": 2}\n{\"x\": [1, \"y\": 2}\n");
  EXPECT_TRUE(zt::throws_with([&] { zenith::dataset::JsonLinesDataset(dir / "bad.jsonl", {"x"}); },
                              "bad.jsonl:2 (offset 17): invalid JSON"));
  zt::write_bytes(dir / "miss.jsonl", "{\"x\": 1}\n");
  EXPECT_TRUE(zt::throws_with(
      [&] {
        zenith::dataset::JsonLinesDataset(dir / "miss.jsonl", {"x", "y"});
      },
      "miss.jsonl:1 (offset 0): missing key 'y'"));
  zt::write_bytes(dir / "ragged.jsonl", "{\"x\": [[1, 2], [3]]}\n");
  EXPECT_TRUE(zt::throws_with(
      [&] { zenith::dataset::JsonLinesDataset(dir / "ragged.jsonl", {"x"}); }, "ragged"));
}

}  // namespace
