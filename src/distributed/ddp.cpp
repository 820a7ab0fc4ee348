// DistributedDataParallel: broadcast at start, bucketed asynchronous gradient all-reduce driven
// by the autograd engine's gradient-accumulated hooks, and a final callback that waits for every
// bucket before backward() returns.
#include "zenith/ddp.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <sstream>

#include "core/trace_range.h"

namespace zenith::nn {

namespace comm = communication;
using Clock = std::chrono::steady_clock;

namespace {

int root_rank(const comm::Group& group) { return group.is_world() ? 0 : group.ranks().at(0); }

// Broadcasts `tensors` from the group's first rank, packed into one flat tensor per dtype (one
// collective per dtype instead of one per tensor).
void broadcast_packed(const std::vector<Tensor>& tensors, const comm::Group& group) {
  NoGradGuard no_grad;
  std::map<DType, std::vector<Tensor>> by_dtype;
  for (const auto& t : tensors)
    if (t.numel() > 0) by_dtype[t.dtype()].push_back(t);
  for (auto& [dtype, list] : by_dtype) {
    int64_t total = 0;
    for (const auto& t : list) total += t.numel();
    Tensor flat = Tensor::empty({total}, dtype, list[0].device());
    int64_t off = 0;
    for (const auto& t : list) {
      flat.narrow(0, off, t.numel()).view(t.shape()).copy_(t);
      off += t.numel();
    }
    comm::broadcast(flat, root_rank(group), group);
    off = 0;
    for (const auto& t : list) {
      Tensor(t).copy_(flat.narrow(0, off, t.numel()).view(t.shape()));
      off += t.numel();
    }
  }
}

}  // namespace

// One bucket: a flat buffer holding the gradients of `params`, all-reduced as one message.
struct Bucket {
  std::vector<size_t> params;
  std::vector<int64_t> offsets;  // element offset of each parameter in `buffer`
  Tensor buffer;
  size_t pending = 0;  // gradients still missing in this backward
  bool launched = false;
  comm::Work work;
};

struct DistributedDataParallelImpl::Reducer {
  DistributedDataParallelImpl* owner = nullptr;
  std::vector<Tensor> params;
  std::vector<std::string> names;
  std::vector<size_t> bucket_of, slot_of;  // per parameter
  std::vector<Bucket> buckets;
  std::vector<bool> ready;  // per parameter, in the backward in progress
  size_t next_launch = 0;
  bool active = false;  // a backward has touched our parameters and not yet finished
  std::vector<autograd::HookHandle> hooks;

  void on_grad(size_t i) {
    if (!owner->require_sync_) return;  // no_sync(): the gradient stays in .grad(), local
    if (!active) {
      active = true;
      std::fill(ready.begin(), ready.end(), false);
      for (auto& b : buckets) b.pending = b.params.size(), b.launched = false;
      next_launch = 0;
      autograd::queue_callback([this] { finish(); });
    }
    ZENITH_CHECK(!ready[i], "[DistributedDataParallel] parameter '", names[i],
                 "' got its gradient twice in one backward");
    ready[i] = true;
    copy_in(i, params[i].grad());
    Bucket& b = buckets[bucket_of[i]];
    if (--b.pending == 0) owner->stats_.buckets_overlapped += int64_t(launch_ready());
  }

  void copy_in(size_t i, const Tensor& grad) {
    Bucket& b = buckets[bucket_of[i]];
    Tensor slot = b.buffer.narrow(0, b.offsets[slot_of[i]], params[i].numel());
    if (!grad.defined()) {
      slot.zero_();
    } else if (!(grad.storage() == b.buffer.storage() &&
                 grad.offset() == slot.offset())) {  // not already this slot
      slot.view(params[i].shape()).copy_(grad);
    }
  }

  // Buckets start strictly in index order, so every rank issues the same collectives in the
  // same order even if its gradients arrive in a different one.
  size_t launch_ready() {
    size_t launched = 0;
    while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
      Bucket& b = buckets[next_launch++];
      b.work = comm::all_reduce_async(b.buffer, comm::ReduceOp::AVG, owner->options_.group);
      b.launched = true;
      ++launched;
    }
    return launched;
  }

  // End of backward: parameters that got no gradient contribute zeros (or the gradient they
  // already hold); wait for every bucket; point each .grad() at its averaged slot.
  void finish() {
    struct Reset {
      bool& flag;
      ~Reset() { flag = false; }
    } reset{active};
    for (size_t i = 0; i < params.size(); ++i) {
      if (ready[i]) continue;
      ready[i] = true;
      copy_in(i, params[i].grad());
      --buckets[bucket_of[i]].pending;
    }
    launch_ready();
    auto start = Clock::now();
    {
      core::TraceRange range(core::Range::communication_wait);
      for (auto& b : buckets) b.work.wait();
    }
    auto& stats = owner->stats_;
    stats.wait_seconds += std::chrono::duration<double>(Clock::now() - start).count();
    stats.steps += 1;
    stats.buckets_reduced += int64_t(buckets.size());
    for (auto& b : buckets) stats.bytes_reduced += b.buffer.nbytes();
    for (size_t i = 0; i < params.size(); ++i) {
      Bucket& b = buckets[bucket_of[i]];
      params[i].set_grad(
          b.buffer.narrow(0, b.offsets[slot_of[i]], params[i].numel()).view(params[i].shape()));
    }
  }
};

DistributedDataParallelImpl::DistributedDataParallelImpl(CellPtr module,
                                                         DistributedDataParallelOptions options)
    : module_(std::move(module)), options_(std::move(options)) {
  ZENITH_CHECK(module_, "[DistributedDataParallel] module is null");
  ZENITH_CHECK(comm::is_initialized(),
               "[DistributedDataParallel] communication is not "
               "initialized; call communication::init() first");
  ZENITH_CHECK(options_.bucket_cap_mb > 0 && options_.last_bucket_cap_mb > 0,
               "[DistributedDataParallel] bucket_cap_mb and last_bucket_cap_mb must be "
               "positive, got ",
               options_.bucket_cap_mb, " and ", options_.last_bucket_cap_mb);
  ZENITH_CHECK(options_.group.is_member(),
               "[DistributedDataParallel] this rank is not a member "
               "of the group");
  // No name: parameters keep the wrapped cell's names (see Cell::named_parameters).
  register_cell("", module_);

  auto reducer = std::make_unique<Reducer>();
  reducer->owner = this;
  for (auto& [name, p] : module_->named_parameters()) {
    if (!p.requires_grad()) continue;
    ZENITH_CHECK(p.dtype() == DType::f32 || p.dtype() == DType::f64,
                 "[DistributedDataParallel] parameter '", name, "' is ", dtype_name(p.dtype()),
                 "; gradients can be all-reduced in float32 or float64 only");
    reducer->params.push_back(p);
    reducer->names.push_back(name);
  }
  ZENITH_CHECK(!reducer->params.empty(),
               "[DistributedDataParallel] the module has no trainable "
               "parameters");

  // Same values everywhere before the first step.
  std::vector<Tensor> state;
  for (auto& [_, t] : module_->named_parameters()) state.push_back(t);
  for (auto& [_, t] : module_->named_buffers()) state.push_back(t);
  broadcast_packed(state, options_.group);

  // Buckets are cut in registration order, the first (the first layers' gradients, which
  // backward produces last) at most last_bucket_cap_mb so that little communication is left
  // when backward ends, the others at most bucket_cap_mb; a new bucket also starts where the
  // dtype or device changes, and a parameter larger than the cap gets a bucket of its own. They
  // are then numbered in reverse, the order in which they become ready.
  const int64_t cap = int64_t(options_.bucket_cap_mb * 1024 * 1024);
  const int64_t last_cap = std::min(cap, int64_t(options_.last_bucket_cap_mb * 1024 * 1024));
  const size_t n = reducer->params.size();
  reducer->bucket_of.resize(n);
  reducer->slot_of.resize(n);
  reducer->ready.assign(n, false);
  std::vector<std::vector<size_t>> groups;
  int64_t bytes = 0;
  for (size_t i = 0; i < n; ++i) {
    const Tensor& p = reducer->params[i];
    int64_t pbytes = int64_t(p.nbytes());
    int64_t limit = groups.size() == 1 ? last_cap : cap;  // of the group being filled
    bool fresh = groups.empty() || bytes + pbytes > limit ||
                 reducer->params[groups.back()[0]].dtype() != p.dtype() ||
                 reducer->params[groups.back()[0]].device() != p.device();
    if (fresh) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(i);
    bytes += pbytes;
  }
  for (auto g = groups.rbegin(); g != groups.rend(); ++g)
    layout_.emplace_back(g->rbegin(), g->rend());
  for (size_t bi = 0; bi < layout_.size(); ++bi) {
    Bucket b;
    b.params = layout_[bi];
    int64_t total = 0;
    for (size_t s = 0; s < b.params.size(); ++s) {
      size_t i = b.params[s];
      reducer->bucket_of[i] = bi;
      reducer->slot_of[i] = s;
      b.offsets.push_back(total);
      total += reducer->params[i].numel();
    }
    const Tensor& first = reducer->params[b.params[0]];
    b.buffer = Tensor::zeros({total}, first.dtype(), first.device());
    reducer->buckets.push_back(std::move(b));
  }
  Reducer* r = reducer.get();
  for (size_t i = 0; i < n; ++i)
    reducer->hooks.push_back(autograd::register_grad_accumulated_hook(
        reducer->params[i], [r, i](const Tensor&) { r->on_grad(i); }));
  reducer_ = std::move(reducer);
}

DistributedDataParallelImpl::~DistributedDataParallelImpl() = default;

int DistributedDataParallelImpl::rank() const { return options_.group.rank(); }
int DistributedDataParallelImpl::world_size() const { return options_.group.size(); }

void DistributedDataParallelImpl::sync_buffers() {
  std::vector<Tensor> buffers;
  for (auto& [_, t] : module_->named_buffers()) buffers.push_back(t);
  if (!buffers.empty()) broadcast_packed(buffers, options_.group);
}

Tensor DistributedDataParallelImpl::forward(const Tensor& x) {
  // A backward that failed part-way (an exception in a hook or a node) never ran finish().
  reducer_->active = false;
  // Only in training: evaluation may run a different number of batches on each rank.
  if (training() && options_.broadcast_buffers) sync_buffers();
  return module_->forward(x);
}

std::string DistributedDataParallelImpl::extra_repr() const {
  std::ostringstream os;
  os << "world_size=" << world_size() << ", buckets=" << layout_.size()
     << ", bucket_cap_mb=" << options_.bucket_cap_mb;
  return os.str();
}

std::shared_ptr<DistributedDataParallelImpl> DistributedDataParallel(
    CellPtr module, DistributedDataParallelOptions options) {
  return std::make_shared<DistributedDataParallelImpl>(std::move(module), std::move(options));
}

}  // namespace zenith::nn
