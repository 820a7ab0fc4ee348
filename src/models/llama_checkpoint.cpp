// Activation checkpointing of one decoder layer: forward without a graph, recompute in backward.
// Selective: the forward keeps the outputs of the ops a policy names (dispatch::OutputStash) and
// the recompute takes them back instead of running those ops again; their autograd nodes are
// recorded as usual, so adapters and weights still get their gradients.
#include <algorithm>
#include <atomic>
#include <sstream>

#include "core/grad_mode.h"
#include "core/output_stash.h"
#include "models/llama_layers.h"
#include "zenith/autograd.h"
#include "zenith/random.h"

namespace zenith::models {
namespace detail {
namespace {

const std::vector<std::string> kKeepable = {"q_proj",    "k_proj",  "v_proj",    "o_proj",
                                            "gate_proj", "up_proj", "down_proj", "attention"};

std::atomic<int64_t> g_kept_bytes{0};

class GradModeScope {
 public:
  explicit GradModeScope(bool enabled) : previous_(autograd::grad_enabled()) {
    autograd::set_grad_enabled(enabled);
  }
  ~GradModeScope() { autograd::set_grad_enabled(previous_); }
  GradModeScope(const GradModeScope&) = delete;
  GradModeScope& operator=(const GradModeScope&) = delete;

 private:
  bool previous_;
};

std::vector<Shape> shapes_of(const std::vector<Tensor>& ts) {
  std::vector<Shape> out;
  for (const Tensor& t : ts) out.push_back(t.defined() ? t.shape() : Shape{});
  return out;
}

std::string shapes_str(const std::vector<Shape>& shapes) {
  std::ostringstream os;
  for (size_t i = 0; i < shapes.size(); ++i) os << (i ? ", " : "") << shape_str(shapes[i]);
  return os.str();
}

// The outputs of one layer's kept ops, in call order: filled by its forward, emptied by its
// recompute.
class LayerStash final : public dispatch::OutputStash {
 public:
  explicit LayerStash(KeptOutputs keep) : keep_(std::move(keep)) {}
  ~LayerStash() override { g_kept_bytes -= bytes_; }

  std::vector<Tensor> call(OpId op, const std::vector<Tensor>& inputs,
                           const std::function<std::vector<Tensor>()>& run) override {
    if (!keeps(op, inputs)) return run();
    if (!replaying_) {
      Entry e{op, shapes_of(inputs), run(), 0};
      for (const Tensor& t : e.outputs) e.bytes += t.defined() ? int64_t(t.nbytes()) : 0;
      bytes_ += e.bytes;
      g_kept_bytes += e.bytes;
      entries_.push_back(e);
      return e.outputs;
    }
    ZENITH_CHECK(next_ < entries_.size(), "[checkpoint] ", keep_.where, ": the recompute runs ",
                 op_name(op), " as kept op ", next_ + 1, " but the forward kept only ",
                 entries_.size(), " (the layer must recompute what its forward computed)");
    Entry& e = entries_[next_++];
    const std::vector<Shape> shapes = shapes_of(inputs);
    ZENITH_CHECK(e.op == op && e.input_shapes == shapes, "[checkpoint] ", keep_.where,
                 ": kept output ", next_, " of ", entries_.size(), " came from ", op_name(e.op),
                 " on ", shapes_str(e.input_shapes), ", but the recompute asks for ", op_name(op),
                 " on ", shapes_str(shapes),
                 " (the layer must recompute what its forward computed)");
    bytes_ -= e.bytes;
    g_kept_bytes -= e.bytes;
    return std::move(e.outputs);
  }

  void begin_replay() {
    ZENITH_CHECK(!replayed_, "[checkpoint] ", keep_.where,
                 ": a second backward through a selectively checkpointed layer (its kept "
                 "outputs went to the first); run the forward again, or use the full policy");
    replaying_ = replayed_ = true;
  }

  void end_replay() {
    const size_t used = next_, kept = entries_.size();
    entries_.clear();
    g_kept_bytes -= bytes_;
    bytes_ = 0;
    ZENITH_CHECK(used == kept, "[checkpoint] ", keep_.where, ": the recompute used ", used,
                 " of the ", kept, " outputs its forward kept");
  }

 private:
  struct Entry {
    OpId op;
    std::vector<Shape> input_shapes;
    std::vector<Tensor> outputs;
    int64_t bytes;
  };

  bool keeps(OpId op, const std::vector<Tensor>& inputs) const {
    if (op == OpId::attention) return keep_.attention;
    if (op != OpId::linear || inputs.size() < 2) return false;
    for (const Tensor& w : keep_.weights)
      if (inputs[1].is_same(w)) return true;
    return false;
  }

  KeptOutputs keep_;
  std::vector<Entry> entries_;
  size_t next_ = 0;
  int64_t bytes_ = 0;
  bool replaying_ = false, replayed_ = false;
};

}  // namespace

std::vector<std::string> parse_checkpoint_policy(const std::string& policy) {
  if (policy == "full") return {};
  const std::string list = policy == "selective" ? kSelectiveCheckpointing : policy;
  std::vector<std::string> keep;
  std::stringstream ss(list);
  for (std::string name; std::getline(ss, name, ',');) {
    ZENITH_CHECK(std::find(kKeepable.begin(), kKeepable.end(), name) != kKeepable.end(),
                 "[llama] activation checkpointing policy '", policy, "': unknown '", name,
                 "' (expected selective, full, or a comma list of q_proj, k_proj, v_proj, "
                 "o_proj, gate_proj, up_proj, down_proj, attention)");
    if (std::find(keep.begin(), keep.end(), name) == keep.end()) keep.push_back(name);
  }
  ZENITH_CHECK(!keep.empty(),
               "[llama] activation checkpointing policy is empty (expected "
               "selective, full, or a comma list)");
  return keep;
}

KeptOutputs kept_outputs(const DecoderLayerCell& layer, const std::vector<std::string>& keep) {
  KeptOutputs k;
  k.where = "decoder layer " + std::to_string(layer.index());
  const AttentionCell& a = *layer.self_attn;
  const MlpCell& m = *layer.mlp;
  const std::vector<std::pair<std::string, const nn::LoraLinear*>> linears = {
      {"q_proj", a.q_proj.get()},       {"k_proj", a.k_proj.get()},
      {"v_proj", a.v_proj.get()},       {"o_proj", a.o_proj.get()},
      {"gate_proj", m.gate_proj.get()}, {"up_proj", m.up_proj.get()},
      {"down_proj", m.down_proj.get()}};
  for (const std::string& name : keep) {
    if (name == "attention") k.attention = true;
    for (const auto& [n, linear] : linears)
      if (n == name) k.weights.push_back(linear->weight());
  }
  return k;
}

int64_t checkpoint_kept_bytes() { return g_kept_bytes.load(); }

namespace {
// Marks this thread's no-grad first pass as training's while it runs (core/grad_mode.h): kernels
// keep no inference-only state for it.
struct RecomputedForward {
  bool before = core::recomputed_forward();
  RecomputedForward() { core::set_recomputed_forward(true); }
  ~RecomputedForward() { core::set_recomputed_forward(before); }
  RecomputedForward(const RecomputedForward&) = delete;
  RecomputedForward& operator=(const RecomputedForward&) = delete;
};
}  // namespace

Tensor checkpoint(std::function<Tensor(const Tensor&)> fn, const Tensor& x,
                  const std::vector<Tensor>& params, const KeptOutputs& keep) {
  const bool x_grad = x.requires_grad();
  std::vector<Tensor> trainable;
  for (const Tensor& p : params)
    if (p.requires_grad()) trainable.push_back(p);
  std::vector<Tensor> inputs = trainable;
  if (x_grad) inputs.insert(inputs.begin(), x);
  if (!autograd::needs_grad(inputs)) return fn(x);

  const std::string rng = default_generator().state();
  std::shared_ptr<LayerStash> stash =
      keep.weights.empty() && !keep.attention ? nullptr : std::make_shared<LayerStash>(keep);
  Tensor y;
  {
    GradModeScope off(false);
    RecomputedForward training_pass;
    dispatch::StashScope scope(stash.get());
    y = fn(x);
  }
  autograd::record("checkpoint", inputs, {y},
                   [fn = std::move(fn), saved = x.detach(), trainable, x_grad, rng,
                    stash](const std::vector<Tensor>& grads) -> std::vector<Tensor> {
                     std::vector<Tensor> wrt = trainable;
                     Tensor input = saved.detach();
                     if (x_grad) {
                       input.requires_grad_(true);
                       wrt.insert(wrt.begin(), input);
                     }
                     if (!grads[0].defined()) return std::vector<Tensor>(wrt.size());
                     Tensor again;
                     {
                       const std::string now = default_generator().state();
                       default_generator().set_state(rng);
                       GradModeScope on(true);
                       if (stash) stash->begin_replay();
                       dispatch::StashScope scope(stash.get());
                       again = fn(input);
                       default_generator().set_state(now);
                     }
                     if (stash) stash->end_replay();
                     return autograd::grad({again}, wrt, {grads[0]});
                   });
  return y;
}

}  // namespace detail

void Llama::set_activation_checkpointing(bool enabled, const std::string& policy) {
  checkpoint_keeps_ = detail::parse_checkpoint_policy(policy);
  checkpointing_ = enabled;
}

}  // namespace zenith::models
