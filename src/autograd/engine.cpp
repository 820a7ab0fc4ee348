// The tape and the backward engine: nodes are recorded as ops run; backward() visits them in
// topological order (Kahn's algorithm over dependency counts), summing gradients per input.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "core/grad_mode.h"
#include "zenith/autograd.h"
#include "zenith/ops.h"

namespace zenith::autograd {
namespace {

// The node whose backward runs on this thread (SavedOutput::get attaches to it).
thread_local Node* g_current_node = nullptr;

// Gradient-accumulated hooks by leaf. Keyed by the TensorImpl address; the weak pointer tells a
// live leaf from a later tensor that reuses a dead one's address.
struct LeafHook {
  uint64_t id;
  std::weak_ptr<TensorImpl> leaf;
  GradAccumulatedHook fn;
};
std::mutex g_hooks_mutex;
std::unordered_map<const TensorImpl*, std::vector<LeafHook>> g_hooks;
std::atomic<size_t> g_hook_count{0};  // lets backward skip the lookup when nobody listens
uint64_t g_next_hook_id = 1;

void run_grad_accumulated_hooks(const std::shared_ptr<TensorImpl>& impl) {
  if (g_hook_count.load(std::memory_order_relaxed) == 0) return;
  std::vector<GradAccumulatedHook> fns;
  {
    std::lock_guard<std::mutex> lock(g_hooks_mutex);
    auto it = g_hooks.find(impl.get());
    if (it == g_hooks.end()) return;
    for (auto& h : it->second)
      if (h.leaf.lock() == impl) fns.push_back(h.fn);
  }
  Tensor leaf(impl);
  for (auto& fn : fns) fn(leaf);
}

// Callbacks queued by queue_callback() for the backward() running on this thread.
thread_local std::vector<std::function<void()>>* g_final_callbacks = nullptr;

struct FunctionNode : Node {
  std::string op;
  BackwardFn fn;
  std::vector<std::pair<uint32_t, std::weak_ptr<TensorImpl>>> retained;

  std::vector<Tensor> apply(const std::vector<Tensor>& grads) override {
    ZENITH_CHECK(fn != nullptr, "[backward] the graph through '", op,
                 "' was already freed by an "
                 "earlier backward(); pass retain_graph=true to backward twice");
    return fn(grads);
  }
  void release() override { fn = nullptr; }
  std::string name() const override { return op; }
};

// Sums gradients into a leaf's .grad (accumulating across backward calls).
struct AccumulateGrad : Node {
  std::weak_ptr<TensorImpl> leaf;

  std::vector<Tensor> apply(const std::vector<Tensor>& grads) override {
    auto impl = leaf.lock();
    if (!impl || !grads[0].defined()) return {};
    Tensor g = grads[0];
    ZENITH_CHECK(g.shape() == impl->shape, "[backward] gradient of shape ", shape_str(g.shape()),
                 " for a leaf of shape ", shape_str(impl->shape));
    if (g.dtype() != impl->dtype) g = g.to(impl->dtype);
    // Own copy: the same gradient tensor may reach several leaves, and optimizers scale in place.
    impl->grad = impl->grad ? ops::add(Tensor(impl->grad), g).impl_ptr() : g.clone().impl_ptr();
    run_grad_accumulated_hooks(impl);
    return {};
  }
  std::string name() const override { return "AccumulateGrad"; }
};

Edge edge_for(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  auto& impl = t.impl();
  if (impl.grad_fn) return {impl.grad_fn, impl.output_nr};
  auto acc = impl.grad_accumulator.lock();
  if (!acc) {
    auto node = std::make_shared<AccumulateGrad>();
    node->leaf = t.impl_ptr();
    impl.grad_accumulator = node;
    acc = node;
  }
  return {acc, 0};
}

Tensor add_grads(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return ops::add(a, b);
}

}  // namespace

bool grad_enabled() { return core::grad_mode_enabled(); }
void set_grad_enabled(bool enabled) { core::set_grad_mode_enabled(enabled); }

bool needs_grad(std::initializer_list<Tensor> inputs) {
  if (!core::grad_mode_enabled()) return false;
  for (auto& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!core::grad_mode_enabled()) return false;
  for (auto& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void record(const std::string& op, const std::vector<Tensor>& inputs,
            const std::vector<Tensor>& outputs, BackwardFn backward) {
  auto node = std::make_shared<FunctionNode>();
  node->op = op;
  node->fn = std::move(backward);
  node->num_outputs = uint32_t(outputs.size());
  node->next.reserve(inputs.size());
  for (auto& in : inputs) node->next.push_back(edge_for(in));
  for (uint32_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined()) continue;
    for (auto& in : inputs)
      ZENITH_CHECK(!in.defined() || !in.is_same(outputs[i]), "[autograd] op '", op,
                   "' returned its input as an output");
    auto& impl = outputs[i].impl();
    if (!is_floating(impl.dtype)) continue;
    impl.grad_fn = node;
    impl.output_nr = i;
    impl.requires_grad = true;
  }
}

HookHandle& HookHandle::operator=(HookHandle&& o) noexcept {
  if (this != &o) {
    remove();
    id_ = o.id_;
    o.id_ = 0;
  }
  return *this;
}

void HookHandle::remove() {
  if (id_ == 0) return;
  std::lock_guard<std::mutex> lock(g_hooks_mutex);
  for (auto it = g_hooks.begin(); it != g_hooks.end(); ++it) {
    auto& v = it->second;
    auto h = std::find_if(v.begin(), v.end(), [&](const LeafHook& x) { return x.id == id_; });
    if (h == v.end()) continue;
    v.erase(h);
    g_hook_count.fetch_sub(1);
    if (v.empty()) g_hooks.erase(it);
    break;
  }
  id_ = 0;
}

HookHandle register_grad_accumulated_hook(const Tensor& leaf, GradAccumulatedHook hook) {
  ZENITH_CHECK(leaf.defined() && leaf.is_leaf() && leaf.requires_grad(),
               "[autograd] gradient hooks need a leaf tensor that requires grad");
  ZENITH_CHECK(hook != nullptr, "[autograd] null gradient hook");
  std::lock_guard<std::mutex> lock(g_hooks_mutex);
  uint64_t id = g_next_hook_id++;
  auto& v = g_hooks[leaf.impl_ptr().get()];
  // Drop entries of dead leaves that once lived at this address.
  std::erase_if(v, [&](const LeafHook& h) {
    bool dead = h.leaf.expired();
    if (dead) g_hook_count.fetch_sub(1);
    return dead;
  });
  v.push_back({id, leaf.impl_ptr(), std::move(hook)});
  g_hook_count.fetch_add(1);
  return HookHandle(id);
}

void queue_callback(std::function<void()> fn) {
  ZENITH_CHECK(g_final_callbacks != nullptr,
               "[autograd] queue_callback() is only valid while backward() runs");
  g_final_callbacks->push_back(std::move(fn));
}

Tensor SavedOutput::get() const {
  if (!data_.defined() || g_current_node == nullptr || !grad_enabled()) return data_;
  auto impl = std::make_shared<TensorImpl>(data_.impl());
  impl->grad_fn = g_current_node->shared_from_this();
  impl->output_nr = output_nr_;
  impl->requires_grad = true;
  return Tensor(std::move(impl));
}

namespace {

// Where grad() wants results: gradient buffer `output_nr` of a node goes to results[index].
struct Capture {
  std::unordered_map<Node*, std::vector<std::pair<uint32_t, size_t>>> at;
  std::vector<Tensor> results;
};

// The engine of backward() and grad(). With a capture, only nodes that lead to a captured one
// run, and no leaf gradient is accumulated.
void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                  bool retain_graph, bool create_graph, Capture* capture) {
  struct ModeScope {
    bool previous = core::grad_mode_enabled();
    ~ModeScope() { core::set_grad_mode_enabled(previous); }
  } mode_scope;
  core::set_grad_mode_enabled(create_graph);
  if (create_graph) retain_graph = true;
  std::vector<std::function<void()>> final_callbacks;
  struct CallbackScope {
    std::vector<std::function<void()>>*& slot;
    std::vector<std::function<void()>>* previous;
    ~CallbackScope() { slot = previous; }
  } callback_scope{g_final_callbacks, g_final_callbacks};
  g_final_callbacks = &final_callbacks;
  struct NodeScope {
    Node* previous = g_current_node;
    ~NodeScope() { g_current_node = previous; }
  } node_scope;
  // Discover the graph and count, for each node, the edges that point at it.
  std::unordered_map<Node*, int> deps;
  std::unordered_map<Node*, std::shared_ptr<Node>> owner;
  std::unordered_map<Node*, std::vector<Node*>> parents;  // for grad(): who leads where
  std::vector<Node*> stack;
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  for (size_t r = 0; r < roots.size(); ++r) {
    Edge e = edge_for(roots[r]);
    if (!e.fn) continue;
    Node* n = e.fn.get();
    if (!owner.count(n)) {
      owner[n] = e.fn;
      stack.push_back(n);
    }
    auto& buf = buffers[n];
    buf.resize(n->num_outputs);
    buf[e.input_nr] = add_grads(buf[e.input_nr], grads[r]);
  }
  std::unordered_set<Node*> seen(stack.begin(), stack.end());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (auto& e : n->next) {
      if (!e.fn) continue;
      ++deps[e.fn.get()];
      if (capture) parents[e.fn.get()].push_back(n);
      if (seen.insert(e.fn.get()).second) {
        owner[e.fn.get()] = e.fn;
        stack.push_back(e.fn.get());
      }
    }
  }
  // With a capture: a node runs only when one of its inputs leads to a captured node.
  std::unordered_set<Node*> leads;
  if (capture) {
    std::vector<Node*> work;
    for (auto& [n, _] : capture->at)
      if (leads.insert(n).second) work.push_back(n);
    while (!work.empty()) {
      Node* n = work.back();
      work.pop_back();
      for (Node* p : parents[n])
        if (leads.insert(p).second) work.push_back(p);
    }
  }
  std::vector<Node*> ready;
  for (auto& [n, _] : owner)
    if (deps[n] == 0) ready.push_back(n);
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    auto& buf = buffers[n];
    buf.resize(n->num_outputs);
    bool run = true;
    if (capture) {
      if (auto it = capture->at.find(n); it != capture->at.end())
        for (auto& [output_nr, index] : it->second) capture->results[index] = buf[output_nr];
      run = false;
      for (auto& e : n->next) run = run || (e.fn && leads.count(e.fn.get()));
    } else if (auto* fn = dynamic_cast<FunctionNode*>(n)) {
      for (auto& [i, weak] : fn->retained)
        if (auto impl = weak.lock(); impl && buf[i].defined()) impl->grad = buf[i].impl_ptr();
    }
    std::vector<Tensor> in_grads;
    if (run) {
      g_current_node = n;
      in_grads = n->apply(buf);
      g_current_node = node_scope.previous;
    }
    buffers.erase(n);
    if (run && !retain_graph) n->release();
    for (size_t i = 0; i < n->next.size(); ++i) {
      const Edge& e = n->next[i];
      if (!e.fn) continue;
      Node* m = e.fn.get();
      if (i < in_grads.size() && in_grads[i].defined()) {
        auto& mb = buffers[m];
        mb.resize(m->num_outputs);
        mb[e.input_nr] = add_grads(mb[e.input_nr], in_grads[i]);
      }
      if (--deps[m] == 0) ready.push_back(m);
    }
  }
  // Callbacks may queue further callbacks; run until none is left.
  for (size_t i = 0; i < final_callbacks.size(); ++i) {
    auto fn = std::move(final_callbacks[i]);
    fn();
  }
}

}  // namespace

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph,
              bool create_graph) {
  run_backward(roots, grads, retain_graph, create_graph, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool create_graph) {
  ZENITH_CHECK(grad_outputs.empty() || grad_outputs.size() == outputs.size(), "[grad] ",
               grad_outputs.size(), " grad_outputs for ", outputs.size(), " outputs");
  std::vector<Tensor> seeds;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    ZENITH_CHECK(out.defined() && out.requires_grad(), "[grad] output ", i,
                 " does not require grad: nothing to differentiate");
    Tensor g = grad_outputs.empty() ? Tensor() : grad_outputs[i];
    if (!g.defined()) {
      ZENITH_CHECK(out.numel() == 1,
                   "[grad] grad_outputs can be implied only for scalar "
                   "outputs, output ",
                   i, " has shape ", shape_str(out.shape()));
      g = Tensor::ones(out.shape(), out.dtype(), out.device());
    }
    ZENITH_CHECK(g.shape() == out.shape(), "[grad] grad_output ", i, " has shape ",
                 shape_str(g.shape()), ", output ", shape_str(out.shape()));
    seeds.push_back(g);
  }
  Capture capture;
  capture.results.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    ZENITH_CHECK(inputs[i].defined() && inputs[i].requires_grad(), "[grad] input ", i,
                 " does not require grad");
    Edge e = edge_for(inputs[i]);
    capture.at[e.fn.get()].push_back({e.input_nr, i});
  }
  // A leaf's node must stay alive while the graph runs: edge_for may have just created it.
  std::vector<std::shared_ptr<Node>> keep;
  for (auto& t : inputs) keep.push_back(edge_for(t).fn);
  run_backward(outputs, seeds, /*retain_graph=*/create_graph, create_graph, &capture);
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor& r = capture.results[i];
    if (r.defined() && r.dtype() != inputs[i].dtype()) r = r.to(inputs[i].dtype());
  }
  return capture.results;
}

void retain_grad_of(const Tensor& t) {
  auto* fn = dynamic_cast<FunctionNode*>(t.impl().grad_fn.get());
  if (fn) fn->retained.push_back({t.impl().output_nr, t.impl_ptr()});
}

}  // namespace zenith::autograd
