// Floating-point operations of an op from its shapes and attributes, for the profiler's GFLOP/s:
// a multiply-add counts 2. Known for the GEMM-like ops (conv2d and its gradients, matmul, linear);
// 0 for the others.
#pragma once

#include "core/dispatch.h"

namespace zenith::profiler {

double op_flops(const dispatch::OpEvent& event);

}  // namespace zenith::profiler
