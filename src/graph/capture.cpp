#include "graph/capture.h"

#include <algorithm>

namespace zenith::graph {

Recorder::Recorder(std::vector<Tensor> inputs, std::vector<std::pair<std::string, Tensor>> state)
    : inputs_(std::move(inputs)), state_(std::move(state)) {
  for (auto& [name, t] : state_) state_storage_.push_back(t.storage().get());
  observer_ = dispatch::add_observer(&Recorder::observe, this);
  previous_hook_ = dispatch::set_host_read_hook(&Recorder::host_read, this);
}

Recorder::~Recorder() {
  if (!finished_) {
    dispatch::remove_observer(observer_);
    dispatch::set_host_read_hook(previous_hook_.first, previous_hook_.second);
  }
}

void Recorder::fail(std::string reason) {
  if (failure_.empty()) failure_ = std::move(reason);
}

void Recorder::begin_phase() {
  in_phase_ = true;
  graph_.segments = int(graph_.segment_outputs.size()) + 1;
}

void Recorder::end_phase(const std::vector<Tensor>& outputs) {
  in_phase_ = false;
  std::vector<Binding> bindings;
  const int segment = int(graph_.segment_outputs.size());
  for (const Tensor& t : outputs) {
    if (!t.defined()) {
      bindings.push_back({Operand{}, segment});
      continue;
    }
    bindings.push_back({operand_of(t), segment});
  }
  graph_.segment_outputs.push_back(std::move(bindings));
}

void Recorder::observe(void* self, const dispatch::OpEvent& event) {
  auto* r = static_cast<Recorder*>(self);
  // A decomposed op's ops were recorded one by one; ops a kernel dispatched itself are part
  // of that kernel's work.
  if (event.decomposed || event.depth > 0 || std::this_thread::get_id() != r->thread_) return;
  if (r->failed()) return;
  if (!r->in_phase_) {
    for (const Tensor& t : event.outputs)
      if (t.defined()) r->outside_[t.storage().get()] = t.storage();
    return;
  }
  r->record(event);
}

void Recorder::host_read(void* self, const Tensor& t) {
  auto* r = static_cast<Recorder*>(self);
  if (r->in_phase_ && std::this_thread::get_id() == r->thread_ && r->varies(t))
    r->fail("a tensor's value is read on the host inside the step (item() or to_vector() on " +
            shape_str(t.shape()) + "): control flow may depend on it");
}

bool Recorder::varies(const Tensor& t) const {
  const Storage* storage = t.storage().get();
  for (const Tensor& in : inputs_)
    if (in.defined() && in.storage().get() == storage) return true;
  for (const auto& [name, s] : state_)
    if (s.storage().get() == storage) return true;
  auto it = known_.find(storage);
  if (it != known_.end() && !it->second.alive.expired() &&
      graph_.values[size_t(it->second.id)].kind != ValueKind::kConstant)
    return true;
  auto out = outside_.find(storage);
  return out != outside_.end() && !out->second.expired();
}

ValueId Recorder::value_of(const Tensor& t) {
  const std::shared_ptr<Storage>& storage = t.storage();
  auto it = known_.find(storage.get());
  if (it != known_.end() && !it->second.alive.expired()) return it->second.id;
  auto out = outside_.find(storage.get());
  if (out != outside_.end() && !out->second.expired())
    fail("a tensor computed between the step's phases (" + shape_str(t.shape()) +
         ") is read inside one");
  Value v;
  v.nbytes = storage->nbytes();
  v.device = t.device();
  for (size_t i = 0; i < inputs_.size() && v.kind == ValueKind::kIntermediate; ++i)
    if (inputs_[i].defined() && inputs_[i].storage() == storage) {
      v.kind = ValueKind::kInput;
      v.input_index = int(i);
      v.tensor = inputs_[i];
    }
  for (size_t i = 0; i < state_.size() && v.kind == ValueKind::kIntermediate; ++i)
    if (state_[i].second.storage() == storage) {
      v.kind = ValueKind::kState;
      v.tensor = state_[i].second;
      v.name = state_[i].first;
    }
  if (v.kind == ValueKind::kIntermediate) {
    v.kind = ValueKind::kConstant;
    v.tensor = t.detach();  // keeps the storage: replays read the same buffer
  }
  ValueId id = graph_.add_value(std::move(v));
  known_[storage.get()] = {id, storage};
  return id;
}

Operand Recorder::operand_of(const Tensor& t) {
  Operand o;
  o.value = value_of(t);
  o.view = View::of(t);
  return o;
}

void Recorder::record(const dispatch::OpEvent& event) {
  Node node;
  node.op = event.op;
  const void* attrs = event.attrs.data();
  node.attrs = copy_attrs(event.op, attrs);
  node.segment = int(graph_.segment_outputs.size());
  for (const Tensor& t : event.inputs)
    node.inputs.push_back(t.defined() ? operand_of(t) : Operand{});
  for (int w : written_inputs(event.op, attrs, event.inputs.size())) {
    if (size_t(w) >= node.inputs.size() || !node.inputs[size_t(w)].defined()) continue;
    node.writes.push_back(w);
    // A constant that an optimizer or batch norm updates is state kept by something else.
    Value& v = graph_.values[size_t(node.inputs[size_t(w)].value)];
    if (v.kind == ValueKind::kConstant && event.op != OpId::copy_ && event.op != OpId::fill_)
      v.kind = ValueKind::kState;
  }
  const int index = int(graph_.nodes.size());
  for (size_t k = 0; k < event.outputs.size(); ++k) {
    const Tensor& t = event.outputs[k];
    if (!t.defined()) {
      node.outputs.push_back(kNoValue);
      continue;
    }
    auto it = known_.find(t.storage().get());
    if (it != known_.end() && !it->second.alive.expired()) {
      // An in-place op returns the tensor it wrote, and an op may return (a view of) an input
      // unchanged (to_plain of a plain tensor): readers then read that value. Any other
      // aliasing is not expressible.
      bool an_input = std::any_of(node.inputs.begin(), node.inputs.end(),
                                  [&](const Operand& o) { return o.value == it->second.id; });
      if (!an_input) {
        fail(std::string("op ") + op_name(event.op) + " returned a view of an existing tensor");
        return;
      }
      node.outputs.push_back(kNoValue);
      continue;
    }
    Value v;
    v.kind = ValueKind::kIntermediate;
    v.nbytes = t.storage()->nbytes();
    v.device = t.device();
    v.producer = index;
    v.output_index = int(k);
    v.def = View::of(t);
    ValueId id = graph_.add_value(std::move(v));
    known_[t.storage().get()] = {id, t.storage()};
    node.outputs.push_back(id);
  }
  graph_.nodes.push_back(std::move(node));
}

std::optional<Graph> Recorder::finish() {
  if (!finished_) {
    finished_ = true;
    dispatch::remove_observer(observer_);
    dispatch::set_host_read_hook(previous_hook_.first, previous_hook_.second);
  }
  if (in_phase_) fail("a phase did not end");
  for (size_t i = 0; i < state_.size() && !failed(); ++i) {
    const Tensor& t = state_[i].second;
    if (t.storage().get() != state_storage_[i])
      fail("state '" + state_[i].first +
           "' was replaced during the step instead of updated in place");
    if (!t.requires_grad() || !t.grad().defined()) continue;
    Tensor g = t.grad();
    auto it = known_.find(g.storage().get());
    if (it == known_.end() || it->second.alive.expired() ||
        graph_.values[size_t(it->second.id)].kind != ValueKind::kIntermediate) {
      fail("the gradient of '" + state_[i].first + "' was not computed by the step's ops");
      break;
    }
    ValueId state_id = kNoValue;
    for (size_t v = 0; v < graph_.values.size(); ++v)
      if (graph_.values[v].kind == ValueKind::kState &&
          graph_.values[v].tensor.storage() == t.storage())
        state_id = ValueId(v);
    if (state_id == kNoValue) {  // a parameter no op read (its gradient came from elsewhere)
      Value v;
      v.kind = ValueKind::kState;
      v.nbytes = t.storage()->nbytes();
      v.device = t.device();
      v.tensor = t;
      v.name = state_[i].first;
      state_id = graph_.add_value(std::move(v));
    }
    graph_.grads.push_back({state_id, Binding{operand_of(g), graph_.segments - 1}});
  }
  known_.clear();
  outside_.clear();
  if (failed()) return std::nullopt;
  return std::move(graph_);
}

}  // namespace zenith::graph
