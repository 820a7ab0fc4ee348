#include "backend/cpu/gemm.h"
#include "support/op_check.h"

using namespace zenith;
using namespace zenith::testing;

namespace {

struct MatmulCase {
  Shape a, b;
  bool noncontiguous;
};

// 1-d, 2-d, batched, broadcast batch dims, and strided operands.
const std::vector<MatmulCase> kMatmulCases = {{{4}, {4}, false},
                                              {{3, 4}, {4}, false},
                                              {{4}, {4, 5}, false},
                                              {{3, 4}, {4, 5}, false},
                                              {{3, 4}, {4, 5}, true},
                                              {{2, 3, 4}, {4, 5}, false},
                                              {{3, 4}, {2, 4, 5}, true},
                                              {{2, 1, 3, 4}, {3, 4, 2}, false},
                                              {{2, 3, 4}, {2, 4, 1}, false},
                                              {{1, 4}, {4, 1}, false}};

OpFn matmul_fn() {
  return [](const std::vector<Tensor>& x) { return ops::matmul(x[0], x[1]); };
}

}  // namespace

TEST(Matmul, ForwardAndGradients) {
  for (auto& c : kMatmulCases) {
    SCOPED_TRACE(shape_str(c.a) + " @ " + shape_str(c.b));
    std::vector<Tensor> in = {random_input(c.a, DType::f64, c.noncontiguous),
                              random_input(c.b, DType::f64, c.noncontiguous)};
    EXPECT_TRUE(forward_matches_f64(matmul_fn(), in));
    in[0].requires_grad_();
    in[1].requires_grad_();
    EXPECT_TRUE(gradcheck(matmul_fn(), in));
    EXPECT_TRUE(backward_matches_f64(matmul_fn(), in));
  }
}

TEST(Matmul, OutputShapes) {
  auto shape_of = [](Shape a, Shape b) {
    return ops::matmul(Tensor::zeros(a), Tensor::zeros(b)).shape();
  };
  EXPECT_EQ(shape_of({4}, {4}), Shape{});
  EXPECT_EQ(shape_of({3, 4}, {4}), Shape{3});
  EXPECT_EQ(shape_of({4}, {4, 5}), Shape{5});
  EXPECT_EQ(shape_of({2, 1, 3, 4}, {5, 4, 6}), (Shape{2, 5, 3, 6}));
}

TEST(Matmul, TransposedViewsMatchCopies) {
  Tensor a = Tensor::randn({6, 5}), b = Tensor::randn({7, 6});
  // a^T [5, 6] @ b^T [6, 7]: both transposed views, no copies in the kernel.
  Tensor got = ops::matmul(a.t(), b.t());
  Tensor want = ops::matmul(a.t().contiguous(), b.t().contiguous());
  EXPECT_TRUE(all_close(got, want, 1e-6, 1e-6));
}

TEST(Matmul, ExpandedOperandIsCopiedNotMisread) {
  Tensor row = Tensor::randn({1, 4}, DType::f64);
  Tensor a = row.expand({3, 4});  // row stride 0
  Tensor b = Tensor::randn({4, 2}, DType::f64);
  EXPECT_TRUE(all_close(ops::matmul(a, b), ops::matmul(a.contiguous(), b), 1e-12, 1e-12));
}

TEST(Matmul, SgemmBackendsAgree) {
  Tensor a = Tensor::randn({33, 70}), b = Tensor::randn({70, 17});
  Tensor ref = ops::matmul(a.to(DType::f64), b.to(DType::f64));
  std::string saved = cpu::sgemm_backend();
  for (const char* backend : {"onednn", "openblas"}) {
    cpu::set_sgemm_backend(backend);
    EXPECT_TRUE(all_close(ops::matmul(a, b), ref, 1e-4, 1e-4)) << backend;
    EXPECT_TRUE(all_close(ops::matmul(b.t(), a.t()), ref.t(), 1e-4, 1e-4)) << backend;
  }
  cpu::set_sgemm_backend(saved.c_str());
}

TEST(Matmul, Errors) {
  Tensor a = Tensor::zeros({3, 4}), b = Tensor::zeros({5, 6});
  EXPECT_TRUE(throws_with([&] { ops::matmul(a, b); }, "[matmul] shapes [3, 4] and [5, 6]"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::matmul(a, Tensor::zeros({4, 2}, DType::f64));
      },
      "[matmul] a is float32 but b is float64"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::matmul(Tensor::zeros({2, 3, 4}), Tensor::zeros({3, 4, 5}));
      },
      "cannot be broadcast"));
  EXPECT_TRUE(throws_with(
      [&] { ops::matmul(Tensor::zeros({2}, DType::i64), Tensor::zeros({2}, DType::i64)); },
      "[matmul] expected float32, float64, bfloat16 or float16, got int64"));
}

TEST(Linear, ForwardAndGradients) {
  struct Case {
    Shape x;
    bool bias, noncontiguous;
  };
  for (auto c : std::vector<Case>{{{5, 4}, true, false},
                                  {{5, 4}, false, true},
                                  {{2, 3, 4}, true, true},
                                  {{4}, true, false}}) {
    SCOPED_TRACE(shape_str(c.x));
    std::vector<Tensor> in = {random_input(c.x, DType::f64, c.noncontiguous),
                              random_input({3, 4}, DType::f64, c.noncontiguous),
                              c.bias ? random_input({3}) : Tensor()};
    OpFn f = [](const std::vector<Tensor>& x) { return ops::linear(x[0], x[1], x[2]); };
    EXPECT_TRUE(forward_matches_f64(f, in));
    for (auto& t : in)
      if (t.defined()) t.requires_grad_();
    EXPECT_TRUE(gradcheck(f, in));
    EXPECT_TRUE(backward_matches_f64(f, in));
  }
}

// A frozen weight (a LoRA base) needs no input for its backward: the input is not kept, and the
// input's gradient equals the one a trained weight gives. float32 and bfloat16 weights.
TEST(Linear, FrozenWeightKeepsNoInput) {
  for (DType dtype : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    Tensor leaf = Tensor::randn({2, 5, 8}).requires_grad_();
    Tensor w = Tensor::randn({6, 8}).to(dtype), b = Tensor::randn({6}).to(dtype);
    Tensor dy = Tensor::randn({2, 5, 6});
    auto run = [&](bool train_weight) {
      Tensor weight = w.detach(), bias = b.detach();
      if (train_weight) weight.requires_grad_();
      Tensor x = ops::add(leaf, 1.0);  // an activation nothing else saves
      Tensor y = ops::linear(x, weight, bias);
      const bool kept = kept_for_backward(x);
      leaf.zero_grad();
      y.backward(dy);
      return std::pair{kept, leaf.grad()};
    };
    auto [kept_frozen, grad_frozen] = run(false);
    auto [kept_trained, grad_trained] = run(true);
    EXPECT_FALSE(kept_frozen);
    EXPECT_TRUE(kept_trained);
    EXPECT_TRUE(all_close(grad_frozen, grad_trained, 0, 0));
  }
}

// matmul saves each operand only for the other's gradient; the gradients are dC B^T and A^T dC.
TEST(Matmul, SavesAnOperandOnlyForTheOthersGradient) {
  for (auto [ga, gb] : {std::pair{true, false}, {false, true}, {true, true}}) {
    SCOPED_TRACE(std::to_string(ga) + std::to_string(gb));
    Tensor la = Tensor::randn({3, 4}).requires_grad_(ga);
    Tensor lb = Tensor::randn({4, 5}).requires_grad_(gb);
    Tensor a = ops::add(la, 1.0), b = ops::add(lb, 1.0);
    Tensor y = ops::matmul(a, b);
    EXPECT_EQ(kept_for_backward(a), gb);
    EXPECT_EQ(kept_for_backward(b), ga);
    Tensor dc = Tensor::randn({3, 5});
    y.backward(dc);
    Tensor a1 = ops::add(la.detach(), 1.0), b1 = ops::add(lb.detach(), 1.0);
    if (ga) {
      EXPECT_TRUE(all_close(la.grad(), ops::matmul(dc, b1.t())));
    }
    if (gb) {
      EXPECT_TRUE(all_close(lb.grad(), ops::matmul(a1.t(), dc)));
    }
  }
}

TEST(Linear, MatchesMatmulOfTranspose) {
  Tensor x = Tensor::randn({8, 16}), w = Tensor::randn({4, 16}), b = Tensor::randn({4});
  EXPECT_TRUE(all_close(ops::linear(x, w, b), ops::add(ops::matmul(x, w.t()), b), 1e-5, 1e-5));
}

// Few rows against a transposed weight, large enough to run as column blocks, one per thread
// (gemm.cpp): column counts that split on 16-column boundaries and not, a bias, strided rows of
// the input and of the weight, 1 to 3 threads; all against float64.
TEST(Linear, FewRowsSplitAcrossThreadsMatchFloat64) {
  const int saved = context::get_num_threads();
  for (int threads : {1, 2, 3}) {
    context::set_num_threads(threads);
    for (int64_t outs : {130, 768, 777}) {
      SCOPED_TRACE(std::to_string(threads) + " threads, " + std::to_string(outs) + " outputs");
      Tensor x = Tensor::randn({128, 300}).narrow(1, 0, 288);  // row stride 300
      Tensor w = Tensor::randn({outs, 290}).narrow(1, 1, 288);
      Tensor b = Tensor::randn({outs});
      Tensor ref = ops::linear(x.to(DType::f64), w.to(DType::f64), b.to(DType::f64));
      EXPECT_TRUE(all_close(ops::linear(x, w, b), ref, 1e-4, 1e-4));
      EXPECT_TRUE(all_close(ops::matmul(x, w.t()), ops::linear(x.to(DType::f64), w.to(DType::f64)),
                            1e-4, 1e-4));
    }
  }
  context::set_num_threads(saved);
}

TEST(Linear, Errors) {
  Tensor x = Tensor::zeros({64, 1600}), w = Tensor::zeros({10, 1024});
  EXPECT_TRUE(throws_with([&] { ops::linear(x, w); },
                          "[linear] input has 1600 features, weight expects 1024 (input [64, "
                          "1600], weight [10, 1024])"));
  EXPECT_TRUE(throws_with(
      [&] {
        ops::linear(x, Tensor::zeros({10, 1600}), Tensor::zeros({9}));
      },
      "[linear] expected bias [10], got [9]"));
}

TEST(Matmul, SecondDerivatives) {
  Tensor a = random_input({2, 3, 4}, DType::f64).requires_grad_();
  Tensor b = random_input({4, 2}, DType::f64).requires_grad_();
  // matmul is bilinear: its second derivative is the cross term between a and b.
  EXPECT_TRUE(gradgradcheck([](auto& x) { return ops::matmul(x[0], x[1]); }, {a, b}));
  Tensor x = random_input({3, 4}, DType::f64).requires_grad_();
  Tensor w = random_input({2, 4}, DType::f64).requires_grad_();
  Tensor bias = random_input({2}, DType::f64).requires_grad_();
  EXPECT_TRUE(gradgradcheck([](auto& in) { return ops::tanh(ops::linear(in[0], in[1], in[2])); },
                            {x, w, bias}));
}
