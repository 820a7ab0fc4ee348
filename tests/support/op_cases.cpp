#include "support/op_cases.h"

#include "core/dispatch.h"

namespace zenith::testing {
namespace {

using Check = OpCase::Check;

Tensor grad_input(const Shape& shape, double low = -1.0, double high = 1.0,
                  bool noncontiguous = false) {
  return random_input(shape, DType::f64, noncontiguous, low, high).requires_grad_();
}

// Small integers as float64: comparisons see ties, exactly in float32 too.
Tensor integers(const Shape& shape) { return Tensor::randint(0, 3, shape).to(DType::f64); }

void add_unary(std::vector<OpCase>& cases) {
  struct Unary {
    const char* name;
    OpId op, backward;
    Tensor (*fn)(const Tensor&);
    double low, high;
  };
  const Unary unary[] = {
      {"abs", OpId::abs, OpId::abs_backward, [](const Tensor& x) { return ops::abs(x); }, -2, 2},
      {"square", OpId::square, OpId::square_backward,
       [](const Tensor& x) { return ops::square(x); }, -2, 2},
      {"relu", OpId::relu, OpId::relu_backward, [](const Tensor& x) { return ops::relu(x); }, -2,
       2},
      {"exp", OpId::exp, OpId::exp_backward, [](const Tensor& x) { return ops::exp(x); }, -2, 2},
      {"log", OpId::log, OpId::log_backward, [](const Tensor& x) { return ops::log(x); }, 0.2, 3},
      {"sqrt", OpId::sqrt, OpId::sqrt_backward, [](const Tensor& x) { return ops::sqrt(x); }, 0.2,
       3},
      {"rsqrt", OpId::rsqrt, OpId::rsqrt_backward, [](const Tensor& x) { return ops::rsqrt(x); },
       0.2, 3},
      {"tanh", OpId::tanh, OpId::tanh_backward, [](const Tensor& x) { return ops::tanh(x); }, -2,
       2},
      {"sigmoid", OpId::sigmoid, OpId::sigmoid_backward,
       [](const Tensor& x) { return ops::sigmoid(x); }, -3, 3},
      {"silu", OpId::silu, OpId::silu_backward, [](const Tensor& x) { return ops::silu(x); }, -3,
       3},
      {"gelu", OpId::gelu, OpId::gelu_backward, [](const Tensor& x) { return ops::gelu(x); }, -3,
       3},
      {"gelu_tanh", OpId::gelu_tanh, OpId::gelu_tanh_backward,
       [](const Tensor& x) { return ops::gelu(x, true); }, -3, 3},
      {"erf", OpId::erf, OpId::erf_backward, [](const Tensor& x) { return ops::erf(x); }, -2, 2},
  };
  for (const Unary& u : unary) {
    auto fn = u.fn;
    cases.push_back({u.name,
                     {u.op, u.backward},
                     [fn](const std::vector<Tensor>& x) { return fn(x[0]); },
                     {grad_input({2, 3, 4}, u.low, u.high, /*noncontiguous=*/true)}});
  }
  cases.push_back({"neg",
                   {OpId::neg},
                   [](const std::vector<Tensor>& x) { return ops::neg(x[0]); },
                   {grad_input({5})}});
}

void add_binary(std::vector<OpCase>& cases) {
  struct Binary {
    const char* name;
    OpId op;
    Tensor (*fn)(const Tensor&, const Tensor&);
    double low, high;  // of b (pow: of a)
  };
  const Binary binary[] = {
      {"add", OpId::add, [](const Tensor& a, const Tensor& b) { return ops::add(a, b); }, -1, 1},
      {"sub", OpId::sub, [](const Tensor& a, const Tensor& b) { return ops::sub(a, b); }, -1, 1},
      {"mul", OpId::mul, [](const Tensor& a, const Tensor& b) { return ops::mul(a, b); }, -1, 1},
      {"div", OpId::div, [](const Tensor& a, const Tensor& b) { return ops::div(a, b); }, 0.5, 2},
      {"maximum", OpId::maximum,
       [](const Tensor& a, const Tensor& b) { return ops::maximum(a, b); }, -1, 1},
      {"minimum", OpId::minimum,
       [](const Tensor& a, const Tensor& b) { return ops::minimum(a, b); }, -1, 1},
  };
  for (const Binary& b : binary) {
    auto fn = b.fn;
    cases.push_back({std::string(b.name) + " broadcast",
                     {b.op},
                     [fn](const std::vector<Tensor>& x) { return fn(x[0], x[1]); },
                     {grad_input({2, 3}), grad_input({3}, b.low, b.high)}});
  }
  cases.push_back({"pow",
                   {OpId::pow},
                   [](const std::vector<Tensor>& x) { return ops::pow(x[0], x[1]); },
                   {grad_input({2, 3}, 0.5, 2), grad_input({2, 3})}});
  cases.push_back({"pow scalar",
                   {OpId::pow_scalar},
                   [](const std::vector<Tensor>& x) { return ops::pow(x[0], 2.5); },
                   {grad_input({2, 3}, 0.5, 2)}});
}

void add_compare(std::vector<OpCase>& cases) {
  struct Compare {
    const char* name;
    OpId op;
    Tensor (*fn)(const Tensor&, const Tensor&);
  };
  const Compare compare[] = {
      {"eq", OpId::eq, [](const Tensor& a, const Tensor& b) { return ops::eq(a, b); }},
      {"ne", OpId::ne, [](const Tensor& a, const Tensor& b) { return ops::ne(a, b); }},
      {"lt", OpId::lt, [](const Tensor& a, const Tensor& b) { return ops::lt(a, b); }},
      {"le", OpId::le, [](const Tensor& a, const Tensor& b) { return ops::le(a, b); }},
      {"gt", OpId::gt, [](const Tensor& a, const Tensor& b) { return ops::gt(a, b); }},
      {"ge", OpId::ge, [](const Tensor& a, const Tensor& b) { return ops::ge(a, b); }},
  };
  for (const Compare& c : compare) {
    auto fn = c.fn;
    cases.push_back({c.name,
                     {c.op, OpId::copy},
                     [fn](const std::vector<Tensor>& x) { return fn(x[0], x[1]).to(x[0].dtype()); },
                     {integers({3, 4}), integers({4})},
                     Check::kForward});
  }
  cases.push_back({"where",
                   {OpId::where, OpId::gt},
                   [](const std::vector<Tensor>& x) {
                     return ops::where(ops::gt(x[2], Tensor::scalar(0.0, x[2].dtype())), x[0],
                                       x[1]);
                   },
                   {grad_input({2, 3}), grad_input({3}), random_input({2, 3})}});
  cases.push_back(
      {"masked_fill",
       {OpId::masked_fill},
       [](const std::vector<Tensor>& x) {
         Tensor mask = Tensor::from_vector(std::vector<double>{1, 0, 1}, {3}, DType::b8);
         return ops::masked_fill(x[0], mask, 2.0);
       },
       {grad_input({2, 3})}});
}

void add_reduce(std::vector<OpCase>& cases) {
  cases.push_back({"sum dims",
                   {OpId::sum},
                   [](const std::vector<Tensor>& x) {
                     return ops::sum(x[0], {0, 2});
                   },
                   {grad_input({2, 3, 4}, -1, 1, true)}});
  cases.push_back({"var",
                   {OpId::var},
                   [](const std::vector<Tensor>& x) { return ops::var(x[0], {1}); },
                   {grad_input({3, 5})}});
  cases.push_back({"max dim",
                   {OpId::max_dim, OpId::scatter_add},
                   [](const std::vector<Tensor>& x) { return ops::max(x[0], 1); },
                   {grad_input({3, 5})}});
  cases.push_back({"min dim",
                   {OpId::min_dim, OpId::scatter_add},
                   [](const std::vector<Tensor>& x) { return ops::min(x[0], 0, true); },
                   {grad_input({3, 5})}});
  cases.push_back({"max all",
                   {OpId::max_all},
                   [](const std::vector<Tensor>& x) { return ops::max(x[0]); },
                   {grad_input({3, 5})}});
  cases.push_back({"min all",
                   {OpId::min_all},
                   [](const std::vector<Tensor>& x) { return ops::min(x[0]); },
                   {grad_input({3, 5})}});
}

void add_linear_algebra(std::vector<OpCase>& cases) {
  cases.push_back({"matmul batched",
                   {OpId::matmul},
                   [](const std::vector<Tensor>& x) { return ops::matmul(x[0], x[1]); },
                   {grad_input({2, 3, 4}), grad_input({4, 5})}});
  cases.push_back({"linear",
                   {OpId::linear, OpId::matmul, OpId::sum},
                   [](const std::vector<Tensor>& x) { return ops::linear(x[0], x[1], x[2]); },
                   {grad_input({4, 3}), grad_input({5, 3}), grad_input({5})}});
}

void add_conv(std::vector<OpCase>& cases) {
  const std::vector<OpId> conv = {OpId::conv2d, OpId::conv2d_backward_data,
                                  OpId::conv2d_backward_weights};
  struct Conv {
    const char* name;
    Shape x, w;
    ops::Conv2dOptions options;
  };
  const Conv convs[] = {
      // (8 + 2 - 3) % 2 != 0: the last input row reaches no output.
      {"conv2d stride 2 pad 1 groups 2",
       {2, 4, 8, 7},
       {6, 2, 3, 3},
       {.stride = {2, 2}, .padding = {1, 1}, .groups = 2}},
      {"conv2d same dilation 2",
       {1, 2, 7, 6},
       {3, 2, 2, 3},
       {.padding_mode = "same", .dilation = {2, 1}}},
      {"conv2d asymmetric padding stride 3",
       {2, 3, 9, 8},
       {2, 3, 4, 2},
       {.stride = {3, 2}, .padding = {2, 0, 1, 3}}},
  };
  for (const Conv& c : convs) {
    ops::Conv2dOptions options = c.options;
    cases.push_back(
        {c.name,
         conv,
         [options](const std::vector<Tensor>& x) { return ops::conv2d(x[0], x[1], x[2], options); },
         {grad_input(c.x), grad_input(c.w), grad_input({c.w[0]})}});
  }
}

void add_pool(std::vector<OpCase>& cases) {
  cases.push_back(
      {"max_pool2d 3x3 stride 2 pad 1",
       {OpId::max_pool2d, OpId::max_pool2d_backward},
       [](const std::vector<Tensor>& x) { return ops::max_pool2d(x[0], {3}, {2}, {1}); },
       {grad_input({2, 3, 7, 6})}});
  cases.push_back({"avg_pool2d include pad",
                   {OpId::avg_pool2d, OpId::avg_pool2d_backward},
                   [](const std::vector<Tensor>& x) {
                     return ops::avg_pool2d(x[0], {3, 2}, {2, 2}, {1, 1}, true);
                   },
                   {grad_input({2, 3, 7, 6})}});
  cases.push_back(
      {"avg_pool2d exclude pad",
       {OpId::avg_pool2d, OpId::avg_pool2d_backward},
       [](const std::vector<Tensor>& x) { return ops::avg_pool2d(x[0], {3}, {2}, {1}, false); },
       {grad_input({1, 2, 6, 7})}});
  cases.push_back({"adaptive_avg_pool2d uneven",
                   {OpId::adaptive_avg_pool2d, OpId::adaptive_avg_pool2d_backward},
                   [](const std::vector<Tensor>& x) {
                     return ops::adaptive_avg_pool2d(x[0], {3, 2});
                   },
                   {grad_input({2, 3, 7, 5})}});
}

void add_norms(std::vector<OpCase>& cases) {
  const std::vector<OpId> bn = {OpId::batch_norm, OpId::batch_norm_backward};
  for (bool training : {true, false}) {
    cases.push_back({training ? "batch_norm training" : "batch_norm eval",
                     bn,
                     [training](const std::vector<Tensor>& x) {
                       return ops::batch_norm(x[0], x[1], x[2], x[3], x[4], training, 0.1, 1e-5);
                     },
                     {grad_input({3, 4, 3, 2}), grad_input({4}, 0.5, 1.5), grad_input({4}),
                      random_input({4}), random_input({4}, DType::f64, false, 0.5, 1.5)},
                     Check::kGradient,
                     1e-4,
                     1e-4});
  }
  cases.push_back({"layer_norm affine",
                   {OpId::layer_norm, OpId::layer_norm_backward},
                   [](const std::vector<Tensor>& x) {
                     return ops::layer_norm(x[0], {2, 3}, x[1], x[2]);
                   },
                   {grad_input({4, 2, 3}), grad_input({2, 3}), grad_input({2, 3})}});
  cases.push_back({"rms_norm affine",
                   {OpId::rms_norm, OpId::rms_norm_backward},
                   [](const std::vector<Tensor>& x) { return ops::rms_norm(x[0], {5}, x[1]); },
                   {grad_input({3, 5}), grad_input({5})}});
  cases.push_back({"dropout",
                   {OpId::dropout, OpId::mul},
                   [](const std::vector<Tensor>& x) { return ops::dropout(x[0], 0.3, true); },
                   {grad_input({4, 5})},
                   Check::kRun});
}

void add_transformer(std::vector<OpCase>& cases) {
  const std::vector<OpId> attention = {OpId::attention, OpId::attention_backward};
  cases.push_back({"attention gqa causal padding, T != S",
                   attention,
                   [](const std::vector<Tensor>& x) {
                     ops::AttentionOptions o{.causal = true};
                     o.key_padding_mask = Tensor::from_vector(
                         std::vector<int64_t>{1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0}, {2, 6});
                     return ops::scaled_dot_product_attention(x[0], x[1], x[2], o);
                   },
                   {grad_input({2, 4, 3, 5}), grad_input({2, 2, 6, 5}, -1, 1, true),
                    grad_input({2, 2, 6, 3})}});
  Tensor mask = random_input({1, 2, 4, 5});
  cases.push_back({"attention additive mask, scale",
                   attention,
                   [mask](const std::vector<Tensor>& x) {
                     ops::AttentionOptions o{.attn_mask = mask, .scale = 0.7};
                     return ops::scaled_dot_product_attention(x[0], x[1], x[2], o);
                   },
                   {grad_input({1, 2, 4, 3}, -1, 1, true), grad_input({1, 2, 5, 3}),
                    grad_input({1, 2, 5, 3})}});
  auto [cos, sin] = ops::rope_cos_sin(
      ops::rope_inv_freq(6, {.theta = 100.0}),
      Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 5, 3, 9}, {2, 3}), DType::f64);
  cases.push_back(
      {"rotary_embedding",
       {OpId::rotary_embedding, OpId::rotary_embedding_backward},
       [cos, sin](const std::vector<Tensor>& x) { return ops::rotary_embedding(x[0], cos, sin); },
       {grad_input({2, 2, 3, 6}, -1, 1, true)}});
  cases.push_back({"swiglu",
                   {OpId::swiglu, OpId::swiglu_backward},
                   [](const std::vector<Tensor>& x) { return ops::swiglu(x[0], x[1]); },
                   {grad_input({3, 5}, -3, 3, true), grad_input({3, 5})}});
  // The float64 forward multiplies by the dequantized weight exactly; the float32 one quantizes
  // the activations to int8 per block of 32 (src/backend/cpu/quant_kernels.h): the tolerance.
  QuantizedWeight q4 = quantize_weight(random_input({5, 64}, DType::f32), QuantFormat::q4_0);
  cases.push_back({"quantized_linear",
                   {OpId::quantized_linear},
                   [q4](const std::vector<Tensor>& x) { return ops::quantized_linear(x[0], q4); },
                   {grad_input({2, 3, 64})},
                   Check::kGradient,
                   2e-2,
                   2e-2});
  // Inference only (no gradient): 2 sequences over shuffled blocks of 3 positions, GQA 4 / 2.
  auto i32 = [](std::vector<int64_t> v, const Shape& shape) {
    return Tensor::from_vector(v, shape).to(DType::i32);
  };
  const Tensor table = i32({5, 0, 3, 2, 4, 1}, {2, 3});
  const Tensor seq = i32({0, 1, 1, 0}, {4}), pos = i32({7, 2, 3, 8}, {4});
  cases.push_back({"paged_attention gqa, 2 sequences",
                   {OpId::paged_attention},
                   [table, seq, pos](const std::vector<Tensor>& x) {
                     return ops::paged_attention(x[0], x[1], x[2], table, seq, pos);
                   },
                   {random_input({1, 4, 4, 5}, DType::f64, true), random_input({6, 2, 3, 5}),
                    random_input({6, 2, 3, 5})},
                   Check::kForward});
}

void add_softmax_and_losses(std::vector<OpCase>& cases) {
  cases.push_back({"softmax dim 1 of 3",
                   {OpId::softmax, OpId::softmax_backward},
                   [](const std::vector<Tensor>& x) { return ops::softmax(x[0], 1); },
                   {grad_input({2, 4, 3}, -2, 2)}});
  cases.push_back({"log_softmax last dim",
                   {OpId::log_softmax, OpId::log_softmax_backward},
                   [](const std::vector<Tensor>& x) { return ops::log_softmax(x[0], -1); },
                   {grad_input({3, 5}, -2, 2)}});
  struct Ce {
    const char* name;
    const char* reduction;
    double smoothing;
  };
  for (const Ce& c : {Ce{"cross_entropy mean smoothed", "mean", 0.1},
                      Ce{"cross_entropy none", "none", 0.0}, Ce{"cross_entropy sum", "sum", 0.2}}) {
    std::string reduction = c.reduction;
    double smoothing = c.smoothing;
    cases.push_back({c.name,
                     {OpId::cross_entropy_rows, OpId::cross_entropy_rows_backward},
                     [reduction, smoothing](const std::vector<Tensor>& x) {
                       // Sample 2 is ignored.
                       Tensor t = Tensor::from_vector(std::vector<int64_t>{1, 0, -100, 3, 2}, {5});
                       return ops::cross_entropy(x[0], t, reduction, -100, smoothing);
                     },
                     {grad_input({5, 4}, -2, 2)}});
  }
}

void add_index(std::vector<OpCase>& cases) {
  cases.push_back(
      {"gather",
       {OpId::gather, OpId::scatter_add},
       [](const std::vector<Tensor>& x) {
         Tensor idx = Tensor::from_vector(std::vector<int64_t>{0, 2, 2, 1, 0, 0}, {3, 2});
         return ops::gather(x[0], 1, idx);
       },
       {grad_input({3, 4})}});
  cases.push_back({"index_select",
                   {OpId::gather, OpId::scatter_add},
                   [](const std::vector<Tensor>& x) {
                     Tensor idx = Tensor::from_vector(std::vector<int64_t>{2, 0, 2}, {3});
                     return ops::index_select(x[0], 0, idx);
                   },
                   {grad_input({3, 4})}});
  cases.push_back(
      {"embedding repeated rows",
       {OpId::embedding, OpId::embedding_backward},
       [](const std::vector<Tensor>& x) {
         Tensor idx = Tensor::from_vector(std::vector<int64_t>{4, 0, 4, 2, 1, 4}, {2, 3});
         return ops::embedding(x[0], idx);
       },
       {grad_input({6, 3})}});
  cases.push_back({"cat and stack",
                   {OpId::cat},
                   [](const std::vector<Tensor>& x) {
                     return ops::stack({ops::cat({x[0], x[1]}, 1), x[2]}, 0);
                   },
                   {grad_input({2, 2}), grad_input({2, 1}), grad_input({2, 3})}});
}

void add_copies(std::vector<OpCase>& cases) {
  cases.push_back({"copy: contiguous and cast",
                   {OpId::copy},
                   [](const std::vector<Tensor>& x) {
                     return x[0].transpose(0, 1).contiguous().to(DType::f16).to(x[0].dtype());
                   },
                   {grad_input({3, 4})},
                   Check::kForward,
                   1e-3,
                   1e-3});
  cases.push_back({"copy_ and fill_",
                   {OpId::copy_, OpId::fill_},
                   [](const std::vector<Tensor>& x) {
                     Tensor out = Tensor::full({2, 3}, 0.5, x[0].dtype());
                     out.slice(1, 1, 3).copy_(x[0]);
                     return out;
                   },
                   {random_input({2, 2})},
                   Check::kForward});
  // A oneDNN convolution keeps its float32 output in a blocked layout; reading it converts.
  cases.push_back(
      {"to_plain",
       {OpId::to_plain},
       [](const std::vector<Tensor>& x) {
         Tensor y = ops::conv2d(x[0], x[1]);
         ZENITH_CHECK(y.has_layout(), "[op_cases] expected a blocked conv output");
         return y.contiguous();
       },
       {random_input({2, 8, 6, 6}, DType::f32), random_input({16, 8, 3, 3}, DType::f32)},
       Check::kRun});
}

void add_optimizer_updates(std::vector<OpCase>& cases) {
  cases.push_back({"momentum_update nesterov",
                   {OpId::momentum_update},
                   [](const std::vector<Tensor>& x) {
                     Tensor p = x[0].detach().clone(), v = x[2].detach().clone();
                     ops::momentum_update(p, x[1].detach().contiguous(), v, 0.1, 0.9, 0.01, true);
                     return ops::cat({p, v}, 0);
                   },
                   {random_input({4}), random_input({4}), random_input({4})},
                   Check::kForward});
  cases.push_back({"adam_update decoupled",
                   {OpId::adam_update},
                   [](const std::vector<Tensor>& x) {
                     Tensor p = x[0].detach().clone(), m = x[2].detach().clone();
                     Tensor v = x[3].detach().clone();
                     ops::adam_update(p, x[1].detach().contiguous(), m, v, 0.01, 0.9, 0.999, 1e-8,
                                      0.1, true, 3);
                     return ops::cat({p, m, v}, 0);
                   },
                   {random_input({4}), random_input({4}), random_input({4}),
                    random_input({4}, DType::f64, false, 0.1, 1.0)},
                   Check::kForward});
}

// Graph mode's fused ops (src/ops/fused.cpp): no public function and no gradient (a captured
// graph is already differentiated); dispatched directly. tests/graph/fused_ops_test.cpp
// compares their CPU kernels with their decompositions.
void add_graph_fused(std::vector<OpCase>& cases) {
  cases.push_back({"conv2d_relu",
                   {OpId::conv2d_relu},
                   [](const std::vector<Tensor>& x) {
                     return dispatch::call1<OpId::conv2d_relu>({x[0], x[1], x[2]},
                                                               {.input_shape = {2, 3, 5, 5},
                                                                .weight_shape = {4, 3, 3, 3},
                                                                .output_shape = {2, 4, 5, 5},
                                                                .pad_begin = {1, 1},
                                                                .pad_end = {1, 1}});
                   },
                   {random_input({2, 3, 5, 5}), random_input({4, 3, 3, 3}), random_input({4})},
                   Check::kRun});
  cases.push_back(
      {"batch_norm_relu and its backward",
       {OpId::batch_norm_relu, OpId::batch_norm_relu_backward},
       [](const std::vector<Tensor>& x) {
         Tensor rm = x[3].detach().clone(), rv = x[4].detach().clone();
         const BatchNormAttrs a{.training = true, .momentum = 0.1, .eps = 1e-5};
         auto f = dispatch::call<OpId::batch_norm_relu>({x[0], x[1], x[2], rm, rv}, a);
         auto b = dispatch::call<OpId::batch_norm_relu_backward>(
             {x[5], x[0], x[1], f[1], f[2], f[0]}, a);
         return ops::cat({f[0].reshape({-1}), b[0].reshape({-1}), b[1], b[2]}, 0);
       },
       {random_input({3, 4, 3, 2}), random_input({4}), random_input({4}), random_input({4}),
        random_input({4}, DType::f64, false, 0.5, 1.5), random_input({3, 4, 3, 2})},
       Check::kRun});
  // 16 channels: zenith's 2x2 kernel in float32 (nChw16c or nChw8c), the composed ops in float64;
  // 7x5: a row and a column in no window.
  cases.push_back(
      {"max_pool2d_relu and its backward",
       {OpId::max_pool2d_relu, OpId::max_pool2d_relu_backward},
       [](const std::vector<Tensor>& x) {
         const Pool2dAttrs a{.kernel = {2, 2},
                             .stride = {2, 2},
                             .padding = {0, 0},
                             .output_size = {3, 2},
                             .training = true};
         auto f = dispatch::call<OpId::max_pool2d_relu>({x[0]}, a);
         Tensor dx = dispatch::call1<OpId::max_pool2d_relu_backward>({x[1], x[0], f[1]}, a);
         Tensor y = dispatch::call1<OpId::to_plain>({f[0]});
         dx = dispatch::call1<OpId::to_plain>({dx});
         return ops::cat({y.reshape({-1}), dx.reshape({-1})}, 0);
       },
       {random_input({2, 16, 7, 5}), random_input({2, 16, 3, 2})},
       Check::kRun});
  // 3 -> 16 channels, 9x8: the convolution's 7x6 output loses its last row to the pooling;
  // the fused kernel in float32, the composed ops in float64.
  cases.push_back({"conv2d_relu_max_pool and its backward",
                   {OpId::conv2d_relu_max_pool, OpId::conv2d_relu_max_pool_backward},
                   [](const std::vector<Tensor>& x) {
                     const Conv2dAttrs a{.input_shape = {2, 3, 9, 8},
                                         .weight_shape = {16, 3, 3, 3},
                                         .output_shape = {2, 16, 7, 6},
                                         .bias = true};
                     auto f = dispatch::call<OpId::conv2d_relu_max_pool>({x[0], x[1], x[2]}, a);
                     auto g = dispatch::call<OpId::conv2d_relu_max_pool_backward>(
                         {x[3], x[0], x[1], x[2], f[1]}, a);
                     Tensor y = dispatch::call1<OpId::to_plain>({f[0]});
                     return ops::cat({y.reshape({-1}), g[0].reshape({-1}), g[1]}, 0);
                   },
                   {random_input({2, 3, 9, 8}), random_input({16, 3, 3, 3}), random_input({16}),
                    random_input({2, 16, 3, 3})},
                   Check::kRun});
  cases.push_back({"fused_elementwise exp(a * b) + c, summed",
                   {OpId::fused_elementwise},
                   [](const std::vector<Tensor>& x) {
                     FusedElementwiseAttrs a;
                     a.num_inputs = 3;
                     a.shape = {4, 5};
                     a.code = {int64_t(OpId::mul), 3, 0, 1, 0, int64_t(OpId::exp), 4, 3, -1, 0,
                               int64_t(OpId::add), 5, 4, 2, 0};
                     a.outputs = {5, 5};
                     a.sum_last = true;
                     auto out = dispatch::call<OpId::fused_elementwise>({x[0], x[1], x[2]}, a);
                     return ops::cat({out[0].reshape({-1}), out[1].reshape({1})}, 0);
                   },
                   {random_input({4, 5}), random_input({4, 5}), random_input({5})},
                   Check::kRun});
  cases.push_back({"multi_momentum_update",
                   {OpId::multi_momentum_update},
                   [](const std::vector<Tensor>& x) {
                     Tensor p0 = x[0].detach().clone(), p1 = x[1].detach().clone();
                     Tensor v0 = x[4].detach().clone(), v1 = x[5].detach().clone();
                     dispatch::call<OpId::multi_momentum_update>(
                         {p0, p1, x[2].detach(), x[3].detach(), v0, v1},
                         {.count = 2, .lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
                     return ops::cat({p0, p1, v0, v1}, 0);
                   },
                   {random_input({4}), random_input({3}), random_input({4}), random_input({3}),
                    random_input({4}), random_input({3})},
                   Check::kRun});
  cases.push_back(
      {"multi_adam_update",
       {OpId::multi_adam_update},
       [](const std::vector<Tensor>& x) {
         Tensor p0 = x[0].detach().clone(), p1 = x[1].detach().clone();
         Tensor m0 = x[4].detach().clone(), m1 = x[5].detach().clone();
         Tensor v0 = x[6].detach().clone(), v1 = x[7].detach().clone();
         dispatch::call<OpId::multi_adam_update>(
             {p0, p1, x[2].detach(), x[3].detach(), m0, m1, v0, v1},
             {.count = 2, .lr = 0.01, .weight_decay = 0.1, .decoupled = true, .step = 3});
         return ops::cat({p0, p1, m0, m1, v0, v1}, 0);
       },
       {random_input({4}), random_input({3}), random_input({4}), random_input({3}),
        random_input({4}), random_input({3}), random_input({4}, DType::f64, false, 0.1, 1.0),
        random_input({3}, DType::f64, false, 0.1, 1.0)},
       Check::kRun});
  // The residual add and the next RMSNorm, and their backward: against float64 (kForward), equal
  // to their decompositions (tests/graph/fused_ops_test.cpp, also finite differences there).
  cases.push_back(
      {"add_rms_norm",
       {OpId::add_rms_norm},
       [](const std::vector<Tensor>& x) {
         auto out = dispatch::call<OpId::add_rms_norm>({x[0], x[1], x[2]}, {.D = 5, .eps = 1e-5});
         return ops::cat({out[0].reshape({-1}), out[1].reshape({-1}), out[2]}, 0);
       },
       {random_input({3, 5}), random_input({3, 5}), random_input({5})},
       Check::kForward});
  cases.push_back(
      {"rms_norm_add_backward",
       {OpId::rms_norm_add_backward},
       [](const std::vector<Tensor>& x) {
         const LayerNormAttrs a{.D = 5, .eps = 1e-5};
         Tensor rstd = dispatch::call<OpId::rms_norm>({x[1], x[2]}, a)[1];
         auto g = dispatch::call<OpId::rms_norm_add_backward>({x[0], x[1], x[2], rstd, x[3]}, a);
         return ops::cat({g[0].reshape({-1}), g[1]}, 0);
       },
       {random_input({3, 5}), random_input({3, 5}), random_input({5}), random_input({3, 5})},
       Check::kForward});
  // A gradient sum's matmul onto the sum so far: a transposed operand (a gradient's view), c in
  // the shape the sum has ([2, 2, 5] from [4, 3] x [3, 5]).
  cases.push_back({"matmul_add transposed a",
                   {OpId::matmul_add},
                   [](const std::vector<Tensor>& x) {
                     return dispatch::call1<OpId::matmul_add>({x[0].transpose(0, 1), x[1], x[2]});
                   },
                   {random_input({3, 4}), random_input({3, 5}), random_input({2, 2, 5})},
                   Check::kForward});
  cases.push_back(
      {"embedding_backward_add repeated rows",
       {OpId::embedding_backward_add},
       [](const std::vector<Tensor>& x) {
         Tensor idx = Tensor::from_vector(std::vector<int64_t>{1, 3, 1, 0}, {2, 2});
         return dispatch::call1<OpId::embedding_backward_add>({x[0], idx, x[1]}, {.num_rows = 5});
       },
       {random_input({2, 2, 3}), random_input({5, 3})},
       Check::kForward});
  // The output layer and its loss: loss and dlogits against float64 (kForward) for each
  // reduction, with label smoothing and an ignored row; equal to the decomposition and to finite
  // differences in tests/graph/fused_ops_test.cpp.
  for (const Reduction r : {Reduction::kMean, Reduction::kSum, Reduction::kNone}) {
    cases.push_back({std::string("linear_cross_entropy ") + (r == Reduction::kMean ? "mean smoothed"
                                                             : r == Reduction::kSum ? "sum"
                                                                                    : "none"),
                     {OpId::linear_cross_entropy},
                     [r](const std::vector<Tensor>& x) {
                       Tensor t = Tensor::from_vector(std::vector<int64_t>{1, 6, -100, 3, 0}, {5});
                       Tensor dloss =
                           r == Reduction::kNone ? x[2] : x[2].slice(0, 0, 1).reshape({});
                       auto out = dispatch::call<OpId::linear_cross_entropy>(
                           {x[0], x[1], t, dloss},
                           {.label_smoothing = r == Reduction::kMean ? 0.1 : 0.0, .reduction = r});
                       return ops::cat({out[0].reshape({-1}), out[1].reshape({-1})}, 0);
                     },
                     {random_input({5, 3}), random_input({7, 3}), random_input({5})},
                     Check::kForward});
    // With the gradient's two matmuls: loss, dx and dweight.
    cases.push_back(
        {std::string("linear_cross_entropy_grads ") + (r == Reduction::kMean  ? "mean smoothed"
                                                       : r == Reduction::kSum ? "sum"
                                                                              : "none"),
         {OpId::linear_cross_entropy_grads},
         [r](const std::vector<Tensor>& x) {
           Tensor t = Tensor::from_vector(std::vector<int64_t>{1, 6, -100, 3, 0}, {5});
           Tensor dloss = r == Reduction::kNone ? x[2] : x[2].slice(0, 0, 1).reshape({});
           auto out = dispatch::call<OpId::linear_cross_entropy_grads>(
               {x[0], x[1], t, dloss},
               {.label_smoothing = r == Reduction::kMean ? 0.1 : 0.0, .reduction = r});
           return ops::cat({out[0].reshape({-1}), out[1].reshape({-1}), out[2].reshape({-1})}, 0);
         },
         {random_input({5, 3}), random_input({7, 3}), random_input({5})},
         Check::kForward});
  }
}

std::vector<OpCase> build() {
  manual_seed(20240611);
  std::vector<OpCase> cases;
  add_unary(cases);
  add_binary(cases);
  add_compare(cases);
  add_reduce(cases);
  add_linear_algebra(cases);
  add_conv(cases);
  add_pool(cases);
  add_norms(cases);
  add_transformer(cases);
  add_softmax_and_losses(cases);
  add_index(cases);
  add_copies(cases);
  add_optimizer_updates(cases);
  add_graph_fused(cases);
  return cases;
}

}  // namespace

const std::vector<OpCase>& op_cases() {
  static const std::vector<OpCase> cases = build();
  return cases;
}

}  // namespace zenith::testing
