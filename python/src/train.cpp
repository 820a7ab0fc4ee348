// Model, metrics, callbacks and checkpoint files as _zenith.train. Model.train/eval/predict
// release the GIL; Python callbacks, metrics and cells take it back when C++ calls them.
#include <cstdio>
#include <set>

#include "bindings.h"

namespace zenith::python {
namespace {

using callbacks::RunContext;

// C's stdout and Python's sys.stdout share file descriptor 1 but not their buffers: flushing
// both around each call into Python keeps the lines of C++ and Python callbacks in order.
void flush_python_stdout() {
  py::module_ sys = py::module_::import("sys");
  if (py::hasattr(sys, "stdout") && !sys.attr("stdout").is_none())
    sys.attr("stdout").attr("flush")();
}

// A callback written in Python. `dispatch(event, context)` gets a copy of the run context; a
// stop it requests is carried back to the run.
class PyCallback : public callbacks::Callback {
 public:
  PyCallback(py::object dispatch, std::set<std::string> events)
      : dispatch_(std::move(dispatch)), events_(std::move(events)) {}
  void on_train_begin(RunContext& c) override { call("on_train_begin", c); }
  void on_train_epoch_begin(RunContext& c) override { call("on_train_epoch_begin", c); }
  void on_train_step_begin(RunContext& c) override { call("on_train_step_begin", c); }
  void on_train_step_end(RunContext& c) override { call("on_train_step_end", c); }
  void on_train_epoch_end(RunContext& c) override { call("on_train_epoch_end", c); }
  void on_train_end(RunContext& c) override { call("on_train_end", c); }
  void on_eval_end(RunContext& c) override { call("on_eval_end", c); }

 private:
  void call(const char* event, RunContext& ctx) {
    if (!events_.count(event)) return;
    std::fflush(stdout);
    py::gil_scoped_acquire gil;
    RunContext copy = ctx;
    copy.model = nullptr;  // not exposed: the Python Model is reachable from the callback
    py::object view = py::cast(std::move(copy));
    dispatch_.get()(event, view);
    flush_python_stdout();
    const RunContext& after = view.cast<const RunContext&>();
    if (after.stop_requested && !ctx.stop_requested) ctx.request_stop(after.stop_reason);
  }
  PyRef dispatch_;
  std::set<std::string> events_;  // those the Python callback defines
};

// Lets Ctrl-C stop Model.train between steps (the run holds no GIL, so Python's handler only
// runs when asked).
class SignalCheck : public callbacks::Callback {
 public:
  void on_train_step_end(RunContext&) override {
    py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
};

// A metric written in Python: clear(), update(outputs, labels), eval().
class PyMetric : public metrics::Metric {
 public:
  explicit PyMetric(py::object metric) : metric_(std::move(metric)) {}
  void clear() override {
    py::gil_scoped_acquire gil;
    metric_.get().attr("clear")();
  }
  void update(const Tensor& outputs, const Tensor& labels, double) override {
    py::gil_scoped_acquire gil;
    metric_.get().attr("update")(outputs, labels);
  }
  double eval() const override {
    py::gil_scoped_acquire gil;
    return metric_.get().attr("eval")().cast<double>();
  }

 private:
  PyRef metric_;
};

py::list history_list(const Model& model) {
  py::list out;
  for (const auto& r : model.history()) {
    py::dict d;
    d["epoch"] = r.epoch;
    d["loss"] = r.loss;
    d["seconds"] = r.seconds;
    d["images_per_second"] = r.images_per_second;
    d["data_wait_seconds"] = r.data_wait_seconds;
    d["learning_rate"] = r.learning_rate;
    d["eval"] = r.eval;
    out.append(d);
  }
  return out;
}

}  // namespace

void bind_train(py::module_& root) {
  py::module_ m = root.def_submodule("train", "Model, metrics, callbacks, checkpoints.");

  py::class_<callbacks::EpochRecord>(m, "EpochRecord")
      .def_readonly("epoch", &callbacks::EpochRecord::epoch)
      .def_readonly("loss", &callbacks::EpochRecord::loss)
      .def_readonly("seconds", &callbacks::EpochRecord::seconds)
      .def_readonly("images_per_second", &callbacks::EpochRecord::images_per_second)
      .def_readonly("data_wait_seconds", &callbacks::EpochRecord::data_wait_seconds)
      .def_readonly("learning_rate", &callbacks::EpochRecord::learning_rate)
      .def_readonly("eval", &callbacks::EpochRecord::eval);
  py::class_<RunContext>(m, "RunContextData")
      .def_readonly("epoch", &RunContext::epoch)
      .def_readonly("epochs", &RunContext::epochs)
      .def_readonly("initial_epoch", &RunContext::initial_epoch)
      .def_readonly("step", &RunContext::step)
      .def_readonly("step_in_epoch", &RunContext::step_in_epoch)
      .def_readonly("steps_per_epoch", &RunContext::steps_per_epoch)
      .def_readonly("batch_size", &RunContext::batch_size)
      .def_readonly("loss", &RunContext::loss)
      .def_readonly("learning_rate", &RunContext::learning_rate)
      .def_readonly("step_seconds", &RunContext::step_seconds)
      .def_readonly("epoch_record", &RunContext::epoch_record)
      .def_readonly("eval_results", &RunContext::eval_results)
      .def_readonly("last_checkpoint", &RunContext::last_checkpoint)
      .def_readonly("stop_requested", &RunContext::stop_requested)
      .def("request_stop", &RunContext::request_stop,
           py::arg("reason") = "requested by a callback");

  py::class_<callbacks::Callback, std::shared_ptr<callbacks::Callback>>(m, "Callback");
  py::class_<callbacks::CheckpointConfig>(m, "CheckpointConfig")
      .def(py::init([](int64_t epochs, int64_t steps, int64_t keep, std::string prefix) {
        return callbacks::CheckpointConfig{epochs, steps, keep, std::move(prefix)};
      }))
      .def_readonly("save_checkpoint_epochs", &callbacks::CheckpointConfig::save_checkpoint_epochs)
      .def_readonly("save_checkpoint_steps", &callbacks::CheckpointConfig::save_checkpoint_steps)
      .def_readonly("keep_checkpoint_max", &callbacks::CheckpointConfig::keep_checkpoint_max)
      .def_readonly("prefix", &callbacks::CheckpointConfig::prefix);
  m.def("LossMonitor", &callbacks::LossMonitor);
  m.def("TimeMonitor", &callbacks::TimeMonitor);
  m.def("ModelCheckpoint", &callbacks::ModelCheckpoint);
  m.def("SummaryCollector", &callbacks::SummaryCollector);
  m.def("MetricsLogger", &callbacks::MetricsLogger);
  m.def("EarlyStopping", &callbacks::EarlyStopping);
  m.def("PyCallback",
        [](py::object dispatch, std::set<std::string> events) -> callbacks::CallbackPtr {
          return std::make_shared<PyCallback>(std::move(dispatch), std::move(events));
        });
  m.def("SignalCheck", []() -> callbacks::CallbackPtr { return std::make_shared<SignalCheck>(); });

  py::class_<metrics::Metric, std::shared_ptr<metrics::Metric>>(m, "Metric")
      .def("clear", &metrics::Metric::clear)
      .def("update", &metrics::Metric::update, ReleaseGIL(), py::arg("outputs"), py::arg("labels"),
           py::arg("loss") = 0.0)
      .def("eval", &metrics::Metric::eval);
  m.def("Accuracy", &metrics::Accuracy);
  m.def("TopKCategoricalAccuracy", &metrics::TopKCategoricalAccuracy);
  m.def("Loss", &metrics::Loss);
  m.def("PyMetric", [](py::object metric) -> metrics::MetricPtr {
    return std::make_shared<PyMetric>(std::move(metric));
  });

  py::class_<Model, std::shared_ptr<Model>>(m, "Model")
      .def(py::init<nn::CellPtr, nn::LossPtr, nn::OptimizerPtr,
                    std::map<std::string, metrics::MetricPtr>>())
      .def("train", &Model::train, ReleaseGIL())
      .def("fit", &Model::fit, ReleaseGIL())
      .def("eval", &Model::eval, ReleaseGIL())
      .def("predict", &Model::predict, ReleaseGIL())
      .def("save_checkpoint", &Model::save_checkpoint, ReleaseGIL(), py::arg("path"),
           py::arg("extra") = io::Metadata{})
      .def("load_checkpoint", &Model::load_checkpoint, ReleaseGIL())
      .def("set_accumulation_steps", &Model::set_accumulation_steps)
      .def("steps_per_epoch", &Model::steps_per_epoch)
      .def("set_architecture", &Model::set_architecture)
      .def_property_readonly("epochs_done", &Model::epochs_done)
      .def_property_readonly("global_step", &Model::global_step)
      .def("history", &history_list);

  // ---- files
  m.def(
      "save_checkpoint",
      [](const std::string& path, const nn::Cell& net, const nn::OptimizerPtr& opt,
         io::Metadata metadata) { io::save_checkpoint(path, net, opt.get(), std::move(metadata)); },
      ReleaseGIL());
  m.def("save_safetensors", &io::save_safetensors, ReleaseGIL(), py::arg("path"),
        py::arg("tensors"), py::arg("metadata") = io::Metadata{});
  m.def(
      "load_safetensors",
      [](const std::string& path) {
        io::Metadata meta;
        auto tensors = io::load_safetensors(path, &meta);
        return std::make_pair(std::move(tensors), std::move(meta));
      },
      ReleaseGIL());
  m.def("flush_stdout", [] { std::fflush(stdout); });
}

}  // namespace zenith::python
