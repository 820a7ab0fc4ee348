// Element-wise reductions the CPU collectives apply to received data.
#pragma once

#include <cstddef>

#include "zenith/communication.h"
#include "zenith/dtype.h"

namespace zenith::distributed {

bool is_supported_dtype(DType dtype);  // f32, f64, i32, i64

// dst[i] = a[i] op b[i] for `count` elements; dst may alias a. AVG reduces as SUM (the caller
// divides once at the end).
void reduce(void* dst, const void* a, const void* b, size_t count, DType dtype,
            communication::ReduceOp op);

// data[i] /= divisor (AVG's final step; floating dtypes only).
void divide(void* data, size_t count, DType dtype, int divisor);

}  // namespace zenith::distributed
