#include "zenith/random.h"

#include <cmath>
#include <sstream>

#include "zenith/error.h"
#include "zenith/tensor.h"

namespace zenith {

std::string Generator::state() const {
  std::ostringstream os;
  os << engine_;
  return os.str();
}

void Generator::set_state(const std::string& state) {
  std::istringstream is(state);
  std::mt19937_64 e;
  is >> e;
  ZENITH_CHECK(!is.fail(), "[random] malformed generator state");
  engine_ = e;
}

Generator& default_generator() {
  static Generator g;
  return g;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

namespace {
// Fills a float64 buffer from `draw`, then converts: one sequence whatever the dtype.
template <typename Draw>
Tensor random_tensor(const Shape& shape, DType dtype, Draw draw) {
  Tensor t = Tensor::empty(shape, DType::f64);
  double* p = t.data<double>();
  auto& e = default_generator().engine();
  for (int64_t i = 0, n = t.numel(); i < n; ++i) p[i] = draw(e);
  return dtype == DType::f64 ? t : t.to(dtype);
}
double uniform01(std::mt19937_64& e) { return double(e() >> 11) * 0x1.0p-53; }
}  // namespace

Tensor Tensor::rand(const Shape& shape, DType dtype) {
  return random_tensor(shape, dtype, uniform01);
}

Tensor Tensor::uniform(const Shape& shape, double low, double high, DType dtype) {
  return random_tensor(shape, dtype,
                       [=](std::mt19937_64& e) { return low + (high - low) * uniform01(e); });
}

Tensor Tensor::randn(const Shape& shape, DType dtype) {
  // Box-Muller on pairs; deterministic for a seed.
  return random_tensor(shape, dtype, [](std::mt19937_64& e) {
    double u1 = uniform01(e), u2 = uniform01(e);
    return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * M_PI * u2);
  });
}

Tensor Tensor::randint(int64_t low, int64_t high, const Shape& shape, DType dtype) {
  ZENITH_CHECK(high > low, "[randint] empty range [", low, ", ", high, ")");
  uint64_t span = uint64_t(high - low);
  return random_tensor(shape, dtype,
                       [=](std::mt19937_64& e) { return double(low + int64_t(e() % span)); });
}

}  // namespace zenith
