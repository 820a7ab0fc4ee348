#include <gtest/gtest.h>

#include "zenith/zenith.h"

using namespace zenith;

TEST(Tensor, FactoriesAndMetadata) {
  Tensor t = Tensor::zeros({2, 3});
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.strides(), (Shape{3, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.dtype(), DType::f32);
  Tensor f = Tensor::full({2}, 2.5, DType::f64);
  EXPECT_EQ(f.to_double_vector(), (std::vector<double>{2.5, 2.5}));
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = Tensor::arange(12, DType::f32).reshape({3, 4});
  Tensor tt = t.t();
  EXPECT_EQ(tt.shape(), (Shape{4, 3}));
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(tt.storage(), t.storage());
  EXPECT_EQ(tt.contiguous().to_float_vector(),
            (std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  Tensor s = t.slice(1, 1, 4, 2);
  EXPECT_EQ(s.to_float_vector(), (std::vector<float>{1, 3, 5, 7, 9, 11}));
  Tensor e = Tensor::arange(3, DType::f32).reshape({3, 1}).expand({3, 2});
  EXPECT_EQ(e.to_float_vector(), (std::vector<float>{0, 0, 1, 1, 2, 2}));
  s.fill_(-1);
  EXPECT_EQ(t.select(0, 0).to_float_vector(), (std::vector<float>{0, -1, 2, -1}));
}

TEST(Tensor, CastsRoundTrip) {
  Tensor t = Tensor::from_vector(std::vector<float>{1.5f, -2.25f, 3.0f}, {3});
  for (DType d : {DType::f64, DType::f16, DType::bf16}) {
    EXPECT_EQ(t.to(d).to(DType::f32).to_float_vector(), t.to_float_vector()) << dtype_name(d);
  }
  EXPECT_EQ(t.to(DType::i64).to_int_vector(), (std::vector<int64_t>{1, -2, 3}));
}

TEST(Tensor, ReshapeErrorsNameShapes) {
  Tensor t = Tensor::zeros({2, 3});
  try {
    t.reshape({4, 2});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[reshape]"), std::string::npos);
  }
}

TEST(Tensor, ExternalStorageIsReleasedOnceWithItsLastTensor) {
  std::vector<float> memory = {1, 2, 3, 4};
  int released = 0;
  {
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = std::make_shared<Storage>(memory.data(), memory.size() * sizeof(float), kCPU,
                                              [&released] { ++released; });
    impl->shape = {2, 2};
    impl->strides = {2, 1};
    Tensor t(impl);
    Tensor doubled = ops::mul(t, 2.0);
    EXPECT_EQ(doubled.to_float_vector(), (std::vector<float>{2, 4, 6, 8}));
    Tensor view = t.t();
    t = Tensor();
    EXPECT_EQ(released, 0);  // the view still uses the memory
    view.fill_(0.0);
    EXPECT_EQ(memory, (std::vector<float>{0, 0, 0, 0}));
  }
  EXPECT_EQ(released, 1);
  EXPECT_THROW(Storage(memory.data(), 4, kCPU, nullptr), Error);
}

TEST(Autograd, BroadcastAddMulBackward) {
  Tensor a = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_vector(std::vector<double>{10, 20, 30}, {3});
  a.requires_grad_();
  b.requires_grad_();
  Tensor y = ops::sum(ops::mul(ops::add(a, b), a));
  y.backward();
  // dy/da = 2a + b, dy/db = sum over rows of a
  EXPECT_EQ(a.grad().to_double_vector(), (std::vector<double>{12, 24, 36, 18, 30, 42}));
  EXPECT_EQ(b.grad().to_double_vector(), (std::vector<double>{5, 7, 9}));
  // Gradients accumulate across backward calls.
  ops::sum(a).backward();
  EXPECT_EQ(a.grad().to_double_vector(), (std::vector<double>{13, 25, 37, 19, 31, 43}));
}

TEST(Autograd, NoGradAndErrors) {
  Tensor a = Tensor::ones({2}).requires_grad_();
  {
    NoGradGuard g;
    Tensor y = ops::mul(a, 2.0);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_THROW(ops::sum(y).backward(), Error);
  }
}
