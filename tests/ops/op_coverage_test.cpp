// Every op of the list (src/core/ops.def) is covered: it has a case in the op-check table
// (tests/support/op_cases.cpp) that dispatches it and passes the float64 / finite-difference
// checks, it runs on the CPU, and its fused gradient kernel, if any, equals its decomposition.
#include <set>

#include "core/dispatch.h"
#include "support/op_cases.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

// The ops dispatched while alive, by the path they took.
struct SeenOps {
  std::set<OpId> kernel, decomposed;
  int id;
  SeenOps() : id(dispatch::add_observer(&observe, this)) {}
  ~SeenOps() { dispatch::remove_observer(id); }
  static void observe(void* self, const dispatch::OpEvent& e) {
    auto* s = static_cast<SeenOps*>(self);
    (e.decomposed ? s->decomposed : s->kernel).insert(e.op);
  }
  bool saw(OpId op) const { return kernel.count(op) || decomposed.count(op); }
};

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  for (auto& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

// Runs a case forward, and backward when it has gradients.
void run(const OpCase& c, const std::vector<Tensor>& inputs) {
  if (!any_requires_grad(inputs)) {
    NoGradGuard no_grad;
    c.fn(inputs);
    return;
  }
  Tensor y = c.fn(inputs);
  if (y.requires_grad()) ops::sum(y).backward();
}

std::vector<const OpCase*> cases_covering(OpId op) {
  std::vector<const OpCase*> out;
  for (auto& c : op_cases())
    for (OpId o : c.covers)
      if (o == op) out.push_back(&c);
  return out;
}

bool graph_fused_op(OpId op) {
  return op == OpId::conv2d_relu || op == OpId::batch_norm_relu ||
         op == OpId::batch_norm_relu_backward || op == OpId::fused_elementwise ||
         op == OpId::multi_momentum_update || op == OpId::multi_adam_update ||
         op == OpId::add_rms_norm || op == OpId::rms_norm_add_backward ||
         op == OpId::embedding_backward_add || op == OpId::linear_cross_entropy ||
         op == OpId::linear_cross_entropy_grads || op == OpId::max_pool2d_relu ||
         op == OpId::max_pool2d_relu_backward || op == OpId::conv2d_relu_max_pool ||
         op == OpId::conv2d_relu_max_pool_backward || op == OpId::matmul_add;
}

}  // namespace

TEST(OpList, EveryOpHasACaseInTheOpCheckTable) {
  std::string missing;
  for (auto& op : dispatch::registered_ops())
    if (cases_covering(op.id).empty()) missing += std::string(" ") + op.name;
  EXPECT_TRUE(missing.empty()) << "ops without a case in tests/support/op_cases.cpp:" << missing;
}

TEST(OpList, EveryOpRunsOnTheCpu) {
  for (auto& op : dispatch::registered_ops())
    EXPECT_TRUE(dispatch::has_kernel(op.id, DeviceType::CPU) || dispatch::has_decomposition(op.id))
        << op.name << " has neither a CPU kernel nor a decomposition";
  // Every gradient op can be differentiated on any backend: it has a decomposition.
  for (auto& op : dispatch::registered_ops()) {
    if (std::string(op.name).ends_with("_backward")) {
      EXPECT_TRUE(dispatch::has_decomposition(op.id)) << op.name << " has no decomposition";
    }
  }
}

TEST(OpList, CasesDispatchTheOpsTheyCover) {
  for (auto& c : op_cases()) {
    SCOPED_TRACE(c.name);
    SeenOps seen;
    run(c, c.inputs);
    for (OpId op : c.covers) EXPECT_TRUE(seen.saw(op)) << op_name(op) << " was not dispatched";
  }
}

TEST(OpList, CasesMatchFloat64AndFiniteDifferences) {
  for (auto& c : op_cases()) {
    SCOPED_TRACE(c.name);
    if (c.check == OpCase::kRun) continue;
    EXPECT_TRUE(forward_matches_f64(c.fn, c.inputs, c.rtol, c.atol));
    if (c.check == OpCase::kGradient && any_requires_grad(c.inputs)) {
      EXPECT_TRUE(gradcheck(c.fn, c.inputs, 1e-6, 1e-4, 1e-5));
    }
  }
}

// A fused gradient kernel is a fast path: on the cases of its op it gives the gradients the
// decomposition gives, in float64 and float32.
TEST(OpList, FusedGradientKernelsEqualTheirDecompositions) {
  int compared = 0;
  for (auto& op : dispatch::registered_ops()) {
    if (!dispatch::has_kernel(op.id, DeviceType::CPU) || !dispatch::has_decomposition(op.id))
      continue;
    // Graph mode's fused ops have no gradient: tests/graph/fused_ops_test.cpp compares them.
    if (graph_fused_op(op.id)) continue;
    int cases = 0;
    for (const OpCase* c : cases_covering(op.id)) {
      if (!any_requires_grad(c->inputs)) continue;
      ++cases;
      for (DType dtype : {DType::f64, DType::f32}) {
        SCOPED_TRACE(std::string(op.name) + " on " + c->name + " in " + dtype_name(dtype));
        std::vector<Tensor> in = cast_inputs(c->inputs, dtype);
        Tensor w = output_weights(c->fn, in).to(dtype);
        SeenOps fast_seen;
        auto fast = autograd_grads(c->fn, cast_inputs(in, dtype), w);
        EXPECT_TRUE(fast_seen.kernel.count(op.id)) << "the fused kernel did not run";
        std::vector<Tensor> composed;
        {
          dispatch::ForceDecomposition force(op.id);
          SeenOps seen;
          composed = autograd_grads(c->fn, cast_inputs(in, dtype), w);
          EXPECT_TRUE(seen.decomposed.count(op.id)) << "the decomposition did not run";
          EXPECT_FALSE(seen.kernel.count(op.id)) << "the fused kernel ran";
        }
        ASSERT_EQ(fast.size(), composed.size());
        const double tol = dtype == DType::f64 ? 1e-10 : 1e-4;
        for (size_t i = 0; i < fast.size(); ++i)
          EXPECT_TRUE(all_close(fast[i], composed[i], tol, tol)) << "gradient " << i;
        ++compared;
      }
    }
    EXPECT_GT(cases, 0) << op.name << " has a fused kernel but no case with gradients";
  }
  EXPECT_GE(compared, 2 * 18);  // 18 fused gradient kernels, each in float64 and float32
}
