// Graph mode and the profiler as _zenith.graph and _zenith.profiler: a Python step (zenith's
// value_and_grad in GRAPH_MODE) captured and replayed by graph::StepCompiler, and
// profiler::Profiler with the Profile callback of Model.train.
#include "zenith/graph.h"

#include "bindings.h"
#include "zenith/profiler.h"

namespace zenith::python {
namespace {

// A StepCompiler whose log lines go to a Python callable.
class PyStepCompiler {
 public:
  PyStepCompiler(std::vector<std::pair<std::string, Tensor>> state, py::object log)
      : log_(std::move(log)), compiler_(std::move(state), nullptr, options()) {}

  // One step over `inputs`: `phase` (a Python callable returning a list of tensors) runs on a
  // capture or when the signature runs eagerly; a replay returns the replayed tensors.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, const std::string& tag,
                          const py::function& phase) {
    py::gil_scoped_release release;
    graph::StepRun step = compiler_.begin(inputs, tag);
    std::vector<Tensor> out = step.phase([&] {
      py::gil_scoped_acquire gil;
      return phase().cast<std::vector<Tensor>>();
    });
    step.finish();
    return out;
  }
  const graph::StepCompiler& compiler() const { return compiler_; }

 private:
  graph::Options options() {
    graph::Options o;
    // A replay's outputs are fresh tensors: a Python loop may keep its losses and gradients.
    o.plan_memory = false;
    o.log = [this](const std::string& line) {
      py::gil_scoped_acquire gil;
      log_.get()(line);
    };
    return o;
  }
  PyRef log_;
  graph::StepCompiler compiler_;
};

}  // namespace

void bind_graph(py::module_& root) {
  py::module_ g = root.def_submodule("graph", "Graph mode: captured and replayed steps.");
  py::class_<PyStepCompiler>(g, "StepCompiler")
      .def(py::init<std::vector<std::pair<std::string, Tensor>>, py::object>(), py::arg("state"),
           py::arg("log"))
      .def("run", &PyStepCompiler::run, py::arg("inputs"), py::arg("tag"), py::arg("phase"))
      .def_property_readonly("captures",
                             [](const PyStepCompiler& c) { return c.compiler().captures(); })
      .def_property_readonly("replays",
                             [](const PyStepCompiler& c) { return c.compiler().replays(); })
      .def_property_readonly("eager_steps",
                             [](const PyStepCompiler& c) { return c.compiler().eager_steps(); })
      .def_property_readonly("fallback_reason",
                             [](const PyStepCompiler& c) { return c.compiler().fallback_reason(); })
      .def_property_readonly("last_capture", [](const PyStepCompiler& c) {
        const graph::CaptureReport* r = c.compiler().last_capture();
        return r ? std::optional<std::string>(r->line()) : std::nullopt;
      });

  py::module_ p = root.def_submodule("profiler", "The op and phase profiler.");
  py::class_<profiler::Profiler>(p, "Profiler")
      .def(py::init([](bool record_shapes, bool record_memory, int rank) {
             return std::make_unique<profiler::Profiler>(profiler::Options{
                 .record_shapes = record_shapes, .record_memory = record_memory, .rank = rank});
           }),
           py::arg("record_shapes") = true, py::arg("record_memory") = true, py::arg("rank") = 0)
      .def("stop", &profiler::Profiler::stop)
      .def_property_readonly("running", &profiler::Profiler::running)
      .def("write", &profiler::Profiler::write, ReleaseGIL(), py::arg("dir"),
           py::arg("suffix") = "")
      .def(
          "summary_table",
          [](const profiler::Profiler& prof, size_t top) { return prof.summary().table(top); },
          py::arg("top_ops") = 15)
      .def("summary_json",
           [](const profiler::Profiler& prof) { return prof.summary().to_json().dump(); });
  p.def("active", &profiler::active);
  // Model.train's step window: `steps` steps after `skip_steps`, written to dir when they end.
  p.def(
      "Profile",
      [](const std::string& dir, int64_t steps, int64_t skip_steps, int rank, int world,
         bool print) -> callbacks::CallbackPtr {
        return callbacks::Profile({.dir = dir,
                                   .steps = steps,
                                   .skip_steps = skip_steps,
                                   .copy_to = {},
                                   .rank = rank,
                                   .world = world,
                                   .print = print});
      },
      py::arg("dir"), py::arg("steps"), py::arg("skip_steps"), py::arg("rank") = 0,
      py::arg("world") = 1, py::arg("print") = false);
}

}  // namespace zenith::python
