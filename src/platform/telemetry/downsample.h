// Server-side downsampling for dashboard charts: a long series (100k points) is cut to a few
// hundred points that keep its shape, so the browser draws it in milliseconds.
#pragma once

#include <cstddef>
#include <vector>

namespace zenith::platform {

// Indices (ascending, first and last included) of at most `threshold` points of (x, y) chosen by
// Largest-Triangle-Three-Buckets (Steinarsson 2013): per bucket, the point that spans the largest
// triangle with the previous pick and the next bucket's mean. All indices when the series is
// short enough or threshold < 3.
std::vector<std::size_t> lttb_indices(const std::vector<double>& x, const std::vector<double>& y,
                                      std::size_t threshold);

}  // namespace zenith::platform
