// HF's causal-LM loss, from logits or from the model in chunks (no [B, T, V] logits kept).
#include "models/llama_loss.h"

#include <algorithm>

#include "models/llama_layers.h"
#include "zenith/autograd.h"
#include "zenith/llama.h"

namespace zenith::models {
namespace {

// Positions per chunk: about 4M logits (16 MB float32) at a time.
constexpr int64_t kChunkLogits = int64_t(1) << 22;

// labels [B, T] shifted left by one within each sequence: the target of position t is the label
// at t + 1; the last position of each sequence has none (-100).
std::vector<int64_t> next_token_labels(const Tensor& labels) {
  const int64_t b = labels.size(0), t = labels.size(1);
  const std::vector<int64_t> l = labels.to_int_vector();
  std::vector<int64_t> next(size_t(b * t), -100);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j + 1 < t; ++j) next[size_t(i * t + j)] = l[size_t(i * t + j + 1)];
  return next;
}

}  // namespace

Tensor causal_lm_loss(const Tensor& logits, const Tensor& labels) {
  ZENITH_CHECK(logits.defined() && logits.dim() == 3, "[llama] logits must be [batch, seq, vocab]");
  const int64_t b = logits.size(0), t = logits.size(1), v = logits.size(2);
  detail::check_integer(labels, "labels", {b, t});
  // Shifting the labels (not the logits) keeps the [B T, V] logits a view, no copy; the shift
  // is an op, not a host read, so graph mode captures it.
  Tensor next = ops::cat({labels.slice(1, 1, t), Tensor::full({b, 1}, -100, labels.dtype())}, 1);
  return ops::cross_entropy(logits.reshape({b * t, v}), next.reshape({b * t}), "mean", -100);
}

Tensor causal_lm_loss(Llama& model, const LlamaInput& input, const Tensor& labels) {
  return causal_lm_loss_over(model, input, labels, 0);
}

// normalizer 0: this batch's targets.
Tensor causal_lm_loss_over(Llama& model, const LlamaInput& input, const Tensor& labels,
                           double normalizer) {
  Tensor hidden = model.hidden_states(input);  // [B, T, D]
  const int64_t b = hidden.size(0), t = hidden.size(1), d = hidden.size(2);
  detail::check_integer(labels, "labels", {b, t});
  const std::vector<int64_t> next = next_token_labels(labels);
  const int64_t targets =
      std::count_if(next.begin(), next.end(), [](int64_t l) { return l != -100; });
  std::vector<Tensor> trainable;
  for (const Tensor& p : model.head_parameters())
    if (p.requires_grad()) trainable.push_back(p);
  const bool hidden_grad = hidden.requires_grad();
  std::vector<Tensor> inputs = trainable;
  if (hidden_grad) inputs.insert(inputs.begin(), hidden);
  if (targets == 0 || !autograd::needs_grad(inputs)) {
    Tensor mean = causal_lm_loss(model.head(hidden), labels);
    return normalizer > 0 ? ops::mul(mean, double(targets) / normalizer) : mean;
  }

  const int64_t rows = b * t, vocab = model.config().vocab_size;
  const int64_t chunk = std::max<int64_t>(1, kChunkLogits / vocab);
  const Tensor flat = hidden.detach().reshape({rows, d});
  Tensor d_hidden = hidden_grad ? Tensor::zeros({rows, d}) : Tensor();
  std::vector<Tensor> d_params(trainable.size());
  double total = 0;
  for (int64_t start = 0; start < rows; start += chunk) {
    const int64_t end = std::min(rows, start + chunk);
    const std::vector<int64_t> part(next.begin() + start, next.begin() + end);
    if (std::all_of(part.begin(), part.end(), [](int64_t l) { return l == -100; })) continue;
    Tensor x = flat.slice(0, start, end);
    if (hidden_grad) x.requires_grad_(true);
    Tensor loss =
        ops::cross_entropy(model.head(x), Tensor::from_vector(part, {end - start}), "sum", -100);
    std::vector<Tensor> wrt = trainable;
    if (hidden_grad) wrt.insert(wrt.begin(), x);
    std::vector<Tensor> grads = autograd::grad({loss}, wrt);
    total += loss.item();
    if (hidden_grad) d_hidden.slice(0, start, end).copy_(grads[0]);
    for (size_t i = 0; i < trainable.size(); ++i) {
      const Tensor& g = grads[i + (hidden_grad ? 1 : 0)];
      if (g.defined()) d_params[i] = d_params[i].defined() ? ops::add(d_params[i], g) : g.clone();
    }
  }
  // The mean over the targets (or the normalizer): the kept gradients carry the same scale.
  const double scale = 1.0 / (normalizer > 0 ? normalizer : double(targets));
  Tensor out = Tensor::scalar(total * scale);
  if (hidden_grad) d_hidden = ops::mul(d_hidden.reshape(hidden.shape()), scale);
  for (Tensor& g : d_params)
    if (g.defined()) g = ops::mul(g, scale);
  autograd::record("causal_lm_loss", inputs, {out},
                   [d_hidden, d_params, hidden_grad](const std::vector<Tensor>& grads) {
                     std::vector<Tensor> result;
                     const Tensor& g = grads[0];
                     if (hidden_grad)
                       result.push_back(g.defined() ? ops::mul(d_hidden, g) : Tensor());
                     for (const Tensor& p : d_params)
                       result.push_back(g.defined() && p.defined() ? ops::mul(p, g) : Tensor());
                     return result;
                   });
  return out;
}

}  // namespace zenith::models
