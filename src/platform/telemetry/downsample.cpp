#include "platform/telemetry/downsample.h"

#include <cmath>
#include <numeric>

namespace zenith::platform {

std::vector<std::size_t> lttb_indices(const std::vector<double>& x, const std::vector<double>& y,
                                      std::size_t threshold) {
  const std::size_t n = std::min(x.size(), y.size());
  std::vector<std::size_t> out;
  if (threshold < 3 || n <= threshold) {
    out.resize(n);
    std::iota(out.begin(), out.end(), std::size_t{0});
    return out;
  }
  out.reserve(threshold);
  out.push_back(0);
  // The n - 2 inner points go to threshold - 2 buckets.
  const double every = double(n - 2) / double(threshold - 2);
  std::size_t a = 0;
  for (std::size_t b = 0; b < threshold - 2; ++b) {
    const std::size_t lo = std::size_t(std::floor(b * every)) + 1;
    const std::size_t hi = std::min(std::size_t(std::floor((b + 1) * every)) + 1, n - 1);
    // Mean of the next bucket (the last point for the final bucket).
    const std::size_t nlo = hi;
    const std::size_t nhi = std::min(std::size_t(std::floor((b + 2) * every)) + 1, n);
    double mx = 0, my = 0;
    for (std::size_t i = nlo; i < nhi; ++i) mx += x[i], my += y[i];
    const double cnt = double(std::max<std::size_t>(1, nhi - nlo));
    mx /= cnt, my /= cnt;
    double best = -1;
    std::size_t pick = lo;
    for (std::size_t i = lo; i < hi; ++i) {
      const double area = std::abs((x[a] - mx) * (y[i] - y[a]) - (x[a] - x[i]) * (my - y[a]));
      if (area > best) best = area, pick = i;
    }
    out.push_back(pick);
    a = pick;
  }
  out.push_back(n - 1);
  return out;
}

}  // namespace zenith::platform
