// Losses: cross_entropy (class indices or probabilities, label smoothing, ignore_index) and
// mse_loss, with PyTorch's reductions. The class-index case runs one op, cross_entropy_rows
// (log-softmax and NLL over [M, C] rows); its gradient cross_entropy_rows_backward is defined
// here by a decomposition into ops, with a fused CPU kernel as the fast path.
#include "ops/op_utils.h"

namespace zenith::ops {
namespace {

using detail::plain;

Reduction parse_reduction(const std::string& reduction, const char* op) {
  if (reduction == "mean") return Reduction::kMean;
  if (reduction == "sum") return Reduction::kSum;
  ZENITH_CHECK(reduction == "none", "[", op, "] reduction must be 'mean', 'sum' or 'none', got '",
               reduction, "'");
  return Reduction::kNone;
}

// cross_entropy_rows_backward(dloss, logits [M, C], target [M], log_sum) -> dlogits:
// dloss_i (softmax(x)_i - (1 - eps) onehot(t_i) - eps / C), 0 for ignored rows; "mean" divides
// by the number of rows not ignored.
std::vector<Tensor> cross_entropy_rows_backward_composed(const std::vector<Tensor>& in,
                                                         const CrossEntropyAttrs& a) {
  const Tensor& logits = in[1];
  const int64_t C = logits.size(1);
  const DType dt = logits.dtype();
  Tensor target = in[2].reshape({-1, 1});
  Tensor valid = ne(target, Tensor::scalar(double(a.ignore_index), target.dtype()));  // [M, 1]
  Tensor onehot = eq(Tensor::arange(C).reshape({1, C}), target).to(dt);
  Tensor smoothed = add(mul(onehot, 1.0 - a.label_smoothing), a.label_smoothing / double(C));
  Tensor dloss = in[0].dtype() == dt ? in[0] : in[0].to(dt);
  if (a.reduction == Reduction::kNone) dloss = dloss.reshape({-1, 1});
  if (a.reduction == Reduction::kMean) dloss = div(dloss, sum(valid.to(dt)));
  Tensor d = mul(sub(softmax(logits, 1), smoothed), dloss);
  return {where(valid, d, detail::scalar_like(0.0, d))};
}

ZENITH_REGISTER_DECOMPOSITION(cross_entropy_rows_backward, cross_entropy_rows_backward_composed);

// Losses of logits [M, C] against class indices [M], reduced by one fused kernel ("none": per
// row, 0 where ignored).
Tensor cross_entropy_rows(const Tensor& logits, const Tensor& target,
                          const CrossEntropyAttrs& attrs) {
  auto outs = dispatch::call<OpId::cross_entropy_rows>({logits, target}, attrs);
  if (autograd::needs_grad({logits})) {
    Tensor t = target.detach(), log_sums = outs[1];
    autograd::record(
        "cross_entropy", {logits}, {outs[0]},
        [logits, t, log_sums, attrs](const std::vector<Tensor>& g) {
          return std::vector<Tensor>{dispatch::call1<OpId::cross_entropy_rows_backward>(
              {g[0], logits, t, log_sums}, attrs)};
        });
  }
  return outs[0];
}

// Moves dim 1 (classes) last and flattens the rest: [N, C, d...] -> [N * d..., C].
Tensor classes_last(const Tensor& x) {
  if (x.dim() == 2) return x;
  std::vector<int64_t> order = {0};
  for (int64_t d = 2; d < x.dim(); ++d) order.push_back(d);
  order.push_back(1);
  return x.permute(order).reshape({-1, x.shape()[1]});
}

}  // namespace

Tensor cross_entropy(const Tensor& logits_in, const Tensor& target_in, const std::string& reduction,
                     int64_t ignore_index, double label_smoothing) {
  ZENITH_CHECK(logits_in.defined() && target_in.defined(), "[cross_entropy] undefined input");
  const Reduction reduce = parse_reduction(reduction, "cross_entropy");
  ZENITH_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
               "[cross_entropy] label_smoothing must be in [0, 1], got ", label_smoothing);
  Tensor logits = plain(logits_in), target = plain(target_in);
  ZENITH_CHECK(is_floating(logits.dtype()), "[cross_entropy] logits must be floating, got ",
               dtype_name(logits.dtype()), " of shape ", shape_str(logits.shape()));
  ZENITH_CHECK(logits.dim() >= 1, "[cross_entropy] logits must have a class dim, got shape ",
               shape_str(logits.shape()));
  // Unbatched: logits [C] with target [] (indices) or [C] (probabilities).
  if (logits.dim() == 1) {
    Tensor out = cross_entropy(logits.unsqueeze(0), target.unsqueeze(0), reduction, ignore_index,
                               label_smoothing);
    return reduction == "none" ? out.squeeze(0) : out;
  }
  const int64_t classes = logits.shape()[1];

  if (is_floating(target.dtype())) {
    // Dense probabilities: loss[n, d...] = -sum_c q[n, c, d...] log_softmax(x)[n, c, d...]
    // with q = (1 - eps) target + eps / C; "mean" averages over all of n, d...
    ZENITH_CHECK(target.shape() == logits.shape(), "[cross_entropy] probability target of shape ",
                 shape_str(target.shape()), " must match logits ", shape_str(logits.shape()));
    Tensor q = label_smoothing > 0.0
                   ? add(mul(target, 1.0 - label_smoothing), label_smoothing / double(classes))
                   : target;
    Tensor losses = neg(sum(mul(q, log_softmax(logits, 1)), {1}));
    if (reduction == "none") return losses;
    return reduction == "sum" ? sum(losses) : mean(losses);
  }

  ZENITH_CHECK(target.dtype() == DType::i64 || target.dtype() == DType::i32,
               "[cross_entropy] class-index target must be int64 or int32, got ",
               dtype_name(target.dtype()), " of shape ", shape_str(target.shape()));
  Shape expected = logits.shape();
  expected.erase(expected.begin() + 1);
  ZENITH_CHECK(target.shape() == expected, "[cross_entropy] target of shape ",
               shape_str(target.shape()), " does not match logits ", shape_str(logits.shape()),
               " (expected target ", shape_str(expected), ")");
  ZENITH_CHECK(classes > 0, "[cross_entropy] logits ", shape_str(logits.shape()),
               " have no classes");
  Tensor rows = classes_last(logits);
  Tensor flat_target = target.reshape({-1});
  // "mean" divides by the number of non-ignored targets (NaN when there are none, as in PyTorch).
  Tensor loss = cross_entropy_rows(
      rows, flat_target,
      {.ignore_index = ignore_index, .label_smoothing = label_smoothing, .reduction = reduce});
  return reduction == "none" ? loss.reshape(target.shape()) : loss;
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  ZENITH_CHECK(input.defined() && target.defined(), "[mse_loss] undefined input");
  parse_reduction(reduction, "mse_loss");
  ZENITH_CHECK(is_floating(input.dtype()), "[mse_loss] input must be floating, got ",
               dtype_name(input.dtype()), " of shape ", shape_str(input.shape()));
  Tensor diff;
  try {
    diff = sub(input, target);
  } catch (const Error&) {
    ZENITH_FAIL("[mse_loss] input of shape ", shape_str(input.shape()), " and target of shape ",
                shape_str(target.shape()), " cannot be broadcast together");
  }
  Tensor sq = square(diff);
  if (reduction == "none") return sq;
  return reduction == "sum" ? sum(sq) : mean(sq);
}

}  // namespace zenith::ops
