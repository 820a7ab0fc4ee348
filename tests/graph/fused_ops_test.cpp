// Graph mode's fused ops (src/ops/fused.cpp): the CPU kernel of each equals its decomposition
// into the ops it stands for, in float32 and float64, on the cases of the op table.
#include <gtest/gtest.h>

#include "core/dispatch.h"
#include "support/op_cases.h"

namespace zenith::graph {
namespace {

using testing::OpCase;

std::vector<Tensor> cast_all(const std::vector<Tensor>& in, DType dtype) {
  std::vector<Tensor> out;
  for (const Tensor& t : in) out.push_back(t.dtype() == DType::f64 ? t.to(dtype) : t);
  return out;
}

TEST(GraphFusedOps, KernelsEqualTheirDecompositions) {
  const OpId fused[] = {
      OpId::conv2d_relu,       OpId::batch_norm_relu,       OpId::batch_norm_relu_backward,
      OpId::fused_elementwise, OpId::multi_momentum_update, OpId::multi_adam_update};
  for (OpId op : fused) {
    ASSERT_TRUE(dispatch::has_kernel(op, DeviceType::CPU)) << op_name(op);
    ASSERT_TRUE(dispatch::has_decomposition(op)) << op_name(op);
    int cases = 0;
    for (const OpCase& c : testing::op_cases()) {
      if (std::find(c.covers.begin(), c.covers.end(), op) == c.covers.end()) continue;
      ++cases;
      for (DType dtype : {DType::f64, DType::f32}) {
        SCOPED_TRACE(c.name + " in " + dtype_name(dtype));
        Tensor fast = c.fn(cast_all(c.inputs, dtype));
        Tensor composed;
        {
          dispatch::ForceDecomposition force(op);
          composed = c.fn(cast_all(c.inputs, dtype));
        }
        const double tol = dtype == DType::f64 ? 1e-10 : 1e-5;
        EXPECT_TRUE(testing::all_close(fast, composed, tol, tol));
      }
    }
    EXPECT_GT(cases, 0) << op_name(op);
  }
}

}  // namespace
}  // namespace zenith::graph
