#include "distributed/zero.h"

#include <cmath>

#include "core/allocator.h"
#include "zenith/error.h"
#include "zenith/ops.h"

namespace zenith::distributed {

namespace comm = communication;

namespace {

Shape local_shape(const ZeroShard& s) {
  Shape shape = s.global_shape.empty() ? Shape{1} : s.global_shape;
  shape[0] = s.rows.length;
  return shape;
}

// The parameter as [rows, row_numel], sharing its storage.
Tensor as_rows(const Tensor& t, const ZeroShard& s) {
  return t.detach().reshape({t.numel() / s.row_numel, s.row_numel});
}

uint64_t bytes_of(const Tensor& t) { return t.defined() ? uint64_t(t.nbytes()) : 0; }

}  // namespace

ZeroOptimizer::ZeroOptimizer(std::vector<Tensor> params, const OptimizerFactory& make,
                             ZeroOptions options)
    : options_(std::move(options)) {
  ZENITH_CHECK(options_.stage >= 1 && options_.stage <= 3, "[zero] stage must be 1, 2 or 3, got ",
               options_.stage);
  ZENITH_CHECK(options_.reduce == comm::ReduceOp::AVG || options_.reduce == comm::ReduceOp::SUM,
               "[zero] gradients combine by AVG or SUM");
  ZENITH_CHECK(comm::is_initialized(),
               "[zero] communication is not initialized; call communication::init() first");
  rank_ = options_.group.rank();
  size_ = options_.group.size();
  ZENITH_CHECK(rank_ >= 0, "[zero] this rank is not a member of the data-parallel group");
  ZENITH_CHECK(!options_.rows_of || options_.stage == 3,
               "[zero] rows_of (parameters built without data) needs stage 3, got stage ",
               options_.stage);
  NoGradGuard no_grad;
  std::vector<Tensor> inner_params;
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor& p = params[i];
    ZENITH_CHECK(p.defined() && is_floating(p.dtype()) && p.is_contiguous() && !p.has_layout(),
                 "[zero] parameter ", i, " must be a contiguous floating-point tensor");
    const bool given = bool(options_.rows_of);
    if (options_.broadcast_initial && !given)
      comm::broadcast(p, options_.group.ranks()[0], options_.group);
    ZeroShard s;
    s.param = p;
    s.global_shape = p.shape();
    const int64_t rows = p.dim() == 0 ? 1 : p.shape()[0];
    ZENITH_CHECK(rows > 0, "[zero] parameter ", i, " ", shape_str(p.shape()), " is empty");
    s.row_numel = p.numel() / rows;
    s.rows = chunk_of(rows, size_, rank_);
    s.chunk_rows = (rows + size_ - 1) / size_;
    if (given) {
      s.shard = options_.rows_of(i, s.rows);
      ZENITH_CHECK(
          s.shard.defined() && s.shard.shape() == local_shape(s) && s.shard.dtype() == p.dtype(),
          "[zero] rows_of gave parameter ", i, " ",
          s.shard.defined() ? shape_str(s.shard.shape()) : "nothing", ", expected ",
          shape_str(local_shape(s)), " ", dtype_name(p.dtype()));
      s.shard = s.shard.contiguous();
    } else {
      Tensor view = p.detach().reshape({rows, s.row_numel}).narrow(0, s.rows.offset, s.rows.length);
      s.shard = view.reshape(local_shape(s));
      if (options_.stage == 3) s.shard = s.shard.clone();
    }
    shards_.push_back(std::move(s));
    if (shards_.back().rows.length > 0) {
      inner_params.push_back(shards_.back().shard);
      inner_index_.push_back(i);
    }
  }
  inner_ = make(inner_params);
  if (options_.stage == 3) {
    for (size_t i = 0; i < shards_.size(); ++i) release(i);
    // The whole parameters' blocks go back to the system, not to the allocator's cache, where
    // they would stay resident beside the shards.
    core::empty_allocator_cache();
  }
  if (options_.stage == 2 && options_.reduce_in_backward) {
    // Each gradient is reduce-scattered as soon as backward has summed it, then dropped: a
    // rank never holds more than the gradients in flight in full.
    for (size_t i = 0; i < shards_.size(); ++i) {
      if (!shards_[i].param.requires_grad()) continue;
      hooks_.push_back(
          autograd::register_grad_accumulated_hook(shards_[i].param, [this, i](const Tensor& leaf) {
            Tensor p = leaf;
            reduce_gradient(i, p.grad());
            p.zero_grad();
          }));
    }
  }
}

ZeroOptimizer::~ZeroOptimizer() = default;

int ZeroOptimizer::index_of(const Tensor& param) const {
  for (size_t i = 0; i < shards_.size(); ++i)
    if (&shards_[i].param.impl() == &param.impl()) return int(i);
  return -1;
}

Tensor ZeroOptimizer::padded(const Tensor& flat, int64_t numel) const {
  if (flat.numel() == numel) return flat;
  Tensor t = Tensor::zeros({numel}, flat.dtype());
  if (flat.numel() > 0) t.narrow(0, 0, flat.numel()).copy_(flat);
  return t;
}

void ZeroOptimizer::reduce_gradient(size_t i, const Tensor& full_grad) {
  ZeroShard& s = shards_[i];
  NoGradGuard no_grad;
  const int64_t block = s.chunk_rows * s.row_numel;
  Tensor g = full_grad.defined() ? full_grad.contiguous().reshape({-1})
                                 : Tensor::zeros({s.param.numel()}, s.param.dtype());
  if (g.dtype() != s.param.dtype()) g = g.to(s.param.dtype());
  Tensor out = Tensor::empty({block}, g.dtype());
  comm::reduce_scatter(out, padded(g, block * size_), options_.reduce, options_.group);
  Tensor mine = out.narrow(0, 0, s.rows.length * s.row_numel).reshape(local_shape(s));
  s.grad = s.grad.defined() ? ops::add(s.grad, mine) : mine;
}

void ZeroOptimizer::reduce_pending() {
  if (reduced_) return;
  reduced_ = true;
  if (options_.stage == 2 && !options_.reduce_in_backward) {
    for (size_t i = 0; i < shards_.size(); ++i) {
      Tensor p = shards_[i].param;
      reduce_gradient(i, p.grad());
      p.zero_grad();
    }
    return;
  }
  if (options_.stage != 1) return;
  NoGradGuard no_grad;
  for (auto& s : shards_) {
    Tensor g = s.param.grad();
    if (!g.defined()) {
      g = Tensor::zeros(s.param.shape(), s.param.dtype());
      s.param.set_grad(g);
    }
    ZENITH_CHECK(g.is_contiguous() && !g.has_layout(), "[zero] gradient of ",
                 shape_str(s.param.shape()), " is not contiguous");
    // A reduce-scatter, not DDP's all-reduce: only this rank's rows are needed, so the step
    // moves what DDP moves (reduce-scatter + all-gather). The averaged rows go back into the
    // full gradient, whose other rows keep this rank's own values.
    const int64_t block = s.chunk_rows * s.row_numel;
    Tensor out = Tensor::empty({block}, g.dtype());
    comm::reduce_scatter(out, padded(g.reshape({-1}), block * size_), options_.reduce,
                         options_.group);
    s.grad = as_rows(g, s).narrow(0, s.rows.offset, s.rows.length).reshape(local_shape(s));
    if (s.rows.length > 0) s.grad.copy_(out.narrow(0, 0, s.grad.numel()).reshape(local_shape(s)));
  }
  reduced_ = true;
}

double ZeroOptimizer::grad_norm(const ModelParallelNorm& model_parallel) {
  reduce_pending();
  const bool split = !model_parallel.split.empty();
  ZENITH_CHECK(
      (!split || model_parallel.split.size() == shards_.size()) &&
          (model_parallel.counted.empty() || model_parallel.counted.size() == shards_.size()),
      "[zero] grad_norm: ", model_parallel.split.size(), " split flags for ", shards_.size(),
      " parameters");
  // [0]: parameters whole on every rank of the model-parallel group, [1]: split over it.
  Tensor sums = Tensor::zeros({2}, DType::f64);
  double local[2] = {0, 0};
  for (size_t i = 0; i < shards_.size(); ++i) {
    const auto& s = shards_[i];
    if (!s.grad.defined() || s.grad.numel() == 0) continue;
    if (!model_parallel.counted.empty() && !model_parallel.counted[i]) continue;
    for (double v : s.grad.to_double_vector()) local[split && model_parallel.split[i]] += v * v;
  }
  sums.copy_(Tensor::from_vector(std::vector<double>{local[0], local[1]}, {2}, DType::f64));
  comm::all_reduce(sums, comm::ReduceOp::SUM, options_.group);
  if (split) {
    // Split parameters' squares add up over the model-parallel group; whole ones count once.
    Tensor part = sums.narrow(0, 1, 1).contiguous();
    comm::all_reduce(part, comm::ReduceOp::SUM, model_parallel.group);
    sums.narrow(0, 1, 1).copy_(part);
  }
  if (!model_parallel.pipeline.is_world() && model_parallel.pipeline.size() > 1)
    comm::all_reduce(sums, comm::ReduceOp::SUM, model_parallel.pipeline);
  const auto v = sums.to_double_vector();
  return std::sqrt(v[0] + v[1]);
}

double ZeroOptimizer::clip_grad_norm(double max_norm, const ModelParallelNorm& model_parallel) {
  const double norm = grad_norm(model_parallel);
  const double scale = max_norm / (norm + 1e-6);
  if (scale < 1) {
    NoGradGuard no_grad;
    for (auto& s : shards_)
      if (s.grad.defined()) s.grad = ops::mul(s.grad, Tensor::scalar(scale, s.grad.dtype()));
  }
  return norm;
}

void ZeroOptimizer::step() {
  reduce_pending();
  NoGradGuard no_grad;
  for (size_t j = 0; j < inner_index_.size(); ++j) {
    const ZeroShard& s = shards_[inner_index_[j]];
    Tensor p = inner_->params()[j];
    p.set_grad(s.grad.defined() ? s.grad.contiguous() : Tensor());
  }
  inner_->step();
  if (options_.stage != 3) {
    // Every rank's updated rows into every rank's parameters.
    for (auto& s : shards_) {
      const int64_t block = s.chunk_rows * s.row_numel, numel = s.param.numel();
      Tensor flat = s.param.detach().reshape({numel});
      Tensor mine = padded(s.shard.reshape({-1}), block);
      if (block * size_ == numel) {
        comm::all_gather(flat, mine, options_.group);  // in place: our block is already there
      } else {
        Tensor all = Tensor::empty({block * size_}, s.param.dtype());
        comm::all_gather(all, mine, options_.group);
        flat.copy_(all.narrow(0, 0, numel));
      }
    }
  }
  reduced_ = false;
}

void ZeroOptimizer::zero_grad() {
  for (auto& s : shards_) {
    s.param.zero_grad();
    s.grad = Tensor();
  }
  inner_->zero_grad();
  reduced_ = false;
}

void ZeroOptimizer::gather(size_t i) {
  ZeroShard& s = shards_[i];
  if (options_.stage != 3 || s.gathered) return;
  NoGradGuard no_grad;
  const int64_t block = s.chunk_rows * s.row_numel;
  Tensor all = Tensor::empty({block * size_}, s.param.dtype());
  comm::all_gather(all, padded(s.shard.reshape({-1}), block), options_.group);
  TensorImpl& impl = s.param.impl();
  impl.storage = all.storage();  // the padding rows stay past the parameter's end
  impl.offset = 0;
  s.gathered = true;
}

void ZeroOptimizer::release(size_t i) {
  ZeroShard& s = shards_[i];
  if (options_.stage != 3 || !s.gathered) return;
  s.param.impl().storage = std::make_shared<Storage>(0, s.param.device());
  s.gathered = false;
}

ZeroMemory ZeroOptimizer::model_state_bytes() const {
  ZeroMemory m;
  for (const auto& s : shards_) {
    m.params += options_.stage == 3 ? bytes_of(s.shard) + (s.gathered ? bytes_of(s.param) : 0)
                                    : bytes_of(s.param);
    m.grads += bytes_of(s.param.grad());
    if (options_.stage != 1) m.grads += bytes_of(s.grad);  // stage 1's are views of the above
  }
  for (const auto& [name, t] : inner_->state_dict())
    if (name != "step") m.optimizer_states += bytes_of(t);
  return m;
}

// ---- stage 3 around a computation

namespace {

struct ShardedCall {
  std::shared_ptr<ZeroOptimizer> zero;
  std::vector<size_t> params;
  std::function<Tensor(const Tensor&)> fn;

  void gather() const {
    for (size_t i : params) zero->gather(i);
  }
  void release() const {
    for (size_t i : params) zero->release(i);
  }

  // Recomputes fn with the gathered parameters and differentiates it.
  Tensor backward(const Tensor& x, const Tensor& grad_y) const {
    gather();
    Tensor input = x.detach();
    if (x.requires_grad()) input.requires_grad_();
    std::vector<Tensor> inputs;
    for (size_t i : params) inputs.push_back(zero->shards()[i].param);
    if (x.requires_grad()) inputs.push_back(input);
    std::vector<Tensor> grads;
    const bool previous = autograd::grad_enabled();
    autograd::set_grad_enabled(true);
    try {
      Tensor y = fn(input);
      grads = autograd::grad({y}, inputs,
                             {grad_y.defined() ? grad_y : Tensor::zeros(y.shape(), y.dtype())});
    } catch (...) {
      autograd::set_grad_enabled(previous);
      release();
      throw;
    }
    autograd::set_grad_enabled(previous);
    for (size_t k = 0; k < params.size(); ++k) zero->reduce_gradient(params[k], grads[k]);
    release();
    return x.requires_grad() ? grads.back() : Tensor();
  }
};

}  // namespace

std::vector<size_t> zero_indices(const ZeroOptimizer& zero, const nn::Cell& layer) {
  std::vector<size_t> out;
  for (const auto& [name, p] : layer.named_parameters()) {
    const int i = zero.index_of(p);
    ZENITH_CHECK(i >= 0, "[zero] parameter '", name, "' of ", layer.type_name(),
                 " is not among the ZeRO optimizer's parameters");
    out.push_back(size_t(i));
  }
  return out;
}

Tensor sharded_forward(const std::shared_ptr<ZeroOptimizer>& zero, std::vector<size_t> params,
                       std::function<Tensor(const Tensor&)> fn, const Tensor& x) {
  ZENITH_CHECK(zero->stage() == 3, "[zero] sharded_forward needs ZeRO stage 3, got stage ",
               zero->stage());
  auto call = std::make_shared<ShardedCall>(ShardedCall{zero, std::move(params), std::move(fn)});
  Tensor y;
  call->gather();
  try {
    NoGradGuard no_grad;
    y = call->fn(x);
  } catch (...) {
    call->release();
    throw;
  }
  call->release();
  bool wants_grad = x.requires_grad();
  for (size_t i : call->params) wants_grad = wants_grad || zero->shards()[i].param.requires_grad();
  if (!autograd::grad_enabled() || !wants_grad) return y;
  autograd::record("zero3_layer", {x}, {y}, [call, x](const std::vector<Tensor>& grads) {
    return std::vector<Tensor>{call->backward(x, grads[0])};
  });
  return y;
}

namespace {

class FullyShardedImpl : public nn::Cell {
 public:
  FullyShardedImpl(nn::CellPtr layer, std::shared_ptr<ZeroOptimizer> zero)
      : layer_(std::move(layer)), zero_(std::move(zero)), index_(zero_indices(*zero_, *layer_)) {
    ZENITH_CHECK(zero_->stage() == 3, "[zero] fully_shard needs ZeRO stage 3, got stage ",
                 zero_->stage());
    register_cell("", layer_);
  }

  Tensor forward(const Tensor& x) override {
    nn::CellPtr layer = layer_;
    return sharded_forward(
        zero_, index_, [layer](const Tensor& in) { return layer->forward(in); }, x);
  }

  std::string type_name() const override { return "FullyShard"; }

 private:
  nn::CellPtr layer_;
  std::shared_ptr<ZeroOptimizer> zero_;
  std::vector<size_t> index_;
};

}  // namespace

nn::CellPtr fully_shard(nn::CellPtr layer, std::shared_ptr<ZeroOptimizer> zero) {
  return std::make_shared<FullyShardedImpl>(std::move(layer), std::move(zero));
}

}  // namespace zenith::distributed
