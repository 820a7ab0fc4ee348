// Graph mode's fused ops (src/ops/fused.cpp): the CPU kernel of each equals its decomposition
// into the ops it stands for, in float32 and float64, on the cases of the op table.
#include <gtest/gtest.h>

#include <string_view>

#include "backend/cpu/gemm.h"
#include "core/dispatch.h"
#include "support/op_cases.h"
#include "zenith/ops.h"

namespace zenith::graph {
namespace {

using testing::OpCase;

std::vector<Tensor> cast_all(const std::vector<Tensor>& in, DType dtype) {
  std::vector<Tensor> out;
  for (const Tensor& t : in) out.push_back(t.dtype() == DType::f64 ? t.to(dtype) : t);
  return out;
}

TEST(GraphFusedOps, KernelsEqualTheirDecompositions) {
  const OpId fused[] = {OpId::conv2d_relu,
                        OpId::batch_norm_relu,
                        OpId::batch_norm_relu_backward,
                        OpId::fused_elementwise,
                        OpId::multi_momentum_update,
                        OpId::multi_adam_update,
                        OpId::add_rms_norm,
                        OpId::rms_norm_add_backward,
                        OpId::embedding_backward_add,
                        OpId::linear_cross_entropy,
                        OpId::max_pool2d_relu,
                        OpId::max_pool2d_relu_backward,
                        OpId::linear_cross_entropy_grads,
                        OpId::matmul_add};
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

// rms_norm_add_backward against finite differences in float64: with L(x, w) = sum(dy *
// rms_norm(x, w)), its dx minus dres is dL/dx and its dweight is dL/dw.
TEST(GraphFusedOps, RmsNormAddBackwardMatchesFiniteDifferences) {
  manual_seed(5);
  const LayerNormAttrs a{.D = 6, .eps = 1e-5};
  Tensor x = Tensor::randn({4, 6}, DType::f64), w = Tensor::randn({6}, DType::f64);
  Tensor dy = Tensor::randn({4, 6}, DType::f64), dres = Tensor::randn({4, 6}, DType::f64);
  auto loss = [&](const Tensor& xv, const Tensor& wv) {
    Tensor y =
        dispatch::call<OpId::add_rms_norm>({xv, Tensor::zeros({4, 6}, DType::f64), wv}, a)[1];
    return ops::sum(ops::mul(dy, y)).item();
  };
  Tensor rstd = dispatch::call<OpId::rms_norm>({x, w}, a)[1];
  std::vector<Tensor> g = dispatch::call<OpId::rms_norm_add_backward>({dy, x, w, rstd, dres}, a);
  std::vector<double> dx = ops::sub(g[0], dres).to_double_vector(), dw = g[1].to_double_vector();
  const double h = 1e-6;
  auto numeric = [&](Tensor& t, size_t i) {
    std::vector<double> v = t.to_double_vector();
    auto at = [&](double delta) {
      std::vector<double> u = v;
      u[i] += delta;
      return Tensor::from_vector(u, t.shape(), DType::f64);
    };
    const bool is_x = &t == &x;
    const double up = is_x ? loss(at(h), w) : loss(x, at(h));
    const double down = is_x ? loss(at(-h), w) : loss(x, at(-h));
    return (up - down) / (2 * h);
  };
  for (size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx[i], numeric(x, i), 1e-6) << "dx " << i;
  for (size_t i = 0; i < dw.size(); ++i) EXPECT_NEAR(dw[i], numeric(w, i), 1e-6) << "dw " << i;
}

// linear_cross_entropy against finite differences in float64: its loss is dloss * the
// cross-entropy of x W^T (mean over the rows not ignored, label smoothing 0.1), so dlogits W is
// dL/dx and dlogits^T x is dL/dW; the ignored row's gradient is 0.
TEST(GraphFusedOps, LinearCrossEntropyMatchesFiniteDifferences) {
  manual_seed(6);
  const CrossEntropyAttrs a{.ignore_index = -1, .label_smoothing = 0.1};
  Tensor x = Tensor::randn({5, 3}, DType::f64), w = Tensor::randn({7, 3}, DType::f64);
  Tensor t = Tensor::from_vector(std::vector<int64_t>{6, 0, -1, 3, 3}, {5});
  Tensor dloss = Tensor::scalar(0.7, DType::f64);
  auto loss = [&](const Tensor& xv, const Tensor& wv) {
    return 0.7 * dispatch::call<OpId::linear_cross_entropy>({xv, wv, t, dloss}, a)[0].item();
  };
  Tensor dlogits = dispatch::call<OpId::linear_cross_entropy>({x, w, t, dloss}, a)[1];
  for (double g : dlogits.slice(0, 2, 3).to_double_vector()) EXPECT_EQ(g, 0.0);
  std::vector<double> dx = ops::matmul(dlogits, w).to_double_vector();
  std::vector<double> dw = ops::matmul(dlogits.transpose(0, 1), x).to_double_vector();
  const double h = 1e-6;
  auto numeric = [&](const Tensor& p, size_t i) {
    std::vector<double> v = p.to_double_vector();
    auto at = [&](double delta) {
      std::vector<double> u = v;
      u[i] += delta;
      return Tensor::from_vector(u, p.shape(), DType::f64);
    };
    const bool is_x = &p == &x;
    const double up = is_x ? loss(at(h), w) : loss(x, at(h));
    const double down = is_x ? loss(at(-h), w) : loss(x, at(-h));
    return (up - down) / (2 * h);
  };
  // linear_cross_entropy_grads makes the same loss, dL/dx and dL/dW itself.
  std::vector<Tensor> grads = dispatch::call<OpId::linear_cross_entropy_grads>({x, w, t, dloss}, a);
  EXPECT_NEAR(0.7 * grads[0].item(), loss(x, w), 1e-12);
  std::vector<double> gx = grads[1].to_double_vector(), gw = grads[2].to_double_vector();
  ASSERT_EQ(gx.size(), dx.size());
  ASSERT_EQ(gw.size(), dw.size());
  for (size_t i = 0; i < dx.size(); ++i) {
    EXPECT_NEAR(dx[i], numeric(x, i), 1e-6) << "dx " << i;
    EXPECT_NEAR(gx[i], numeric(x, i), 1e-6) << "grads' dx " << i;
  }
  for (size_t i = 0; i < dw.size(); ++i) {
    EXPECT_NEAR(dw[i], numeric(w, i), 1e-6) << "dw " << i;
    EXPECT_NEAR(gw[i], numeric(w, i), 1e-6) << "grads' dw " << i;
  }
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(gx[2 * 3 + k], 0.0);  // the ignored row
}

// Larger than one tile (more rows than a row block of 256, the last block shorter, a vocabulary
// of several chunks, the last one partial), with ignored rows: the kernel equals its
// decomposition in float32 and float64, for each reduction; float32 with its tile GEMM as
// oneDNN's packed matmul (its default; also with 3 threads taking the chunks) and as OpenBLAS's
// sgemm. linear_cross_entropy_grads the same (its gradients over several row blocks and chunks,
// each thread's share of dx summed).
TEST(GraphFusedOps, LinearCrossEntropyOverManyTilesEqualsDecomposition) {
  manual_seed(7);
  const int64_t m = 300, d = 16, v = 1300;
  Tensor x = Tensor::randn({m, d}, DType::f64), w = Tensor::randn({v, d}, DType::f64);
  Tensor t = Tensor::randint(0, v, {m});
  Tensor ignored = ops::lt(Tensor::rand({m}), Tensor::scalar(0.2));
  t = ops::where(ignored, Tensor::scalar(-100, DType::i64), t);
  const int threads = context::get_num_threads();
  for (const Reduction r : {Reduction::kMean, Reduction::kSum, Reduction::kNone})
    for (const char* dtype_gemm : {"f64", "f32 onednn", "f32 onednn 3 threads", "f32 openblas"}) {
      const DType dtype = dtype_gemm[1] == '6' ? DType::f64 : DType::f32;
      SCOPED_TRACE(std::string(dtype_gemm) + " reduction " + std::to_string(int(r)));
      // 3 threads share the vocabulary chunks (the others run at the suite's thread count).
      context::set_num_threads(
          std::string_view(dtype_gemm).find("threads") != std::string::npos ? 3 : threads);
      const std::string backend = cpu::sgemm_backend();
      const std::string gemm = dtype == DType::f32 ? std::string(dtype_gemm + 4) : "";
      if (dtype == DType::f32) cpu::set_sgemm_backend(gemm.substr(0, gemm.find(' ')).c_str());
      const CrossEntropyAttrs a{.label_smoothing = r == Reduction::kSum ? 0.05 : 0.0,
                                .reduction = r};
      Tensor dloss = r == Reduction::kNone ? Tensor::randn({m}, dtype) : Tensor::scalar(1.5, dtype);
      std::vector<Tensor> in = {x.to(dtype), w.to(dtype), t, dloss};
      std::vector<Tensor> fast = dispatch::call<OpId::linear_cross_entropy>(in, a), composed;
      std::vector<Tensor> grads = dispatch::call<OpId::linear_cross_entropy_grads>(in, a),
                          grads_composed;
      {
        dispatch::ForceDecomposition force(OpId::linear_cross_entropy);
        composed = dispatch::call<OpId::linear_cross_entropy>(in, a);
      }
      {
        dispatch::ForceDecomposition force(OpId::linear_cross_entropy_grads);
        grads_composed = dispatch::call<OpId::linear_cross_entropy_grads>(in, a);
      }
      cpu::set_sgemm_backend(backend.c_str());
      context::set_num_threads(threads);
      const double tol = dtype == DType::f64 ? 1e-10 : 2e-5;
      EXPECT_TRUE(testing::all_close(fast[0], composed[0], tol, tol));
      EXPECT_TRUE(testing::all_close(fast[1], composed[1], tol, tol));
      ASSERT_EQ(grads.size(), 3u);
      EXPECT_EQ(grads[1].shape(), (Shape{m, d}));
      EXPECT_EQ(grads[2].shape(), (Shape{v, d}));
      for (size_t k = 0; k < 3; ++k)
        EXPECT_TRUE(testing::all_close(grads[k], grads_composed[k], tol, tol)) << "output " << k;
    }
}

// A frozen output layer (LoRA): weight_grad false makes the loss and dx only (no dweight), the
// same as with it; a bfloat16 or float16 weight beside float32 x (a LoRA base kept in 16 bits),
// its chunks converted as they are used, equals the decomposition over the same 16-bit weight
// (linear and matmul read it as it is) on several row blocks and chunks, 1 and 3 threads; a
// 16-bit weight asked for its gradient is an error naming the op.
TEST(GraphFusedOps, LinearCrossEntropyGradsForAFrozenOrSixteenBitWeight) {
  manual_seed(8);
  const int64_t m = 300, d = 16, v = 1300;
  Tensor x = Tensor::randn({m, d}), w = Tensor::randn({v, d});
  Tensor t = Tensor::randint(0, v, {m});
  t = ops::where(ops::lt(Tensor::rand({m}), Tensor::scalar(0.2)), Tensor::scalar(-100, DType::i64),
                 t);
  const Tensor dloss = Tensor::scalar(0.5);
  const CrossEntropyAttrs with_dw{}, without{.weight_grad = false};
  std::vector<Tensor> full = dispatch::call<OpId::linear_cross_entropy_grads>({x, w, t, dloss});
  std::vector<Tensor> frozen =
      dispatch::call<OpId::linear_cross_entropy_grads>({x, w, t, dloss}, without);
  ASSERT_EQ(frozen.size(), 3u);
  EXPECT_FALSE(frozen[2].defined());
  EXPECT_TRUE(testing::all_close(frozen[0], full[0], 0, 0));
  // (threads take chunks as they finish: each thread's share of dx, summed, may round apart)
  EXPECT_TRUE(testing::all_close(frozen[1], full[1], 1e-6, 1e-6));
  const int threads = context::get_num_threads();
  for (DType wt : {DType::bf16, DType::f16})
    for (int th : {1, 3}) {
      SCOPED_TRACE(std::string(dtype_name(wt)) + " " + std::to_string(th) + " threads");
      context::set_num_threads(th);
      std::vector<Tensor> in = {x, w.to(wt), t, dloss};
      std::vector<Tensor> fast = dispatch::call<OpId::linear_cross_entropy_grads>(in, without),
                          composed;
      std::vector<Tensor> head = dispatch::call<OpId::linear_cross_entropy>(in, with_dw),
                          head_composed;
      {
        dispatch::ForceDecomposition force(OpId::linear_cross_entropy_grads);
        composed = dispatch::call<OpId::linear_cross_entropy_grads>(in, without);
      }
      {
        dispatch::ForceDecomposition force(OpId::linear_cross_entropy);
        head_composed = dispatch::call<OpId::linear_cross_entropy>(in, with_dw);
      }
      context::set_num_threads(threads);
      EXPECT_FALSE(fast[2].defined());
      EXPECT_TRUE(testing::all_close(fast[0], composed[0], 2e-5, 2e-5));
      EXPECT_TRUE(testing::all_close(fast[1], composed[1], 2e-5, 2e-5));
      EXPECT_TRUE(testing::all_close(head[0], head_composed[0], 2e-5, 2e-5));
      EXPECT_TRUE(testing::all_close(head[1], head_composed[1], 2e-5, 2e-5));
      // The 16-bit weight's values, not float32's: farther from the float32 weight's loss.
      EXPECT_GT(std::abs(fast[0].item() - full[0].item()), 1e-7);
      try {
        dispatch::call<OpId::linear_cross_entropy_grads>(in, with_dw);
        ADD_FAILURE() << "a 16-bit weight's gradient was made";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("[linear_cross_entropy_grads] a " +
                                             std::string(dtype_name(wt)) +
                                             " weight takes no gradient here"),
                  std::string::npos)
            << e.what();
      }
    }
}

}  // namespace
}  // namespace zenith::graph
