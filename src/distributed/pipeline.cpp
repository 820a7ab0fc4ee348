// Pipeline parallelism for LLaMA: stages of whole layers, GPipe and 1F1B (see pipeline.h).
#include "distributed/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "core/allocator.h"
#include "models/llama_layers.h"
#include "zenith/autograd.h"
#include "zenith/ops.h"

namespace zenith::distributed {
namespace {

namespace comm = communication;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int64_t live_bytes() { return int64_t(core::allocator_stats().live_bytes); }

std::shared_ptr<models::detail::DecoderCell> decoder_of(const models::Llama& model) {
  for (const auto& [name, c] : model.named_children())
    if (name == "model") return std::dynamic_pointer_cast<models::detail::DecoderCell>(c);
  ZENITH_FAIL("[pipeline] the model has no LlamaModel under 'model'");
}

ops::RopeOptions rope_options(const models::LlamaConfig& c) {
  ops::RopeOptions o;
  o.theta = c.rope_theta;
  const models::RopeScaling& s = c.rope_scaling;
  o.scaling = s.type == models::RopeScaling::Type::linear   ? "linear"
              : s.type == models::RopeScaling::Type::llama3 ? "llama3"
                                                            : "default";
  o.factor = s.factor;
  o.low_freq_factor = s.low_freq_factor;
  o.high_freq_factor = s.high_freq_factor;
  o.original_max_position_embeddings = s.original_max_position_embeddings;
  return o;
}

// The layer index in "model.layers.N....", or -1.
int64_t layer_of(const std::string& name) {
  const std::string prefix = "model.layers.";
  if (name.rfind(prefix, 0) != 0) return -1;
  return std::stoll(name.substr(prefix.size()));
}

}  // namespace

const char* schedule_name(PipelineSchedule s) {
  return s == PipelineSchedule::gpipe ? "gpipe" : "1f1b";
}

double ideal_bubble(int stages, int micro_batches) {
  return double(stages - 1) / double(micro_batches + stages - 1);
}

std::pair<int64_t, int64_t> stage_layers(int64_t layers, int stages, int stage) {
  ZENITH_CHECK(stages >= 1 && stages <= layers, "[pipeline] ", stages,
               " stages need at least as many decoder layers, the model has ", layers);
  const int64_t base = layers / stages, extra = layers % stages;
  const int64_t first = stage * base + std::min<int64_t>(stage, extra);
  return {first, first + base + (stage < extra ? 1 : 0)};
}

struct LlamaPipeline::MicroBatch {
  Tensor input;   // the received activation (a leaf whose grad goes back), stages > 0
  Tensor output;  // the stage's output, or the scaled loss on the last stage
  double loss = 0;
  int64_t bytes = 0;
};

LlamaPipeline::LlamaPipeline(models::Llama& model, DeviceMesh mesh, PipelineOptions options,
                             const TensorParallelPlan* tensor_parallel)
    : model_(model), mesh_(std::move(mesh)), options_(options), tp_(tensor_parallel) {
  const models::LlamaConfig& c = model.config();
  ZENITH_CHECK(options_.micro_batches >= 1, "[pipeline] micro_batches must be at least 1, got ",
               options_.micro_batches);
  layers_ = stage_layers(c.num_hidden_layers, stages(), stage());
  inv_freq_ = ops::rope_inv_freq(c.head_dim, rope_options(c));
  const bool first = stage() == 0, last = stage() + 1 == stages();
  // A tied embedding is held by the first stage (lookup) and the last (output layer); their
  // gradients are summed over a group of the two after each step.
  tied_ = c.tie_word_embeddings && stages() > 1;
  if (tied_) {
    const MeshLayout& layout = mesh_.layout();
    for (int d = 0; d < layout.data_degree(); ++d)
      for (int t = 0; t < layout.tensor_degree(); ++t) {
        const std::vector<int> ends = {layout.rank_of({0, d, t}),
                                       layout.rank_of({stages() - 1, d, t})};
        comm::Group g = comm::new_group(ends);
        if (g.is_member()) ends_ = g;
      }
  }
  for (auto& [name, p] : model.named_parameters()) {
    const int64_t layer = layer_of(name);
    const bool mine = layer >= 0 ? layer >= layers_.first && layer < layers_.second
                      : name.rfind("model.embed_tokens.", 0) == 0 ? first || (last && tied_)
                                                                  : last;  // norm, lm_head
    if (mine) {
      names_.push_back(name);
    } else {
      Tensor t = p;
      replace_data(t, Tensor::empty({0}, p.dtype()));
    }
  }
}

std::vector<std::pair<std::string, Tensor>> LlamaPipeline::named_parameters() const {
  const std::set<std::string> mine(names_.begin(), names_.end());
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [name, p] : model_.named_parameters())
    if (mine.count(name)) out.emplace_back(name, p);
  return out;
}

std::vector<Tensor> LlamaPipeline::parameters() const {
  std::vector<Tensor> out;
  for (auto& [_, p] : named_parameters()) out.push_back(p);
  return out;
}

void LlamaPipeline::forward(MicroBatch& mb, const Tensor& ids, const Tensor& labels,
                            double weight) {
  const auto decoder = decoder_of(model_);
  const int64_t b = ids.size(0), t = ids.size(1);
  Tensor x;
  if (stage() == 0) {
    const auto start = Clock::now();
    const int64_t before = live_bytes();
    x = decoder->embed_tokens->forward(ids);
    mb.bytes -= before - live_bytes();
    compute_ += seconds_since(start);
  } else {
    // Sequence parallel: the activation between stages is this rank's slice of the sequence.
    const int64_t rows = tp_ && tp_->tp.sequence_parallel ? t / tp_->degree() : t;
    x = Tensor::empty({b, rows, model_.config().hidden_size});
    mesh_.recv_prev(x);
    x.requires_grad_();
    mb.input = x;
  }
  const auto start = Clock::now();
  const int64_t before = live_bytes();
  models::detail::LayerContext ctx;
  std::tie(ctx.cos, ctx.sin) = ops::rope_cos_sin(inv_freq_, Tensor::arange(t).view({1, t}));
  for (int64_t i = layers_.first; i < layers_.second; ++i)
    x = decoder->layers[size_t(i)]->forward(x, ctx);
  if (stage() + 1 == stages()) {
    Tensor hidden = decoder->norm->forward(x);
    Tensor loss = tp_ ? tensor_parallel_head_loss(model_, *tp_, hidden, labels)
                      : models::causal_lm_loss(model_.head(hidden), labels);
    mb.loss = loss.item() * weight;
    mb.output = ops::mul(loss, weight);
  } else {
    mb.output = x;
    Tensor out = x.detach().contiguous();
    sends_.push_back(mesh_.send_next_async(out));
    sent_.push_back(out);
  }
  mb.bytes += live_bytes() - before;
  compute_ += seconds_since(start);
}

void LlamaPipeline::backward(MicroBatch& mb) {
  Tensor grad;
  if (stage() + 1 < stages()) {
    grad = Tensor::empty(mb.output.shape());
    mesh_.recv_next(grad);
  }
  const auto start = Clock::now();
  mb.output.backward(grad);
  if (stage() > 0) {
    Tensor g = mb.input.grad().contiguous();
    sends_.push_back(mesh_.send_prev_async(g));
    sent_.push_back(g);
  }
  mb.output = Tensor();
  mb.input = Tensor();
  compute_ += seconds_since(start);
}

// The learned labels of labels [B, T] as the causal-LM loss counts them (shifted: from position 1).
static int64_t learned_labels(const Tensor& labels) {
  const std::vector<int64_t> l = labels.to_int_vector();
  const int64_t t = labels.size(1);
  int64_t n = 0;
  for (size_t i = 0; i < l.size(); ++i) n += int64_t(i) % t > 0 && l[i] != -100;
  return n;
}

PipelineStepStats LlamaPipeline::step(const Tensor& input_ids, const Tensor& labels,
                                      int64_t total_targets) {
  const int m = options_.micro_batches, p = stages(), s = stage();
  ZENITH_CHECK(input_ids.dim() == 2 && input_ids.size(0) % m == 0, "[pipeline] batch ",
               shape_str(input_ids.shape()), " does not split into ", m, " micro-batches");
  ZENITH_CHECK(labels.shape() == input_ids.shape(), "[pipeline] labels ", shape_str(labels.shape()),
               " must have input_ids' shape ", shape_str(input_ids.shape()));
  const int64_t rows = input_ids.size(0) / m;
  const auto start = Clock::now();
  compute_ = 0;
  PipelineStepStats stats;
  std::vector<MicroBatch> mbs(static_cast<size_t>(m));
  int64_t alive = 0;
  int in_flight = 0;
  auto fwd = [&](int i) {
    const Tensor l = labels.slice(0, i * rows, (i + 1) * rows).contiguous();
    const double weight =
        total_targets > 0 ? double(learned_labels(l)) / double(total_targets) : 1.0 / m;
    forward(mbs[size_t(i)], input_ids.slice(0, i * rows, (i + 1) * rows).contiguous(), l, weight);
    alive += mbs[size_t(i)].bytes;
    stats.peak_activation_bytes = std::max(stats.peak_activation_bytes, alive);
    stats.max_in_flight = std::max(stats.max_in_flight, ++in_flight);
  };
  auto bwd = [&](int i) {
    backward(mbs[size_t(i)]);
    alive -= mbs[size_t(i)].bytes;
    --in_flight;
  };
  if (options_.schedule == PipelineSchedule::gpipe) {
    for (int i = 0; i < m; ++i) fwd(i);
    for (int i = 0; i < m; ++i) bwd(i);
  } else {
    const int warmup = std::min(p - s - 1, m);
    for (int i = 0; i < warmup; ++i) fwd(i);
    for (int i = 0; i + warmup < m; ++i) {
      fwd(i + warmup);
      bwd(i);
    }
    for (int i = m - warmup; i < m; ++i) bwd(i);
  }
  for (auto& w : sends_) w.wait();
  sends_.clear();
  if (tied_ && (s == 0 || s + 1 == p))
    for (auto& [name, param] : named_parameters())
      if (name == "model.embed_tokens.weight" && param.grad().defined())
        comm::all_reduce(param.grad(), comm::ReduceOp::SUM, ends_);
  sent_.clear();
  double total = 0;
  for (const auto& mb : mbs) total += mb.loss;
  Tensor loss = Tensor::from_vector(std::vector<double>{total}, {1});
  MeshCoord last = mesh_.coord();
  last.pipeline = p - 1;
  if (p > 1) comm::broadcast(loss, mesh_.layout().rank_of(last), mesh_.pipeline_group());
  stats.loss = loss.item();
  stats.compute_seconds = compute_;
  stats.step_seconds = seconds_since(start);
  return stats;
}

double LlamaPipeline::eval_loss(const Tensor& input_ids, const Tensor& labels) {
  NoGradGuard no_grad;
  const int p = stages();
  MicroBatch mb;
  forward(mb, input_ids.contiguous(), labels.contiguous(), 1.0);
  for (auto& w : sends_) w.wait();
  sends_.clear();
  sent_.clear();
  Tensor loss = Tensor::from_vector(std::vector<double>{mb.loss}, {1});
  MeshCoord last = mesh_.coord();
  last.pipeline = p - 1;
  if (p > 1) comm::broadcast(loss, mesh_.layout().rank_of(last), mesh_.pipeline_group());
  return loss.item();
}

double LlamaPipeline::clip_grad_norm(double max_norm) const {
  NoGradGuard no_grad;
  std::vector<Tensor> sharded, replicated;
  for (auto& [name, p] : named_parameters()) {
    // The last stage's copy of a tied embedding is counted on the first stage.
    if (tied_ && stage() > 0 && name == "model.embed_tokens.weight") continue;
    (tp_ && tp_->sharded.count(name) ? sharded : replicated).push_back(p);
  }
  // This stage's squared norm (each tensor shard once), summed over the stages.
  double squares = 0;
  if (tp_) {
    const double n = clip_grad_norm_tensor_parallel(sharded, replicated, 0, tp_->tp.group);
    squares = n * n;
  } else {
    for (const Tensor& p : replicated)
      if (p.grad().defined()) squares += ops::sum(ops::mul(p.grad(), p.grad())).item();
  }
  Tensor total = Tensor::from_vector(std::vector<double>{squares}, {1});
  if (stages() > 1) comm::all_reduce(total, comm::ReduceOp::SUM, mesh_.pipeline_group());
  const double norm = std::sqrt(total.item());
  const double coef = max_norm / (norm + 1e-6);
  if (max_norm > 0 && coef < 1.0)
    for (auto& [name, p] : named_parameters())
      if (p.grad().defined()) p.grad().copy_(ops::mul(p.grad(), coef));
  return norm;
}

}  // namespace zenith::distributed
