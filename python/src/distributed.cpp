// Process-wide settings and the ranks of a job as _zenith.context and _zenith.communication:
// context, seeds, collectives, DistributedDataParallel and the autograd collectives of tensor
// parallelism (what zenith.nn.Dense's shard strategies run on).
#include "bindings.h"
#include "distributed/mesh.h"
#include "distributed/tensor_parallel.h"

namespace zenith::python {

void bind_parallel_optimizer(py::module_& m);  // parallel_optimizer.cpp

namespace {

communication::ReduceOp reduce_op(const std::string& name) {
  if (name == "sum") return communication::ReduceOp::SUM;
  if (name == "mean" || name == "avg") return communication::ReduceOp::AVG;
  if (name == "max") return communication::ReduceOp::MAX;
  if (name == "min") return communication::ReduceOp::MIN;
  throw py::value_error("[communication] unknown reduce op '" + name +
                        "' (known: sum, mean, max, min)");
}

}  // namespace

void bind_distributed(py::module_& root) {
  py::module_ ctx = root.def_submodule("context", "Process-wide settings.");
  ctx.def("set_context", [](int mode, const std::string& device_target, int num_threads) {
    context::set_context(
        {.mode = context::Mode(mode), .device_target = device_target, .num_threads = num_threads});
  });
  ctx.def("get_mode", [] { return int(context::get_context().mode); });
  ctx.def("get_device_target", [] { return context::get_context().device_target; });
  ctx.def("set_num_threads", &context::set_num_threads);
  ctx.def("get_num_threads", &context::get_num_threads);
  ctx.def("manual_seed", &manual_seed);
  ctx.attr("PYNATIVE_MODE") = int(context::PYNATIVE_MODE);
  ctx.attr("GRAPH_MODE") = int(context::GRAPH_MODE);

  py::module_ m = root.def_submodule("communication", "Collectives between the ranks of a job.");
  m.def(
      "init",
      [](const std::string& store, double timeout_seconds) {
        communication::Options o;
        o.store = store;
        o.timeout = std::chrono::milliseconds(int64_t(timeout_seconds * 1000));
        communication::init(o);
      },
      ReleaseGIL(), py::arg("store") = "", py::arg("timeout_seconds") = 0.0);
  m.def("is_initialized", &communication::is_initialized);
  m.def("release", &communication::release, ReleaseGIL());
  m.def("get_rank", &communication::get_rank);
  m.def("get_group_size", &communication::get_group_size);
  m.def(
      "all_reduce",
      [](const Tensor& t, const std::string& op) { communication::all_reduce(t, reduce_op(op)); },
      ReleaseGIL(), py::arg("tensor"), py::arg("op") = "sum");
  m.def(
      "broadcast", [](const Tensor& t, int root) { communication::broadcast(t, root); },
      ReleaseGIL(), py::arg("tensor"), py::arg("root") = 0);
  m.def(
      "all_gather", [](const Tensor& t) { return communication::all_gather(t); }, ReleaseGIL());
  m.def(
      "barrier", [] { communication::barrier(); }, ReleaseGIL());

  // Over the world: identity forward and all-reduce of the gradient backward (Megatron's f),
  // and its conjugate, all-reduce forward and identity backward (g).
  m.def(
      "copy_to_tensor_parallel",
      [](const Tensor& x) { return distributed::copy_to_tensor_parallel(x, {}); }, ReleaseGIL());
  m.def(
      "reduce_from_tensor_parallel",
      [](const Tensor& x) { return distributed::reduce_from_tensor_parallel(x, {}); },
      ReleaseGIL());

  m.def(
      "DistributedDataParallel",
      [](nn::CellPtr module, double bucket_cap_mb) -> nn::CellPtr {
        nn::DistributedDataParallelOptions o;
        o.bucket_cap_mb = bucket_cap_mb;
        return nn::DistributedDataParallel(std::move(module), o);
      },
      ReleaseGIL(), py::arg("module"), py::arg("bucket_cap_mb") = 25.0);
  bind_parallel_optimizer(m);

  // The job's ranks as one pipeline of `stages` stages (data parallel over the rest), for
  // zenith.nn.PipelineCell: point-to-point transfers between neighbouring stages.
  py::class_<communication::Work>(m, "Work")
      .def("wait", &communication::Work::wait, ReleaseGIL())
      .def("is_completed", &communication::Work::is_completed);
  using distributed::DeviceMesh;
  py::class_<DeviceMesh>(m, "PipelineMesh")
      .def(py::init([](int stages) { return DeviceMesh::create({.pipeline = stages}); }),
           ReleaseGIL(), py::arg("stages"))
      .def_property_readonly("stage", &DeviceMesh::pipeline_rank)
      .def_property_readonly(
          "stages", [](const DeviceMesh& d) { return d.degree(distributed::MeshDim::pipeline); })
      .def("send_next", &DeviceMesh::send_next, ReleaseGIL(), py::arg("tensor"))
      .def("recv_prev", &DeviceMesh::recv_prev, ReleaseGIL(), py::arg("tensor"))
      .def("send_prev", &DeviceMesh::send_prev, ReleaseGIL(), py::arg("tensor"))
      .def("recv_next", &DeviceMesh::recv_next, ReleaseGIL(), py::arg("tensor"))
      // Sends that return at once (1F1B: a stage sends while its peer sends the other way);
      // the tensor must stay alive until the Work is waited on.
      .def("send_next_async", &DeviceMesh::send_next_async, ReleaseGIL(), py::arg("tensor"))
      .def("send_prev_async", &DeviceMesh::send_prev_async, ReleaseGIL(), py::arg("tensor"));
}

}  // namespace zenith::python
