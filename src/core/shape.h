// Shape rules shared by ops and kernels (shape_str, shape_numel, contiguous_strides are in
// zenith/tensor.h).
#pragma once

#include "zenith/tensor.h"

namespace zenith {

// The broadcast shape of a and b (numpy rules); `op` names the caller in the error.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace zenith
