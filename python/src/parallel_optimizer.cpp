// MindSpore's optimizer parallel (set_auto_parallel_context(enable_parallel_optimizer=True)) for
// zenith.nn's optimizers: ZeRO stage 1 over the job's ranks. Rank r of N keeps the optimizer
// states (Adam's moments, Momentum's velocity) of rows chunk_of(rows, N, r) of each sharded
// parameter only (dim 0, torch.chunk's split as src/distributed/zero.h: the last shards shorter
// or empty), updates those rows from the gradient and all-gathers every rank's rows back into
// the parameter, so every rank ends the step with the whole updated parameters.
//
// The gradients it gets are already the same on every rank (DDP's averaged ones under
// data_parallel, the tensor-parallel layers' under semi_auto_parallel), so nothing is reduced
// here: a step adds one all-gather of the parameters to DDP's traffic. It is an nn::Optimizer,
// so zenith.Model's C++ loop drives it as any other; each parameter's rows are updated by an
// optimizer of the wrapped kind over those rows alone (Optimizer::step visits the parameters
// one by one), given the step's learning rate.
#include "bindings.h"
#include "distributed/placement.h"

namespace zenith::python {
namespace {

namespace comm = communication;
using distributed::Chunk;
using nn::StateDict;

using Factory = std::function<nn::OptimizerPtr(std::vector<Tensor>)>;

class ParallelOptimizer : public nn::Optimizer {
 public:
  // sharded[i]: parameter i's states are split over the ranks (false: replicated update, for
  // parameters already split by tensor parallelism or under the size threshold).
  ParallelOptimizer(std::vector<Tensor> params, nn::LRSchedule lr, const std::vector<bool>& sharded,
                    const Factory& make)
      : Optimizer(std::move(params), std::move(lr), 0.0) {
    ZENITH_CHECK(comm::is_initialized(),
                 "[parallel optimizer] call zenith.communication.init() first");
    ZENITH_CHECK(sharded.size() == params_.size(), "[parallel optimizer] ", sharded.size(),
                 " shard flags for ", params_.size(), " parameters");
    rank_ = comm::get_rank();
    size_ = comm::get_group_size();
    NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) {
      const Tensor& p = params_[i];
      ZENITH_CHECK(p.defined() && is_floating(p.dtype()) && p.is_contiguous() && !p.has_layout(),
                   "[parallel optimizer] parameter ", i,
                   " must be a contiguous floating-point "
                   "tensor");
      Part part;
      part.sharded = sharded[i] && size_ > 1;
      const int64_t rows = p.dim() == 0 ? 1 : p.shape()[0];
      part.row_numel = rows > 0 ? p.numel() / rows : 0;
      part.rows = distributed::chunk_of(rows, part.sharded ? size_ : 1, part.sharded ? rank_ : 0);
      part.chunk_rows = part.sharded ? (rows + size_ - 1) / size_ : rows;
      if (!part.sharded) {
        part.shard = p;
      } else if (part.rows.length > 0) {
        part.shard = Tensor::zeros(local_shape(p, part), p.dtype());
      }
      if (part.shard.defined()) part.opt = make({part.shard});
      parts_.push_back(std::move(part));
    }
  }

  std::string type_name() const override {
    for (const auto& p : parts_)
      if (p.opt) return "Parallel" + p.opt->type_name();
    return "ParallelOptimizer";
  }

  // This rank's states: "<parameter>.<slot>" with this rank's rows only (a checkpoint resumes
  // on the same number of ranks, each rank loading what it saved), and "step".
  StateDict state_dict() const override {
    StateDict out;
    for (size_t i = 0; i < parts_.size(); ++i) {
      if (!parts_[i].opt) continue;
      for (auto& [name, t] : parts_[i].opt->state_dict())
        if (name != "step") out.emplace(std::to_string(i) + "." + slot_name(name), t);
    }
    out.emplace("step", Tensor::scalar(double(step_), DType::i64));
    return out;
  }

  void load_state_dict(const StateDict& state) override {
    StateDict mine = state_dict();
    for (auto& [name, t] : mine) {
      auto it = state.find(name);
      ZENITH_CHECK(it != state.end() && it->second.shape() == t.shape(), "[", type_name(),
                   "] load_state_dict: '", name, "' ",
                   it == state.end() ? std::string("is missing") : shape_str(it->second.shape()),
                   ", expected ", shape_str(t.shape()),
                   " (this rank's shard: resume on the same number of ranks)");
    }
    ZENITH_CHECK(state.size() == mine.size(), "[", type_name(), "] load_state_dict: ", state.size(),
                 " entries, expected ", mine.size());
    NoGradGuard no_grad;
    for (size_t i = 0; i < parts_.size(); ++i) {
      if (!parts_[i].opt) continue;
      StateDict inner;
      for (auto& [name, t] : parts_[i].opt->state_dict())
        inner.emplace(name, name == "step" ? state.at("step")
                                           : state.at(std::to_string(i) + "." + slot_name(name)));
      parts_[i].opt->load_state_dict(inner);
    }
    step_ = int64_t(state.at("step").item());
  }

  // Bytes of optimizer state this rank holds.
  uint64_t state_bytes() const {
    uint64_t bytes = 0;
    for (const auto& p : parts_)
      if (p.opt)
        for (auto& [name, t] : p.opt->state_dict())
          if (name != "step") bytes += uint64_t(t.nbytes());
    return bytes;
  }

  // Rows [offset, offset + length) of parameter i that this rank updates.
  std::pair<int64_t, int64_t> rows_of(size_t i) const {
    ZENITH_CHECK(i < parts_.size(), "[parallel optimizer] no parameter ", i);
    return {parts_[i].rows.offset, parts_[i].rows.length};
  }

 protected:
  void update(size_t index, Tensor& param, const Tensor& grad, double lr) override {
    Part& part = parts_[index];
    if (!part.sharded) {
      part.opt->set_lr(nn::constant_lr(lr));
      part.opt->step();
      return;
    }
    const int64_t rows = param.dim() == 0 ? 1 : param.shape()[0];
    if (part.rows.length > 0) {
      const Shape local = local_shape(param, part);
      auto mine = [&](const Tensor& t) {
        return t.reshape({rows, part.row_numel})
            .narrow(0, part.rows.offset, part.rows.length)
            .reshape(local);
      };
      // The parameter's rows now (its data may have been replaced since the last step).
      part.shard.copy_(mine(param.detach()));
      part.shard.set_grad(mine(grad).contiguous());
      part.opt->set_lr(nn::constant_lr(lr));
      part.opt->step();
      part.shard.zero_grad();
    }
    // Every rank's updated rows into every rank's parameter.
    const int64_t block = part.chunk_rows * part.row_numel, numel = param.numel();
    Tensor padded = Tensor::zeros({block}, param.dtype());
    if (part.rows.length > 0)
      padded.narrow(0, 0, part.shard.numel()).copy_(part.shard.reshape({-1}));
    Tensor all = Tensor::empty({block * size_}, param.dtype());
    comm::all_gather(all, padded);  // the callers (Model, optimizer(grads)) released the GIL
    param.detach().reshape({numel}).copy_(all.narrow(0, 0, numel));
  }

 private:
  struct Part {
    bool sharded = false;
    Chunk rows;
    int64_t chunk_rows = 0, row_numel = 1;
    Tensor shard;  // this rank's rows (owned), or the parameter itself when not sharded
    nn::OptimizerPtr opt;
  };

  static Shape local_shape(const Tensor& p, const Part& part) {
    Shape shape = p.dim() == 0 ? Shape{1} : p.shape();
    shape[0] = part.rows.length;
    return shape;
  }
  // "moment1.0" -> "moment1": each inner optimizer has one parameter.
  static std::string slot_name(const std::string& name) {
    auto dot = name.rfind('.');
    return dot == std::string::npos ? name : name.substr(0, dot);
  }

  int rank_ = 0, size_ = 1;
  std::vector<Part> parts_;
};

}  // namespace

void bind_parallel_optimizer(py::module_& m) {
  py::class_<ParallelOptimizer, nn::Optimizer, std::shared_ptr<ParallelOptimizer>>(
      m, "ParallelOptimizer",
      "ZeRO-1 optimizer parallel: this rank's rows of each sharded parameter's states.")
      .def(
          py::init<std::vector<Tensor>, nn::LRSchedule, const std::vector<bool>&, const Factory&>(),
          py::arg("params"), py::arg("learning_rate"), py::arg("sharded"), py::arg("make"))
      .def_property_readonly("state_bytes", &ParallelOptimizer::state_bytes)
      .def("rows_of", &ParallelOptimizer::rows_of, py::arg("index"));
}

}  // namespace zenith::python
