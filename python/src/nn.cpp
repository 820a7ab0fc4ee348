// Cells for Python as _zenith.nn: the C++ Cell, subclassable in Python (the subclass's
// construct(x) is the C++ forward, so Model, DDP and SequentialCell run Python cells), the
// built-in layers and losses, the initialisers and the model zoo.
#include <mutex>

#include "bindings.h"

namespace zenith::python {
namespace {

// A Cell written in Python: construct() is its forward; parameters and sub-cells are registered
// as the Python object's attributes are set (zenith/nn/cell.py).
class PyCell : public nn::Cell {
 public:
  Tensor forward(const Tensor& x) override {
    py::gil_scoped_acquire gil;
    py::function construct = py::get_override(static_cast<const nn::Cell*>(this), "construct");
    if (!construct)
      throw Error("[Cell] the Python object of this cell is gone (keep a reference to it)");
    return returned_tensor(construct(x), "[" + type_name() + "] construct() called from C++");
  }
  std::string type_name() const override {
    std::call_once(name_once_, [&] {
      py::gil_scoped_acquire gil;
      py::function f = py::get_override(static_cast<const nn::Cell*>(this), "_type_name");
      name_ = f ? f().cast<std::string>() : "Cell";
    });
    return name_;
  }
  std::string extra_repr() const override {
    py::gil_scoped_acquire gil;
    py::function f = py::get_override(static_cast<const nn::Cell*>(this), "extend_repr");
    return f ? f().cast<std::string>() : "";
  }

  Tensor add_parameter(const std::string& name, Tensor value, bool trainable) {
    return set_parameter(name, std::move(value), trainable);
  }
  void add_cell(const std::string& name, nn::CellPtr cell) { set_cell(name, std::move(cell)); }
  bool remove(const std::string& name) { return remove_entry(name); }

 private:
  mutable std::once_flag name_once_;
  mutable std::string name_;
};

PyCell& python_cell(nn::Cell& cell) {
  auto* p = dynamic_cast<PyCell*>(&cell);
  if (!p)
    throw py::type_error("[" + cell.type_name() +
                         "] a built-in layer takes no new parameters or cells; subclass "
                         "zenith.nn.Cell and hold the layer as an attribute instead");
  return *p;
}

// A loss function written in Python (a Cell with construct(logits, labels)), for Model.
class PyLoss : public nn::LossCell {
 public:
  explicit PyLoss(py::object fn) : fn_(std::move(fn)) {}
  Tensor forward(const Tensor& logits, const Tensor& labels) override {
    py::gil_scoped_acquire gil;
    return returned_tensor(fn_.get()(logits, labels), "the loss function");
  }
  std::string type_name() const override { return "PythonLoss"; }

 private:
  PyRef fn_;
};

// nn.CrossEntropyLoss: class indices or probabilities, decided by the labels' dtype.
class CrossEntropyLoss : public nn::LossCell {
 public:
  CrossEntropyLoss(std::string reduction, int64_t ignore_index, double label_smoothing)
      : reduction_(std::move(reduction)),
        ignore_index_(ignore_index),
        label_smoothing_(label_smoothing) {
    ZENITH_CHECK(reduction_ == "mean" || reduction_ == "sum" || reduction_ == "none",
                 "[CrossEntropyLoss] reduction must be 'mean', 'sum' or 'none', got '", reduction_,
                 "'");
  }
  Tensor forward(const Tensor& logits, const Tensor& labels) override {
    return ops::cross_entropy(logits, labels, reduction_, ignore_index_, label_smoothing_);
  }
  std::string type_name() const override { return "CrossEntropyLoss"; }

 private:
  std::string reduction_;
  int64_t ignore_index_;
  double label_smoothing_;
};

}  // namespace

void bind_nn(py::module_& root) {
  py::module_ m = root.def_submodule("nn", "Cells, losses and initialisers.");

  py::class_<nn::Cell, PyCell, std::shared_ptr<nn::Cell>>(m, "Cell", py::dynamic_attr())
      .def(py::init<>())
      .def(
          "_forward", [](nn::Cell& c, const Tensor& x) { return c.forward(x); }, ReleaseGIL())
      .def("_named_parameters", &nn::Cell::named_parameters)
      .def("_named_buffers", &nn::Cell::named_buffers)
      .def("_named_children", [](const nn::Cell& c) { return c.named_children(); })
      .def("_set_train", &nn::Cell::set_train)
      .def_property_readonly("training", &nn::Cell::training)
      .def("_state_dict", &nn::Cell::state_dict)
      .def("_load_state_dict", &nn::Cell::load_state_dict, ReleaseGIL(), py::arg("state"),
           py::arg("strict"))
      .def("_cpp_type_name", &nn::Cell::type_name)
      .def("_repr", [](const nn::Cell& c) { return c.repr(); })
      .def("_to", [](nn::Cell& c, py::handle dtype) { c.to(dtype_arg(dtype)); })
      .def("_num_parameters", &nn::Cell::num_parameters, py::arg("trainable_only") = false)
      .def("_set_parameter",
           [](nn::Cell& c, const std::string& name, const Tensor& value, bool trainable) {
             return python_cell(c).add_parameter(name, value, trainable);
           })
      .def("_set_cell", [](nn::Cell& c, const std::string& name,
                           nn::CellPtr cell) { python_cell(c).add_cell(name, std::move(cell)); })
      .def("_remove_entry",
           [](nn::Cell& c, const std::string& name) { return python_cell(c).remove(name); })
      .def("_is_builtin", [](nn::Cell& c) { return dynamic_cast<PyCell*>(&c) == nullptr; });

  // ---- built-in layers (zenith/nn/layers.py gives them classes and MindSpore's arguments)
  m.def("SequentialCell", [](std::vector<nn::CellPtr> cells) -> nn::CellPtr {
    return nn::SequentialCell(std::move(cells));
  });
  m.def("_sequential_append", [](nn::Cell& seq, nn::CellPtr cell) {
    auto* s = dynamic_cast<nn::SequentialCellImpl*>(&seq);
    if (!s) throw py::type_error("[SequentialCell] append() on a " + seq.type_name());
    s->append(std::move(cell));
  });
  m.def("Conv2d", &nn::Conv2d);
  m.def("Dense", &nn::Dense);
  m.def("ReLU", &nn::ReLU);
  m.def("GELU", &nn::GELU);
  m.def("SiLU", &nn::SiLU);
  m.def("Sigmoid", &nn::Sigmoid);
  m.def("Tanh", &nn::Tanh);
  m.def("Flatten", &nn::Flatten);
  m.def("MaxPool2d", &nn::MaxPool2d);
  m.def("AvgPool2d", &nn::AvgPool2d);
  m.def("AdaptiveAvgPool2d", &nn::AdaptiveAvgPool2d);
  m.def("BatchNorm2d", &nn::BatchNorm2d);
  m.def("Dropout", &nn::Dropout);
  m.def("Embedding", &nn::Embedding);
  m.def("LayerNorm", &nn::LayerNorm);
  m.def("RMSNorm", &nn::RMSNorm);

  // ---- losses
  py::class_<nn::LossCell, std::shared_ptr<nn::LossCell>>(m, "LossCell")
      .def(
          "_forward",
          [](nn::LossCell& l, const Tensor& logits, const Tensor& labels) {
            return l.forward(logits, labels);
          },
          ReleaseGIL())
      .def("_cpp_type_name", &nn::LossCell::type_name);
  m.def("SoftmaxCrossEntropyWithLogits", &nn::SoftmaxCrossEntropyWithLogits);
  m.def("MSELoss", &nn::MSELoss);
  m.def("CrossEntropyLoss",
        [](const std::string& reduction, int64_t ignore_index,
           double label_smoothing) -> nn::LossPtr {
          return std::make_shared<CrossEntropyLoss>(reduction, ignore_index, label_smoothing);
        });
  m.def("PyLoss", [](py::object fn) -> nn::LossPtr { return std::make_shared<PyLoss>(fn); });

  // ---- initialisers, in place under no_grad
  py::module_ init = m.def_submodule("init");
  init.def("kaiming_uniform_", &nn::init::kaiming_uniform_, ReleaseGIL());
  init.def("kaiming_normal_", &nn::init::kaiming_normal_, ReleaseGIL());
  init.def("xavier_uniform_", &nn::init::xavier_uniform_, ReleaseGIL());
  init.def("uniform_", &nn::init::uniform_, ReleaseGIL());
  init.def("normal_", &nn::init::normal_, ReleaseGIL());
  init.def("constant_", &nn::init::constant_, ReleaseGIL());
  init.def("fan_in", &nn::init::fan_in);
  init.def("fan_out", &nn::init::fan_out);

  // ---- the model zoo
  py::module_ models = root.def_submodule("models", "The model zoo.");
  models.def("seed_cnn", &models::seed_cnn, py::arg("in_channels") = 3, py::arg("image_size") = 32,
             py::arg("num_classes") = 10);
  models.def("lenet5", &models::lenet5, py::arg("in_channels") = 1, py::arg("image_size") = 28,
             py::arg("num_classes") = 10);
  models.def("resnet18", &models::resnet18, py::arg("in_channels") = 3,
             py::arg("num_classes") = 10);
  models.def("create", &models::create);
  models.def("names", &models::names);
}

}  // namespace zenith::python
