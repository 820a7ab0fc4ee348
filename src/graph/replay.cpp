#include "graph/replay.h"

#include "graph/memory_plan.h"

namespace zenith::graph {

dispatch::ErasedKernel replay_kernel(OpId op, DeviceType device) {
  return dispatch::kernel_of(op, device);
}

namespace {

// The start of a tensor's buffer, when the tensor starts there.
const void* buffer_of(const Tensor& t) {
  return t.defined() && t.storage() && t.offset() == 0 ? t.storage()->data() : nullptr;
}

}  // namespace

Program::Program(const Graph& graph) : segments_(graph.segments) {
  const size_t nv = graph.values.size();
  slots_.resize(nv);
  fixed_.resize(nv);
  std::vector<View> canonical(nv);  // the view a slot's tensor has
  for (size_t v = 0; v < nv; ++v) {
    const Value& val = graph.values[v];
    switch (val.kind) {
      case ValueKind::kState:
      case ValueKind::kConstant:
        fixed_[v] = val.tensor;
        canonical[v] = View::of(val.tensor);
        break;
      case ValueKind::kInput:
        if (size_t(val.input_index) >= input_slot_.size())
          input_slot_.resize(size_t(val.input_index) + 1, -1);
        input_slot_[size_t(val.input_index)] = int(v);
        canonical[v] = View::of(val.tensor);
        break;
      case ValueKind::kIntermediate:
        canonical[v] = val.def;
        break;
    }
  }
  auto arg_of = [&](const Operand& o) {
    Arg a;
    if (!o.defined()) return a;
    a.slot = o.value;
    if (!(o.view == canonical[size_t(o.value)])) {
      a.view = int32_t(views_.size());
      views_.push_back(o.view);
    }
    return a;
  };
  auto readers = graph.readers();
  auto keep = graph.live_out();
  std::vector<std::vector<int32_t>> release(graph.nodes.size());
  for (size_t v = 0; v < nv; ++v) {
    if (keep[v]) continue;
    int last = readers[v].empty() ? graph.values[v].producer : readers[v].back();
    if (last >= 0) release[size_t(last)].push_back(int32_t(v));
  }
  int segment = -1;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& n = graph.nodes[i];
    Step s;
    s.op = n.op;
    Device device = kCPU;
    for (const Operand& o : n.inputs)
      if (o.defined()) {
        device = graph.values[size_t(o.value)].device;
        break;
      }
    s.kernel = replay_kernel(n.op, device.type);
    ZENITH_CHECK(s.kernel != nullptr, "[graph] ", op_name(n.op), " has no kernel on ",
                 device_type_name(device.type), " to replay");
    s.attrs = std::const_pointer_cast<void>(copy_attrs(n.op, n.attrs.get()));
    for (const Operand& o : n.inputs) s.args.push_back(arg_of(o));
    for (ValueId o : n.outputs) s.outs.push_back(o);
    s.release = release[i];
    s.segment = n.segment;
    s.overwrites = n.overwrites;
    while (segment < n.segment) {
      segment_begin_.push_back(steps_.size());
      ++segment;
    }
    steps_.push_back(std::move(s));
  }
  while (int(segment_begin_.size()) <= segments_) segment_begin_.push_back(steps_.size());
  for (const auto& seg : graph.segment_outputs) {
    std::vector<Arg> outs;
    for (const Binding& b : seg) outs.push_back(arg_of(b.operand));
    outputs_.push_back(std::move(outs));
  }
  outputs_.resize(size_t(segments_));
  for (const auto& [state, g] : graph.grads)
    grads_.push_back({graph.values[size_t(state)].tensor, arg_of(g.operand)});
}

Program::~Program() = default;

void Program::bind_inputs(const std::vector<Tensor>& inputs) {
  if (plan_) plan_->start_replay();
  for (size_t i = 0; i < input_slot_.size(); ++i)
    if (input_slot_[i] >= 0) slots_[size_t(input_slot_[i])] = inputs.at(i);
}

void Program::set_update_params(const UpdateParams& p) {
  for (Step& s : steps_) {
    switch (s.op) {
      case OpId::momentum_update:
        static_cast<MomentumUpdateAttrs*>(s.attrs.get())->lr = p.lr;
        break;
      case OpId::multi_momentum_update:
        static_cast<MultiMomentumUpdateAttrs*>(s.attrs.get())->lr = p.lr;
        break;
      case OpId::adam_update: {
        auto* a = static_cast<AdamUpdateAttrs*>(s.attrs.get());
        a->lr = p.lr;
        a->step = p.step;
        break;
      }
      case OpId::multi_adam_update: {
        auto* a = static_cast<MultiAdamUpdateAttrs*>(s.attrs.get());
        a->lr = p.lr;
        a->step = p.step;
        break;
      }
      default:
        break;
    }
  }
}

Tensor Program::arg_tensor(const Arg& a) const {
  if (a.slot < 0) return Tensor();
  const Tensor& base =
      fixed_[size_t(a.slot)].defined() ? fixed_[size_t(a.slot)] : slots_[size_t(a.slot)];
  if (a.view < 0) return base;
  const View& v = views_[size_t(a.view)];
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->shape = v.shape;
  impl->strides = v.strides;
  impl->offset = v.offset;
  impl->dtype = v.dtype;
  impl->device = base.device();
  // A layout view has the format of the buffer as this replay made it.
  impl->layout = v.layout ? base.impl().layout : nullptr;
  return Tensor(std::move(impl));
}

std::vector<Tensor> Program::run_segment(int segment) {
  MemoryPlan::Scope scope(plan_.get());
  const bool observed = dispatch::observed();
  for (size_t i = segment_begin_[size_t(segment)]; i < segment_begin_[size_t(segment) + 1]; ++i) {
    Step& s = steps_[i];
    scratch_.clear();
    for (const Arg& a : s.args) scratch_.push_back(arg_tensor(a));
    // Recording the plan: the buffer the output may be written over (in the arena's replays).
    const void* over = s.overwrites >= 0 && plan_ && plan_->recording()
                           ? buffer_of(scratch_[size_t(s.overwrites)])
                           : nullptr;
    // The profiler sees replayed ops as it sees dispatched ones.
    if (observed) dispatch::notify_begin(s.op);
    std::vector<Tensor> out = s.kernel(scratch_, s.attrs.get());
    if (observed)
      dispatch::notify_end({s.op, scratch_, AttrsRef(s.op, s.attrs.get()), out, false, 0});
    scratch_.clear();
    for (size_t k = 0; k < s.outs.size() && k < out.size(); ++k)
      if (s.outs[k] >= 0) slots_[size_t(s.outs[k])] = std::move(out[k]);
    const void* made =
        over && !s.outs.empty() && s.outs[0] >= 0 ? buffer_of(slots_[size_t(s.outs[0])]) : nullptr;
    for (int32_t v : s.release) slots_[size_t(v)] = Tensor();
    if (over && made) plan_->note_overwrite(over, made);
  }
  std::vector<Tensor> result;
  for (const Arg& a : outputs_[size_t(segment)]) result.push_back(arg_tensor(a));
  return result;
}

void Program::finish() {
  for (auto& [state, g] : grads_) state.set_grad(arg_tensor(g));
  release_all(true);
}

void Program::reset() { release_all(false); }

void Program::release_all(bool complete) {
  for (auto& s : slots_) s = Tensor();
  scratch_.clear();
  if (plan_) plan_->end_replay(complete);
}

void Program::enable_memory_plan(std::shared_ptr<ArenaPool> pool) {
  if (!plan_) plan_ = std::make_unique<MemoryPlan>(std::move(pool));
}

}  // namespace zenith::graph
