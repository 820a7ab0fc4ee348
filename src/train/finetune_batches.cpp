// The fine-tuning loop's data side (batches padded or packed, the data options a model asks
// for, evaluation), its loss-spike guard, and the pretrained model it starts from.
#include <algorithm>
#include <cmath>

#include "models/llama_quant.h"
#include "train/finetune_run.h"
#include "zenith/gguf.h"

namespace zenith::finetune {

Batch collate(const std::vector<const Example*>& examples, int64_t pad_id,
              int64_t pad_to_multiple_of, int64_t max_len) {
  ZENITH_CHECK(!examples.empty(), "[finetune] an empty batch");
  ZENITH_CHECK(pad_to_multiple_of >= 1, "[finetune] pad_to_multiple_of must be at least 1, got ",
               pad_to_multiple_of);
  size_t longest = 0;
  for (const Example* e : examples) longest = std::max(longest, e->ids.size());
  const int64_t b = int64_t(examples.size());
  int64_t t = (int64_t(longest) + pad_to_multiple_of - 1) / pad_to_multiple_of * pad_to_multiple_of;
  if (max_len > 0) t = std::max(int64_t(longest), std::min(t, max_len));
  std::vector<int64_t> ids(size_t(b * t), pad_id), mask(size_t(b * t), 0),
      labels(size_t(b * t), -100);
  Batch batch;
  for (int64_t i = 0; i < b; ++i) {
    const Example& e = *examples[size_t(i)];
    for (size_t j = 0; j < e.ids.size(); ++j) {
      const size_t at = size_t(i * t) + j;
      ids[at] = e.ids[j];
      mask[at] = 1;
      labels[at] = e.labels[j];
      ++batch.tokens;
      if (j > 0 && e.labels[j] != -100) ++batch.targets;
    }
  }
  batch.input_ids = Tensor::from_vector(ids, {b, t});
  batch.attention_mask = Tensor::from_vector(mask, {b, t});
  batch.labels = Tensor::from_vector(labels, {b, t});
  return batch;
}

int64_t graph_pad_multiple(int64_t max_seq_len) {
  return std::max<int64_t>(64, (max_seq_len / 8 + 63) / 64 * 64);
}

int64_t pad_multiple(const Options& o, int64_t max_seq_len) {
  if (o.pad_to_multiple_of > 0) return o.pad_to_multiple_of;
  // Sequence parallelism splits the positions over the tensor group.
  if (o.sequence_parallel) return o.tensor_parallel;
  return o.mode == Mode::graph ? graph_pad_multiple(max_seq_len) : 1;
}

Data pack(const Data& data, int64_t max_seq_len) {
  Data out = data;
  out.examples.clear();
  Example current;
  for (const Example& e : data.examples) {
    if (!current.ids.empty() && current.ids.size() + e.ids.size() > size_t(max_seq_len)) {
      out.examples.push_back(std::move(current));
      current = Example();
    }
    const bool joined = !current.ids.empty();
    current.ids.insert(current.ids.end(), e.ids.begin(), e.ids.end());
    current.labels.insert(current.labels.end(), e.labels.begin(), e.labels.end());
    if (joined) current.labels[current.labels.size() - e.labels.size()] = -100;
  }
  if (!current.ids.empty()) out.examples.push_back(std::move(current));
  return out;
}

SpikeGuard::SpikeGuard(double factor, int64_t rollback, int64_t window, int64_t min_history)
    : factor_(factor), rollback_(rollback), window_(window), min_history_(min_history) {
  ZENITH_CHECK(factor == 0 || factor > 1, "[finetune] the spike factor must be > 1 (0: off), got ",
               factor);
  ZENITH_CHECK(rollback > 0 && window > 0 && min_history > 0 && min_history <= window,
               "[finetune] bad spike guard settings");
}

double SpikeGuard::median() const {
  if (recent_.empty()) return NAN;
  std::vector<double> v = recent_;
  std::nth_element(v.begin(), v.begin() + int64_t(v.size() / 2), v.end());
  return v[v.size() / 2];
}

SpikeGuard::Verdict SpikeGuard::check(double loss, double grad_norm, std::string* why) {
  std::string reason;
  if (!std::isfinite(loss)) {
    reason = "the loss is " + std::to_string(loss);
  } else if (!std::isfinite(grad_norm)) {
    reason = "the gradient norm is " + std::to_string(grad_norm);
  } else if (factor_ > 0 && int64_t(recent_.size()) >= min_history_ && loss > factor_ * median()) {
    reason = detail::format("the loss %.4g is above %g x the running median %.4g", loss, factor_,
                            median());
  }
  if (reason.empty()) {
    in_a_row_ = 0;
    recent_.push_back(loss);
    if (int64_t(recent_.size()) > window_) recent_.erase(recent_.begin());
    return Verdict::ok;
  }
  if (why) *why = reason;
  if (++in_a_row_ >= rollback_) {
    in_a_row_ = 0;
    return Verdict::rollback;
  }
  return Verdict::skip;
}

EvalRecord evaluate(models::Llama& model, const Data& data, int64_t batch_size, int64_t pad_id) {
  return detail::evaluate_shared(model, data, batch_size, pad_id, nullptr);
}

namespace detail {

std::shared_ptr<models::Llama> load_pretrained(const Options& o, bool lora) {
  const bool gguf = models::is_gguf_file(o.model);
  if (!lora)
    return gguf ? models::load_gguf(o.model, DType::f32, true)
                : models::Llama::from_pretrained(o.model, DType::f32);
  const auto dtype = o.amp != Amp::O0 ? std::optional(o.amp_dtype) : std::nullopt;
  if (!gguf) return models::load_quantizing(o.model, o.quant, dtype);
  if (o.quant.empty()) return models::load_gguf(o.model, dtype, true);
  // QLoRA over a GGUF file: its blocks are the base when they are what --quant asks for (q4_K
  // rows of no whole 256-block are q4_0, as Llama::quantize takes them); else widened, requantized.
  auto model = models::load_gguf(o.model, dtype);
  const QuantFormat want = quant_from_name(o.quant);
  for (const auto& [path, layer] : model->linear_layers())
    if (const QuantizedWeight* q = layer->quantized_weight();
        q && q->format != want && !(want == QuantFormat::q4_k && q->format == QuantFormat::q4_0)) {
      model = models::load_gguf(o.model, dtype, true);
      break;
    }
  model->quantize(want);
  return model;
}

}  // namespace detail

std::string model_config_path(const Options& o) {
  return o.model_config.empty() ? o.model : o.model_config;
}

DataOptions data_options(const Options& o, const models::LlamaConfig& config) {
  const int64_t context = config.max_position_embeddings;
  return DataOptions{.max_seq_len = context > 0 ? std::min(o.max_seq_len, context) : o.max_seq_len,
                     .train_on_prompt = o.train_on_prompt,
                     .chat_template = o.chat_template,
                     .vocab_size = config.vocab_size};
}

}  // namespace zenith::finetune
