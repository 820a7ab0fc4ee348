// Bit-exact comparison of tensors and of named tensor sets (file round trips, conversions).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

#include "zenith/tensor.h"

namespace zenith::testing {

// Same dtype, same shape, same bytes.
inline ::testing::AssertionResult same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    return ::testing::AssertionFailure()
           << "dtype " << dtype_name(a.dtype()) << " vs " << dtype_name(b.dtype());
  if (a.shape() != b.shape())
    return ::testing::AssertionFailure()
           << "shape " << shape_str(a.shape()) << " vs " << shape_str(b.shape());
  Tensor x = a.contiguous(), y = b.contiguous();
  const auto* p = static_cast<const unsigned char*>(x.raw_data());
  const auto* q = static_cast<const unsigned char*>(y.raw_data());
  for (size_t i = 0; i < x.nbytes(); ++i)
    if (p[i] != q[i])
      return ::testing::AssertionFailure() << "byte " << i << " of " << x.nbytes() << " differs";
  return ::testing::AssertionSuccess();
}

// The same names, each with the same bits.
inline ::testing::AssertionResult same_state(const std::map<std::string, Tensor>& a,
                                             const std::map<std::string, Tensor>& b) {
  for (const auto& [name, t] : a) {
    auto it = b.find(name);
    if (it == b.end()) return ::testing::AssertionFailure() << "'" << name << "' only on the left";
    auto r = same_bits(t, it->second);
    if (!r) return ::testing::AssertionFailure() << "'" << name << "': " << r.message();
  }
  for (const auto& [name, t] : b)
    if (!a.count(name))
      return ::testing::AssertionFailure() << "'" << name << "' only on the right";
  return ::testing::AssertionSuccess();
}

}  // namespace zenith::testing
