// Per-sample transforms on HWC images (mindspore.dataset.vision names). They run on data
// worker threads, so they use plain loops over contiguous buffers instead of dispatched ops.
#include <cmath>
#include <cstring>

#include "zenith/data.h"

namespace zenith {

namespace {

using dataset::Transform;

// An image as [H, W, C] (HW images get one channel); contiguous.
Tensor as_hwc(const Tensor& x, const char* what) {
  ZENITH_CHECK(x.dim() == 2 || x.dim() == 3, "[", what, "] expects an HWC or HW image, got shape ",
               shape_str(x.shape()));
  return (x.dim() == 2 ? x.unsqueeze(2) : x).contiguous();
}

Tensor to_f32(const Tensor& x) {
  Tensor c = x.contiguous();
  if (c.dtype() == DType::f32) return c;
  if (c.dtype() != DType::u8) return c.to(DType::f32);
  Tensor out = Tensor::empty(c.shape(), DType::f32);
  const uint8_t* src = c.data<uint8_t>();
  float* dst = out.data<float>();
  for (int64_t i = 0, n = c.numel(); i < n; ++i) dst[i] = float(src[i]);
  return out;
}

double uniform01(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

class Rescale final : public Transform {
 public:
  Rescale(double rescale, double shift) : rescale_(float(rescale)), shift_(float(shift)) {}
  Tensor apply(const Tensor& x, std::mt19937_64&) const override {
    Tensor out = to_f32(x);
    if (out.is_same(x) || out.storage() == x.storage()) out = out.clone();
    float* p = out.data<float>();
    for (int64_t i = 0, n = out.numel(); i < n; ++i) p[i] = p[i] * rescale_ + shift_;
    return out;
  }
  std::string name() const override { return "Rescale"; }

 private:
  float rescale_, shift_;
};

class Normalize final : public Transform {
 public:
  Normalize(std::vector<double> mean, std::vector<double> std, bool is_hwc)
      : mean_(std::move(mean)), std_(std::move(std)), hwc_(is_hwc) {
    ZENITH_CHECK(!mean_.empty() && mean_.size() == std_.size(),
                 "[Normalize] mean and std need "
                 "the same, non-zero length, got ",
                 mean_.size(), " and ", std_.size());
    for (double s : std_) ZENITH_CHECK(s > 0, "[Normalize] std must be positive, got ", s);
  }
  Tensor apply(const Tensor& x, std::mt19937_64&) const override {
    ZENITH_CHECK(x.dim() == 2 || x.dim() == 3, "[Normalize] expects an image, got shape ",
                 shape_str(x.shape()));
    Tensor out = to_f32(x);
    if (out.storage() == x.storage()) out = out.clone();
    int64_t channels = x.dim() == 2 ? 1 : (hwc_ ? x.size(2) : x.size(0));
    int64_t plane = x.dim() == 2 ? x.numel() : (hwc_ ? 1 : x.size(1) * x.size(2));
    ZENITH_CHECK(mean_.size() == 1 || int64_t(mean_.size()) == channels, "[Normalize] ",
                 mean_.size(), " mean values for an image with ", channels, " channels (shape ",
                 shape_str(x.shape()), hwc_ ? ", HWC)" : ", CHW)");
    float* p = out.data<float>();
    for (int64_t i = 0, n = out.numel(); i < n; ++i) {
      size_t c = mean_.size() == 1 ? 0 : size_t(hwc_ ? i % channels : i / plane);
      p[i] = float((p[i] - mean_[c]) / std_[c]);
    }
    return out;
  }
  std::string name() const override { return "Normalize"; }

 private:
  std::vector<double> mean_, std_;
  bool hwc_;
};

class HWC2CHW final : public Transform {
 public:
  Tensor apply(const Tensor& x, std::mt19937_64&) const override {
    Tensor img = as_hwc(x, "HWC2CHW");
    const int64_t h = img.size(0), w = img.size(1), c = img.size(2);
    const size_t item = itemsize(img.dtype());
    Tensor out = Tensor::empty({c, h, w}, img.dtype());
    const char* src = static_cast<const char*>(img.raw_data());
    char* dst = static_cast<char*>(out.raw_data());
    for (int64_t p = 0; p < h * w; ++p)
      for (int64_t k = 0; k < c; ++k)
        std::memcpy(dst + (k * h * w + p) * item, src + (p * c + k) * item, item);
    return out;
  }
  std::string name() const override { return "HWC2CHW"; }
};

class TypeCast final : public Transform {
 public:
  explicit TypeCast(DType dtype) : dtype_(dtype) {}
  Tensor apply(const Tensor& x, std::mt19937_64&) const override {
    if (dtype_ == DType::f32) return to_f32(x);
    return x.to(dtype_).contiguous();
  }
  std::string name() const override { return "TypeCast"; }

 private:
  DType dtype_;
};

template <typename T>
void fill_typed(Tensor& t, double value) {
  T v = T(value);
  T* p = t.data<T>();
  std::fill(p, p + t.numel(), v);
}

void fill_value(Tensor& t, double value) {
  switch (t.dtype()) {
    case DType::f32:
      return fill_typed<float>(t, value);
    case DType::f64:
      return fill_typed<double>(t, value);
    case DType::u8:
      return fill_typed<uint8_t>(t, value);
    case DType::i32:
      return fill_typed<int32_t>(t, value);
    case DType::i64:
      return fill_typed<int64_t>(t, value);
    default:
      t.fill_(value);
  }
}

class RandomCrop final : public Transform {
 public:
  RandomCrop(std::vector<int64_t> size, int64_t padding, double fill)
      : padding_(padding), fill_(fill) {
    ZENITH_CHECK(size.size() == 1 || size.size() == 2, "[RandomCrop] size is {s} or {h, w}");
    h_ = size[0];
    w_ = size.back();
    ZENITH_CHECK(h_ > 0 && w_ > 0 && padding >= 0,
                 "[RandomCrop] needs a positive size and a "
                 "non-negative padding");
  }
  Tensor apply(const Tensor& x, std::mt19937_64& rng) const override {
    Tensor img = as_hwc(x, "RandomCrop");
    const int64_t h = img.size(0), w = img.size(1), c = img.size(2);
    const int64_t ph = h + 2 * padding_, pw = w + 2 * padding_;
    ZENITH_CHECK(h_ <= ph && w_ <= pw, "[RandomCrop] crop ", h_, "x", w_,
                 " is larger than the padded image ", ph, "x", pw);
    // Offsets of the window in the padded image.
    const int64_t top = int64_t(rng() % uint64_t(ph - h_ + 1));
    const int64_t left = int64_t(rng() % uint64_t(pw - w_ + 1));
    Tensor out = Tensor::empty({h_, w_, c}, img.dtype());
    fill_value(out, fill_);
    const size_t pixel = size_t(c) * itemsize(img.dtype());
    const char* src = static_cast<const char*>(img.raw_data());
    char* dst = static_cast<char*>(out.raw_data());
    for (int64_t y = 0; y < h_; ++y) {
      int64_t sy = top + y - padding_;
      if (sy < 0 || sy >= h) continue;
      int64_t x0 = std::max<int64_t>(0, padding_ - left);       // first column inside
      int64_t x1 = std::min<int64_t>(w_, w + padding_ - left);  // one past the last
      if (x1 <= x0) continue;
      std::memcpy(dst + (y * w_ + x0) * pixel, src + (sy * w + left + x0 - padding_) * pixel,
                  size_t(x1 - x0) * pixel);
    }
    return out;
  }
  std::string name() const override { return "RandomCrop"; }

 private:
  int64_t h_, w_, padding_;
  double fill_;
};

class RandomHorizontalFlip final : public Transform {
 public:
  explicit RandomHorizontalFlip(double prob) : prob_(prob) {
    ZENITH_CHECK(prob >= 0 && prob <= 1, "[RandomHorizontalFlip] prob must be in [0, 1], got ",
                 prob);
  }
  Tensor apply(const Tensor& x, std::mt19937_64& rng) const override {
    Tensor img = as_hwc(x, "RandomHorizontalFlip");
    if (uniform01(rng) >= prob_) return x;
    const int64_t h = img.size(0), w = img.size(1);
    const size_t pixel = size_t(img.size(2)) * itemsize(img.dtype());
    Tensor out = Tensor::empty(img.shape(), img.dtype());
    const char* src = static_cast<const char*>(img.raw_data());
    char* dst = static_cast<char*>(out.raw_data());
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x0 = 0; x0 < w; ++x0)
        std::memcpy(dst + (y * w + x0) * pixel, src + (y * w + (w - 1 - x0)) * pixel, pixel);
    return x.dim() == 2 ? out.squeeze(2) : out;
  }
  std::string name() const override { return "RandomHorizontalFlip"; }

 private:
  double prob_;
};

// Bilinear with half-pixel centres (OpenCV's INTER_LINEAR, which MindSpore uses).
class Resize final : public Transform {
 public:
  explicit Resize(std::vector<int64_t> size) : size_(std::move(size)) {
    ZENITH_CHECK((size_.size() == 1 || size_.size() == 2) && size_[0] > 0 && size_.back() > 0,
                 "[Resize] size is {s} (smaller edge) or {h, w}, positive");
  }
  Tensor apply(const Tensor& x, std::mt19937_64&) const override {
    Tensor img = as_hwc(x, "Resize");
    const int64_t h = img.size(0), w = img.size(1), c = img.size(2);
    int64_t oh = size_[0], ow = size_.back();
    if (size_.size() == 1) {  // the smaller edge becomes s
      if (h <= w) {
        oh = size_[0];
        ow = std::max<int64_t>(1, int64_t(double(w) * double(oh) / double(h)));
      } else {
        ow = size_[0];
        oh = std::max<int64_t>(1, int64_t(double(h) * double(ow) / double(w)));
      }
    }
    Tensor src = to_f32(img);
    const float* s = src.data<float>();
    Tensor out_f = Tensor::empty({oh, ow, c}, DType::f32);
    float* d = out_f.data<float>();
    const double sy = double(h) / double(oh), sx = double(w) / double(ow);
    for (int64_t y = 0; y < oh; ++y) {
      double fy = std::clamp((double(y) + 0.5) * sy - 0.5, 0.0, double(h - 1));
      int64_t y0 = int64_t(fy), y1 = std::min(y0 + 1, h - 1);
      float ay = float(fy - double(y0));
      for (int64_t x0 = 0; x0 < ow; ++x0) {
        double fx = std::clamp((double(x0) + 0.5) * sx - 0.5, 0.0, double(w - 1));
        int64_t xa = int64_t(fx), xb = std::min(xa + 1, w - 1);
        float ax = float(fx - double(xa));
        for (int64_t k = 0; k < c; ++k) {
          float top = s[(y0 * w + xa) * c + k] * (1 - ax) + s[(y0 * w + xb) * c + k] * ax;
          float bot = s[(y1 * w + xa) * c + k] * (1 - ax) + s[(y1 * w + xb) * c + k] * ax;
          d[(y * ow + x0) * c + k] = top * (1 - ay) + bot * ay;
        }
      }
    }
    if (img.dtype() == DType::f32) return out_f;
    if (img.dtype() != DType::u8) return out_f.to(img.dtype());
    Tensor out = Tensor::empty({oh, ow, c}, DType::u8);
    uint8_t* o = out.data<uint8_t>();
    for (int64_t i = 0, n = out.numel(); i < n; ++i)
      o[i] = uint8_t(std::clamp(std::lround(d[i]), 0l, 255l));
    return out;
  }
  std::string name() const override { return "Resize"; }

 private:
  std::vector<int64_t> size_;
};

class Lambda final : public Transform {
 public:
  Lambda(std::function<Tensor(const Tensor&)> fn, std::string name)
      : fn_(std::move(fn)), name_(std::move(name)) {}
  Tensor apply(const Tensor& x, std::mt19937_64&) const override { return fn_(x); }
  std::string name() const override { return name_; }

 private:
  std::function<Tensor(const Tensor&)> fn_;
  std::string name_;
};

}  // namespace

namespace vision {
TransformPtr Rescale(double rescale, double shift) {
  return std::make_shared<zenith::Rescale>(rescale, shift);
}
TransformPtr Normalize(std::vector<double> mean, std::vector<double> std, bool is_hwc) {
  return std::make_shared<zenith::Normalize>(std::move(mean), std::move(std), is_hwc);
}
TransformPtr HWC2CHW() { return std::make_shared<zenith::HWC2CHW>(); }
TransformPtr RandomCrop(int64_t size, int64_t padding, double fill_value) {
  return std::make_shared<zenith::RandomCrop>(std::vector<int64_t>{size}, padding, fill_value);
}
TransformPtr RandomCrop(std::vector<int64_t> size, int64_t padding, double fill_value) {
  return std::make_shared<zenith::RandomCrop>(std::move(size), padding, fill_value);
}
TransformPtr RandomHorizontalFlip(double prob) {
  return std::make_shared<zenith::RandomHorizontalFlip>(prob);
}
TransformPtr Resize(std::vector<int64_t> size) {
  return std::make_shared<zenith::Resize>(std::move(size));
}
}  // namespace vision

namespace transforms {
TransformPtr TypeCast(DType dtype) { return std::make_shared<zenith::TypeCast>(dtype); }
TransformPtr Lambda(std::function<Tensor(const Tensor&)> fn, std::string name) {
  return std::make_shared<zenith::Lambda>(std::move(fn), std::move(name));
}
}  // namespace transforms

}  // namespace zenith
