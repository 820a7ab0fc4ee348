// Tensor-parallel layers and their collectives (see tensor_parallel.h).
#include "distributed/tensor_parallel.h"

#include <cmath>
#include <limits>

#include "zenith/autograd.h"
#include "zenith/ops.h"

namespace zenith::distributed {
namespace {

namespace comm = communication;

Tensor reduced(const Tensor& x, const comm::Group& group) {
  Tensor y = x.contiguous().clone();
  comm::all_reduce(y, comm::ReduceOp::SUM, group);
  return y;
}

int64_t wrap_dim(const Tensor& x, int64_t dim) { return dim < 0 ? dim + x.dim() : dim; }

// [size, *shape] (every rank's chunk) -> the chunks concatenated along `dim` of shape.
Tensor concat_chunks(const Tensor& gathered, int64_t dim) {
  const int64_t n = gathered.dim() - 1;
  std::vector<int64_t> order;
  for (int64_t i = 1; i <= dim; ++i) order.push_back(i);
  order.push_back(0);
  for (int64_t i = dim + 1; i <= n; ++i) order.push_back(i);
  Shape shape(gathered.shape().begin() + 1, gathered.shape().end());
  shape[size_t(dim)] *= gathered.size(0);
  return gathered.permute(order).reshape(shape);
}

Tensor all_gather_dim(const Tensor& x, int64_t dim, const comm::Group& group) {
  return concat_chunks(comm::all_gather(x.contiguous(), group), dim);
}

Tensor reduce_scatter_dim(const Tensor& x, int64_t dim, const comm::Group& group) {
  const int size = group.size();
  const int64_t n = x.size(dim);
  ZENITH_CHECK(n % size == 0, "[sequence parallel] dimension ", dim, " of size ", n,
               " does not divide by the tensor-parallel degree ", size);
  Shape split = x.shape();
  split[size_t(dim)] = n / size;
  split.insert(split.begin() + dim, size);
  std::vector<int64_t> order = {dim};
  for (int64_t i = 0; i < int64_t(split.size()); ++i)
    if (i != dim) order.push_back(i);
  Tensor blocks = x.reshape(split).permute(order).contiguous();
  Shape out_shape = x.shape();
  out_shape[size_t(dim)] = n / size;
  Tensor out = Tensor::empty(out_shape, x.dtype());
  comm::reduce_scatter(out, blocks, comm::ReduceOp::SUM, group);
  return out;
}

Tensor chunk_dim(const Tensor& x, int64_t dim, const comm::Group& group) {
  const int size = group.size();
  const int64_t n = x.size(dim);
  ZENITH_CHECK(n % size == 0, "[sequence parallel] dimension ", dim, " of size ", n,
               " does not divide by the tensor-parallel degree ", size);
  const int64_t len = n / size;
  return x.slice(dim, group.rank() * len, (group.rank() + 1) * len).contiguous();
}

// Runs `forward` on x's data, records `backward` on the gradient (both without recording).
template <typename F, typename B>
Tensor collective(const char* name, const Tensor& x, F forward, B backward) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = forward(x.detach());
  }
  if (autograd::needs_grad({x}))
    autograd::record(name, {x}, {y}, [backward](const std::vector<Tensor>& grads) {
      NoGradGuard no_grad;
      return std::vector<Tensor>{grads[0].defined() ? backward(grads[0]) : Tensor()};
    });
  return y;
}

}  // namespace

Tensor all_gather_along(const Tensor& x, int64_t dim, const comm::Group& group) {
  NoGradGuard no_grad;
  return group.size() == 1 ? x : all_gather_dim(x, wrap_dim(x, dim), group);
}

Tensor copy_to_tensor_parallel(const Tensor& x, const comm::Group& group) {
  if (group.size() == 1) return x;
  return collective(
      "copy_to_tensor_parallel", x, [](const Tensor& d) { return d; },
      [group](const Tensor& g) { return reduced(g, group); });
}

Tensor reduce_from_tensor_parallel(const Tensor& x, const comm::Group& group) {
  if (group.size() == 1) return x;
  return collective(
      "reduce_from_tensor_parallel", x, [group](const Tensor& d) { return reduced(d, group); },
      [](const Tensor& g) { return g; });
}

Tensor gather_sequence(const Tensor& x, int64_t dim, const comm::Group& group) {
  dim = wrap_dim(x, dim);
  if (group.size() == 1) return x;
  return collective(
      "gather_sequence", x, [=](const Tensor& d) { return all_gather_dim(d, dim, group); },
      [=](const Tensor& g) { return reduce_scatter_dim(g, dim, group); });
}

Tensor reduce_scatter_sequence(const Tensor& x, int64_t dim, const comm::Group& group) {
  dim = wrap_dim(x, dim);
  if (group.size() == 1) return x;
  return collective(
      "reduce_scatter_sequence", x,
      [=](const Tensor& d) { return reduce_scatter_dim(d, dim, group); },
      [=](const Tensor& g) { return all_gather_dim(g, dim, group); });
}

Tensor split_sequence(const Tensor& x, int64_t dim, const comm::Group& group) {
  dim = wrap_dim(x, dim);
  if (group.size() == 1) return x;
  return collective(
      "split_sequence", x, [=](const Tensor& d) { return chunk_dim(d, dim, group); },
      [=](const Tensor& g) { return all_gather_dim(g, dim, group); });
}

// ---- layers

int TensorParallelGroup::rank() const { return group.rank(); }
int TensorParallelGroup::size() const { return group.size(); }

Tensor shard_rows(const Tensor& full, int rank, int size) {
  NoGradGuard no_grad;
  const int64_t n = full.size(0);
  ZENITH_CHECK(n % size == 0, "[tensor parallel] ", n, " rows do not divide by the degree ", size);
  return full.slice(0, rank * (n / size), (rank + 1) * (n / size)).contiguous().clone();
}

Tensor shard_columns(const Tensor& full, int rank, int size) {
  NoGradGuard no_grad;
  const int64_t n = full.size(-1);
  ZENITH_CHECK(n % size == 0, "[tensor parallel] ", n, " columns do not divide by the degree ",
               size);
  return full.slice(full.dim() - 1, rank * (n / size), (rank + 1) * (n / size))
      .contiguous()
      .clone();
}

namespace {

// y = gather(x) W^T + b, keeping x (the local slice) for backward and gathering it again there:
// grad_x = reduce-scatter(g W), grad_W = g^T gather(x), grad_b = sum g.
Tensor sequence_parallel_linear(const Tensor& x, const Tensor& gathered, const Tensor& weight,
                                const Tensor& bias, const comm::Group& group) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = ops::linear(
        gathered, weight.dtype() == gathered.dtype() ? weight : weight.to(gathered.dtype()), bias);
  }
  std::vector<Tensor> inputs = {x, weight};
  if (bias.defined()) inputs.push_back(bias);
  if (!autograd::needs_grad(inputs)) return y;
  autograd::record("sequence_parallel_linear", inputs, {y},
                   [x, weight, has_bias = bias.defined(), group](const std::vector<Tensor>& grads) {
                     NoGradGuard no_grad;
                     const Tensor& g = grads[0];
                     std::vector<Tensor> out(has_bias ? 3 : 2);
                     if (!g.defined()) return out;
                     const Tensor w = weight.dtype() == g.dtype() ? weight : weight.to(g.dtype());
                     out[0] = reduce_scatter_dim(ops::matmul(g, w), 1, group);
                     const Tensor full = all_gather_dim(x.detach(), 1, group);
                     const Tensor g2 = g.reshape({-1, g.size(-1)});
                     Tensor gw = ops::matmul(g2.t(), full.reshape({-1, full.size(-1)}));
                     out[1] = gw.dtype() == weight.dtype() ? gw : gw.to(weight.dtype());
                     if (has_bias) out[2] = ops::sum(g2, {0});
                     return out;
                   });
  return y;
}

}  // namespace

ColumnParallelLinear::ColumnParallelLinear(Tensor weight_shard, Tensor bias_shard,
                                           TensorParallelGroup tp,
                                           std::shared_ptr<SequenceGather> gather)
    : nn::LoraLinear(std::move(weight_shard), std::move(bias_shard)),
      tp_(std::move(tp)),
      gather_(std::move(gather)) {}

Tensor ColumnParallelLinear::forward(const Tensor& x) {
  if (!tp_.sequence_parallel) return nn::LoraLinear::forward(copy_to_tensor_parallel(x, tp_.group));
  // Adapters and low-precision compute take LoraLinear's path on the gathered input.
  if (has_adapter() || compute_dtype() != DType::f32 || tp_.size() == 1)
    return nn::LoraLinear::forward(gather_sequence(x, 1, tp_.group));
  Tensor gathered;
  if (gather_ && gather_->input.lock() == x.impl_ptr()) {
    gathered = gather_->gathered;
  } else {
    NoGradGuard no_grad;
    gathered = all_gather_dim(x.detach(), 1, tp_.group);
    if (gather_) *gather_ = {x.impl_ptr(), gathered};
  }
  return sequence_parallel_linear(x, gathered, weight(), bias(), tp_.group);
}

RowParallelLinear::RowParallelLinear(Tensor weight_shard, Tensor bias, TensorParallelGroup tp,
                                     std::shared_ptr<SequenceGather> closes)
    : nn::LoraLinear(std::move(weight_shard)), tp_(std::move(tp)), closes_(std::move(closes)) {
  if (bias.defined()) bias_ = register_parameter("bias", std::move(bias));
}

Tensor RowParallelLinear::forward(const Tensor& x) {
  if (closes_) *closes_ = {};
  Tensor partial = nn::LoraLinear::forward(x);
  Tensor y = tp_.sequence_parallel ? reduce_scatter_sequence(partial, 1, tp_.group)
                                   : reduce_from_tensor_parallel(partial, tp_.group);
  return bias_.defined() ? ops::add(y, bias_) : y;
}

void replace_data(Tensor& t, const Tensor& data) {
  const bool grad = t.requires_grad();
  TensorImpl& impl = t.impl();
  impl.storage = data.storage();
  impl.shape = data.shape();
  impl.strides = data.strides();
  impl.offset = data.offset();
  impl.dtype = data.dtype();
  impl.layout = nullptr;
  impl.grad = nullptr;
  t.requires_grad_(grad);
}

// ---- vocabulary parallel

Tensor vocab_parallel_embedding(const Tensor& weight_shard, const Tensor& ids, int64_t vocab_start,
                                const TensorParallelGroup& tp) {
  const int64_t rows = weight_shard.size(0);
  std::vector<int64_t> local = ids.to_int_vector();
  std::vector<float> keep(local.size());
  for (size_t i = 0; i < local.size(); ++i) {
    const bool mine = local[i] >= vocab_start && local[i] < vocab_start + rows;
    keep[i] = mine ? 1.0f : 0.0f;
    local[i] = mine ? local[i] - vocab_start : 0;
  }
  Shape mask_shape = ids.shape();
  mask_shape.push_back(1);
  Tensor e = ops::embedding(weight_shard, Tensor::from_vector(local, ids.shape()));
  e = ops::mul(e, Tensor::from_vector(keep, mask_shape));
  return tp.sequence_parallel ? reduce_scatter_sequence(e, 1, tp.group)
                              : reduce_from_tensor_parallel(e, tp.group);
}

Tensor vocab_parallel_cross_entropy(const Tensor& logits_shard, const std::vector<int64_t>& targets,
                                    int64_t vocab_start, const comm::Group& group) {
  ZENITH_CHECK(logits_shard.dim() == 2 && logits_shard.size(0) == int64_t(targets.size()),
               "[vocab_parallel_cross_entropy] logits ", shape_str(logits_shard.shape()),
               " do not fit ", targets.size(), " targets");
  const int64_t n = logits_shard.size(0), v = logits_shard.size(1);
  Tensor z = logits_shard.detach().to(DType::f32).contiguous().clone();  // becomes the softmax
  float* p = z.data<float>();
  Tensor row_max = Tensor::empty({n}), sums = Tensor::zeros({n}), picked = Tensor::zeros({n});
  for (int64_t i = 0; i < n; ++i) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < v; ++j) m = std::max(m, p[i * v + j]);
    row_max.data<float>()[i] = m;
  }
  const bool shared = group.size() > 1;
  if (shared) comm::all_reduce(row_max, comm::ReduceOp::MAX, group);
  for (int64_t i = 0; i < n; ++i) {
    const float m = row_max.data<float>()[i];
    const int64_t t = targets[size_t(i)] - vocab_start;
    if (targets[size_t(i)] != -100 && t >= 0 && t < v) picked.data<float>()[i] = p[i * v + t] - m;
    double s = 0;
    for (int64_t j = 0; j < v; ++j) {
      p[i * v + j] = std::exp(p[i * v + j] - m);
      s += p[i * v + j];
    }
    sums.data<float>()[i] = float(s);
  }
  if (shared) {
    comm::all_reduce(sums, comm::ReduceOp::SUM, group);
    comm::all_reduce(picked, comm::ReduceOp::SUM, group);
  }
  double total = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float s = sums.data<float>()[i];
    for (int64_t j = 0; j < v; ++j) p[i * v + j] /= s;
    if (targets[size_t(i)] == -100) continue;
    total += std::log(double(s)) - double(picked.data<float>()[i]);
    ++count;
  }
  ZENITH_CHECK(count > 0, "[vocab_parallel_cross_entropy] every target is ignored (-100)");
  Tensor loss = Tensor::scalar(total / double(count));
  if (autograd::needs_grad({logits_shard})) {
    Tensor softmax = z;
    autograd::record("vocab_parallel_cross_entropy", {logits_shard}, {loss},
                     [softmax, targets, vocab_start, count](const std::vector<Tensor>& grads) {
                       NoGradGuard no_grad;
                       const int64_t rows = softmax.size(0), cols = softmax.size(1);
                       Tensor g = softmax.clone();
                       float* q = g.data<float>();
                       for (int64_t i = 0; i < rows; ++i) {
                         const int64_t t = targets[size_t(i)];
                         if (t == -100) {
                           for (int64_t j = 0; j < cols; ++j) q[i * cols + j] = 0;
                         } else if (t - vocab_start >= 0 && t - vocab_start < cols) {
                           q[i * cols + t - vocab_start] -= 1.0f;
                         }
                       }
                       const double scale = grads[0].item() / double(count);
                       return std::vector<Tensor>{ops::mul(g, scale)};
                     });
  }
  return loss;
}

// ---- gradient clipping

double clip_grad_norm_tensor_parallel(const std::vector<Tensor>& sharded,
                                      const std::vector<Tensor>& replicated, double max_norm,
                                      const comm::Group& group) {
  NoGradGuard no_grad;
  auto squares = [](const std::vector<Tensor>& params) {
    double total = 0;
    for (const Tensor& p : params)
      if (p.grad().defined()) total += ops::sum(ops::mul(p.grad(), p.grad())).item();
    return total;
  };
  Tensor shard_total = Tensor::from_vector(std::vector<double>{squares(sharded)}, {1});
  if (group.size() > 1) comm::all_reduce(shard_total, comm::ReduceOp::SUM, group);
  const double norm = std::sqrt(shard_total.item() + squares(replicated));
  if (max_norm <= 0) return norm;
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0)
    for (const auto* params : {&sharded, &replicated})
      for (const Tensor& p : *params)
        if (p.grad().defined()) p.grad().copy_(ops::mul(p.grad(), coef));
  return norm;
}

}  // namespace zenith::distributed
