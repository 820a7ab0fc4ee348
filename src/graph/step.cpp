// Graph mode's driver: per input signature, capture the step once (graph/capture.h), run the
// passes (graph/passes/passes.h), compile a replay program with a memory plan
// (graph/replay.h, graph/memory_plan.h), and replay it on later calls.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>

#include "core/trace_range.h"
#include "graph/capture.h"
#include "graph/memory_plan.h"
#include "graph/passes/passes.h"
#include "graph/peak_live.h"
#include "graph/replay.h"
#include "zenith/graph.h"

namespace zenith::graph {

using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// A fusion's switch: the environment variable `name` set to 0 leaves it out (on by default,
// with the other fusions). ZENITH_GRAPH_LINEAR_CROSS_ENTROPY: the output layer and its loss;
// ZENITH_GRAPH_CONV_POOL: the first convolution with its ReLU and max pooling.
bool fusion_enabled(const char* name) {
  const char* env = std::getenv(name);
  if (!env || !*env) return true;
  const std::string v = env;
  ZENITH_CHECK(v == "0" || v == "1", "[graph] ", name, " must be 0 or 1, got '", v, "'");
  return v == "1";
}

std::string megabytes(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", double(bytes) / 1e6);
  return buf;
}

// The signature of a step's inputs: what a replay must see the same.
std::string signature(const std::vector<Tensor>& inputs, const std::string& tag) {
  std::ostringstream os;
  os << tag << "|";
  for (const Tensor& t : inputs) {
    if (!t.defined()) {
      os << "_;";
      continue;
    }
    os << dtype_name(t.dtype()) << shape_str(t.shape()) << shape_str(t.strides()) << "@"
       << t.offset() << t.device().str() << (t.has_layout() ? "L" : "") << ";";
  }
  return os.str();
}

// The optimizer's hyperparameters a replay sets on the update nodes; a capture checks that the
// updates it recorded used exactly these (otherwise a replay could not follow the schedule).
UpdateParams update_params(const nn::Optimizer* opt) {
  if (!opt) return {};
  return {opt->current_lr(), opt->step_count() + 1};
}

std::string check_updates(const Graph& g, const UpdateParams& p) {
  for (const Node& n : g.nodes) {
    if (n.op == OpId::momentum_update && n.get<OpId::momentum_update>().lr != p.lr)
      return "an optimizer update used a learning rate other than the optimizer's current one";
    if (n.op == OpId::adam_update &&
        (n.get<OpId::adam_update>().lr != p.lr || n.get<OpId::adam_update>().step != p.step))
      return "an Adam update used a learning rate or step other than the optimizer's";
  }
  return "";
}

}  // namespace

std::string CaptureReport::line() const {
  std::ostringstream os;
  os << "graph: " << ops << " ops -> " << ops_after << " after fusion (";
  bool first = true;
  auto item = [&](const std::string& name, int n) {
    if (n == 0) return;
    os << (first ? "" : ", ") << name << " " << n;
    first = false;
  };
  for (const auto& [kind, n] : fusions) item(kind, n);
  item("constants folded", constants);
  item("common subexpressions", common);
  item("layout conversions", layouts);
  item("copies reused", in_place);
  item("written over dying inputs", overwrites);
  item("updates in backward", updates_in_backward);
  item("dead", dead);
  if (first) os << "none";
  os << "); activations " << megabytes(activations_before) << " -> "
     << megabytes(activations_after);
  return os.str();
}

std::map<std::string, double> CaptureReport::scalars() const {
  std::map<std::string, double> s = {
      {"graph/ops", ops},
      {"graph/ops_after_fusion", ops_after},
      {"graph/activations_mb_before", double(activations_before) / 1e6},
      {"graph/activations_mb_after", double(activations_after) / 1e6},
      {"graph/capture_ms", capture_ms},
      {"graph/compile_ms", compile_ms},
      {"graph/updates_in_backward", updates_in_backward}};
  for (const auto& [kind, n] : fusions) s["graph/fused/" + kind] = n;
  return s;
}

// A signature's compiled step, or why it runs eagerly.
class Compiled {
 public:
  std::string reason;
  std::unique_ptr<Program> program;
  // Per phase, the range (core::Range) its capture began first, -1 for none: its replays are
  // marked so for the profiler (forward, backward, optimizer as Model.train marks them; work
  // the passes moved between phases, such as an update in the backward, counts where it runs).
  std::vector<int> ranges;
};

struct StepRun::State {
  enum Mode { kEager, kCapture, kReplay } mode = kEager;
  StepCompiler* owner = nullptr;
  std::string key;
  std::vector<Tensor> inputs;
  std::unique_ptr<Recorder> recorder;
  std::shared_ptr<Compiled> compiled;
  UpdateParams expected;
  std::vector<int> ranges;  // a capture's: each phase's first range (Compiled::ranges)
  Clock::time_point start = Clock::now();
  int next_phase = 0;
  bool finished = false;

  ~State() {
    if (mode == kReplay && !finished && compiled) compiled->program->reset();
  }
};

StepRun::StepRun(std::unique_ptr<State> s) : s_(std::move(s)) {}
StepRun::StepRun(StepRun&&) noexcept = default;
StepRun& StepRun::operator=(StepRun&&) noexcept = default;
StepRun::~StepRun() = default;

StepRun StepRun::eager() { return StepRun(std::make_unique<State>()); }

bool StepRun::replaying() const { return s_ && s_->mode == State::kReplay; }
bool StepRun::capturing() const { return s_ && s_->mode == State::kCapture; }

std::vector<Tensor> StepRun::phase(const std::function<std::vector<Tensor>()>& fn) {
  ZENITH_CHECK(s_ && !s_->finished, "[graph] phase() after finish()");
  State& s = *s_;
  switch (s.mode) {
    case State::kEager:
      return fn();
    case State::kCapture: {
      s.recorder->begin_phase();
      std::vector<Tensor> out;
      {
        core::FirstRangeWatch watch;
        out = fn();
        s.ranges.push_back(watch.first());
      }
      s.recorder->end_phase(out);
      return out;
    }
    case State::kReplay: {
      Program& p = *s.compiled->program;
      ZENITH_CHECK(s.next_phase < p.segments(), "[graph] the step has more phases (",
                   s.next_phase + 1, ") than the graph captured for it (", p.segments(), ")");
      try {
        if (s.next_phase == 0) {
          p.bind_inputs(s.inputs);
          p.set_update_params(update_params(s.owner->optimizer_));
        }
        std::optional<core::TraceRange> range;
        const std::vector<int>& ranges = s.compiled->ranges;
        if (size_t(s.next_phase) < ranges.size() && ranges[size_t(s.next_phase)] >= 0)
          range.emplace(core::Range(ranges[size_t(s.next_phase)]));
        std::vector<Tensor> out = p.run_segment(s.next_phase++);
        StepCompiler& c = *s.owner;
        if (!c.held_logged_ && c.arenas_->allocations_for_held() > 0) {
          c.held_logged_ = true;
          c.log(
              "graph: tensors an earlier replay handed out (a loss, a gradient) are still held "
              "while another graph replays: it takes a new memory arena and the old one stays "
              "until they go (clone() what you keep)");
        }
        return out;
      } catch (...) {
        p.reset();
        s.finished = true;
        throw;
      }
    }
  }
  return {};
}

void StepRun::finish() {
  ZENITH_CHECK(s_ && !s_->finished, "[graph] finish() twice");
  State& s = *s_;
  s.finished = true;
  if (s.mode == State::kEager) {
    if (s.owner) s.owner->eager_steps_ += 1;
    return;
  }
  StepCompiler& c = *s.owner;
  switch (s.mode) {
    case State::kEager:
      return;
    case State::kReplay: {
      Program& p = *s.compiled->program;
      if (s.next_phase != p.segments()) {
        p.reset();
        ZENITH_FAIL("[graph] the step ran ", s.next_phase, " phases, its graph has ", p.segments());
      }
      p.finish();
      if (c.optimizer_) c.optimizer_->count_replayed_step();
      c.replays_ += 1;
      return;
    }
    case State::kCapture:
      break;
  }
  const double capture_ms = ms_since(s.start);
  std::optional<Graph> graph = s.recorder->finish();
  const std::string failure = s.recorder->failure();
  s.recorder.reset();
  auto compiled = std::make_shared<Compiled>();
  compiled->reason = graph ? check_updates(*graph, s.expected) : failure;
  if (!compiled->reason.empty()) {
    c.fallback_ = compiled->reason;
    c.log("graph: this step runs eagerly (" + compiled->reason + ")");
  }
  c.captures_ += 1;
  if (graph && compiled->reason.empty()) {
    const auto t0 = Clock::now();
    auto report = std::make_unique<CaptureReport>();
    report->ops = int(graph->nodes.size());
    report->activations_before = graph->peak_intermediate_bytes(kernel_workspace_bytes);
    // With the updates in the backward, the gradients die at their update (none left in .grad).
    if (c.options_.update_in_backward) graph->grads.clear();
    PassReport passes = optimize(
        *graph, {.fuse = c.options_.fuse,
                 .linear_cross_entropy = fusion_enabled("ZENITH_GRAPH_LINEAR_CROSS_ENTROPY"),
                 .conv_pool = fusion_enabled("ZENITH_GRAPH_CONV_POOL"),
                 .update_in_backward = c.options_.update_in_backward});
    report->ops_after = passes.ops_after;
    report->fusions = passes.fusions;
    report->dead = passes.dead;
    report->common = passes.common;
    report->constants = passes.constants;
    report->layouts = passes.layouts;
    report->in_place = passes.in_place;
    report->overwrites = passes.overwrites;
    report->updates_in_backward = passes.updates_in_backward;
    report->activations_after = graph->peak_intermediate_bytes(kernel_workspace_bytes);
    report->live_at_peak = live_at_peak_groups(*graph, &report->peak_op);
    compiled->program = std::make_unique<Program>(*graph);
    compiled->ranges = s.ranges;
    if (c.options_.plan_memory) compiled->program->enable_memory_plan(c.arenas_);
    report->capture_ms = capture_ms;
    report->compile_ms = ms_since(t0);
    c.log(report->line());
    c.new_ = std::make_unique<CaptureReport>(*report);
    c.last_ = std::move(report);
  }
  c.last_used_ = compiled;
  c.cache_.push_back({s.key, compiled});
  while (c.cache_.size() > c.options_.max_graphs) {
    if (c.evicted_.size() >= 4096) c.evicted_.clear();  // bounded: signatures are strings
    c.evicted_.insert(c.cache_.front().first);
    c.cache_.erase(c.cache_.begin());
  }
}

StepCompiler::StepCompiler(std::vector<std::pair<std::string, Tensor>> state,
                           nn::Optimizer* optimizer, Options options)
    : state_(std::move(state)),
      optimizer_(optimizer),
      options_(std::move(options)),
      arenas_(std::make_shared<ArenaPool>()) {
  ZENITH_CHECK(options_.max_graphs >= 1, "[graph] max_graphs must be at least 1");
}

StepCompiler::~StepCompiler() = default;

void StepCompiler::log(const std::string& line) const {
  if (options_.log) return options_.log(line);
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

size_t StepCompiler::cached() const { return cache_.size(); }

size_t StepCompiler::arena_bytes() const { return arenas_->bytes(); }

int64_t StepCompiler::arena_allocations() const { return arenas_->allocations(); }

size_t StepCompiler::planned_peak_bytes() const {
  if (!last_used_ || !last_used_->program || !last_used_->program->memory_plan()) return 0;
  return last_used_->program->memory_plan()->recorded_peak_bytes();
}

StepRun StepCompiler::begin(const std::vector<Tensor>& inputs, const std::string& tag) {
  auto s = std::make_unique<StepRun::State>();
  s->owner = this;
  s->key = signature(inputs, tag);
  s->inputs = inputs;
  // Gradients left from an earlier step would be summed into: the graph computes them afresh.
  for (auto& [name, t] : state_)
    if (t.requires_grad() && t.grad().defined()) {
      if (fallback_.empty())
        log("graph: '" + name +
            "' still has a gradient; call zero_grad() "
            "before the step (running it eagerly)");
      fallback_ = "gradients not cleared before the step";
      return StepRun(std::move(s));
    }
  for (auto it = cache_.begin(); it != cache_.end(); ++it) {
    if (it->first != s->key) continue;
    auto entry = *it;
    cache_.erase(it);
    cache_.push_back(entry);  // most recently used last
    last_used_ = entry.second;
    if (!entry.second->reason.empty()) return StepRun(std::move(s));  // eager, logged once
    s->mode = StepRun::State::kReplay;
    s->compiled = entry.second;
    return StepRun(std::move(s));
  }
  if (evicted_.erase(s->key) && recaptures_++ == 0)
    log("graph: capturing again a step whose graph was dropped from the cache (it keeps " +
        std::to_string(options_.max_graphs) +
        "): the steps' inputs take more shapes than that, each captured anew; pad them to fewer "
        "(zenith finetune: --pad-to-multiple-of)");
  // The capture runs the step eagerly, unfused: the shared arena, idle until the next replay,
  // goes first where nothing of it is held (the next replay allocates it again).
  arenas_->trim();
  s->mode = StepRun::State::kCapture;
  s->expected = update_params(optimizer_);
  s->recorder = std::make_unique<Recorder>(inputs, state_);
  return StepRun(std::move(s));
}

}  // namespace zenith::graph
