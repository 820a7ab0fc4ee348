#include "data/image_codec.h"

#include <jpeglib.h>
#include <png.h>

#include <csetjmp>
#include <cstring>
#include <memory>

#include "zenith/error.h"

namespace zenith::vision {

namespace {

bool is_png(const std::string& b) {
  return b.size() >= 8 && png_sig_cmp(reinterpret_cast<png_const_bytep>(b.data()), 0, 8) == 0;
}
bool is_jpeg(const std::string& b) {
  return b.size() >= 3 && uint8_t(b[0]) == 0xff && uint8_t(b[1]) == 0xd8 && uint8_t(b[2]) == 0xff;
}

Tensor decode_png(const std::string& bytes, const std::string& name, int channels) {
  png_image img;
  std::memset(&img, 0, sizeof(img));
  img.version = PNG_IMAGE_VERSION;
  ZENITH_CHECK(png_image_begin_read_from_memory(&img, bytes.data(), bytes.size()), "[image] ", name,
               ": bad PNG: ", img.message);
  if (channels == 0) channels = (img.format & PNG_FORMAT_FLAG_COLOR) ? 3 : 1;
  img.format = channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  Tensor out = Tensor::empty({int64_t(img.height), int64_t(img.width), channels}, DType::u8);
  int ok = png_image_finish_read(&img, nullptr, out.raw_data(), 0, nullptr);
  std::string message = img.message;
  png_image_free(&img);
  ZENITH_CHECK(ok, "[image] ", name, ": bad PNG: ", message);
  return out;
}

// libjpeg reports errors through a callback that must not return: longjmp back to the decoder.
// No C++ object with a destructor lives between setjmp and longjmp in decode_jpeg_raw.
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Decodes into `out` (allocated by `alloc` once the size is known); returns false on error.
template <typename Alloc>
bool decode_jpeg_raw(const std::string& bytes, int channels, JpegError& err, Alloc alloc) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()),
               static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  const int c = channels != 0 ? channels : cinfo.num_components == 1 ? 1 : 3;
  cinfo.out_color_space = c == 3 ? JCS_RGB : JCS_GRAYSCALE;
  jpeg_start_decompress(&cinfo);
  uint8_t* dst = alloc(int64_t(cinfo.output_height), int64_t(cinfo.output_width), c);
  const size_t stride = size_t(cinfo.output_width) * size_t(c);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = dst + size_t(cinfo.output_scanline) * stride;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

Tensor decode_jpeg(const std::string& bytes, const std::string& name, int channels) {
  JpegError err{};
  Tensor out;
  bool ok = decode_jpeg_raw(bytes, channels, err, [&](int64_t h, int64_t w, int c) {
    out = Tensor::empty({h, w, c}, DType::u8);
    return out.data<uint8_t>();
  });
  ZENITH_CHECK(ok, "[image] ", name, ": bad JPEG: ", err.message);
  return out;
}

Tensor as_hwc_u8(const Tensor& image, const char* what) {
  ZENITH_CHECK(image.dtype() == DType::u8 && (image.dim() == 2 || image.dim() == 3), "[", what,
               "] expects an HWC or HW uint8 image, got ", dtype_name(image.dtype()), " ",
               shape_str(image.shape()));
  Tensor t = image.dim() == 2 ? image.unsqueeze(2) : image;
  ZENITH_CHECK(t.size(2) == 1 || t.size(2) == 3, "[", what, "] expects 1 or 3 channels, got ",
               t.size(2));
  return t.contiguous();
}

}  // namespace

Tensor decode_image(const std::string& bytes, const std::string& name, int channels) {
  ZENITH_CHECK(channels == 0 || channels == 1 || channels == 3,
               "[image] channels must be 0, 1 or "
               "3, got ",
               channels);
  if (is_png(bytes)) return decode_png(bytes, name, channels);
  if (is_jpeg(bytes)) return decode_jpeg(bytes, name, channels);
  ZENITH_FAIL("[image] ", name, ": neither PNG nor JPEG (bad signature at offset 0)");
}

std::string encode_png(const Tensor& image) {
  Tensor t = as_hwc_u8(image, "encode_png");
  png_image img;
  std::memset(&img, 0, sizeof(img));
  img.version = PNG_IMAGE_VERSION;
  img.width = png_uint_32(t.size(1));
  img.height = png_uint_32(t.size(0));
  img.format = t.size(2) == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  png_alloc_size_t size = 0;
  ZENITH_CHECK(png_image_write_to_memory(&img, nullptr, &size, 0, t.raw_data(), 0, nullptr),
               "[encode_png] ", img.message);
  std::string out(size, '\0');
  ZENITH_CHECK(png_image_write_to_memory(&img, out.data(), &size, 0, t.raw_data(), 0, nullptr),
               "[encode_png] ", img.message);
  out.resize(size);
  return out;
}

std::string encode_jpeg(const Tensor& image, int quality) {
  Tensor t = as_hwc_u8(image, "encode_jpeg");
  jpeg_compress_struct cinfo;
  jpeg_error_mgr jerr;
  cinfo.err = jpeg_std_error(&jerr);  // default handler exits; inputs here are validated
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = JDIMENSION(t.size(1));
  cinfo.image_height = JDIMENSION(t.size(0));
  cinfo.input_components = int(t.size(2));
  cinfo.in_color_space = t.size(2) == 3 ? JCS_RGB : JCS_GRAYSCALE;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  const size_t stride = size_t(t.size(1) * t.size(2));
  auto* base = static_cast<uint8_t*>(t.raw_data());
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = base + size_t(cinfo.next_scanline) * stride;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::string out(reinterpret_cast<char*>(buffer), size);
  std::free(buffer);
  return out;
}

}  // namespace zenith::vision
