// The input pipeline as _zenith.data: datasets, their iterator, transforms (the C++ ones and
// Python callables), and GeneratorDataset's node over a Python source. Pipeline workers are C++
// threads; they take the GIL only to call Python (a source's __getitem__, a Python transform).
#include <random>

#include "bindings.h"
#include "data/image_codec.h"

namespace zenith::python {
namespace {

using dataset::Dataset;
using dataset::Row;
using dataset::TransformPtr;

// Notes on a Python exception where in the pipeline it was raised (Python 3.11's add_note).
void annotate(py::error_already_set& e, const std::string& note) {
  py::object value = e.value();
  if (value && py::hasattr(value, "add_note")) value.attr("add_note")(note);
}

// Item i of a random-access Python source (len() and [] : a list, a numpy array, a class with
// __getitem__): a tuple of columns, or one value for a single column; copied into tensors.
class PySourceNode : public dataset::DatasetNode {
 public:
  PySourceNode(py::object source, int64_t size, std::vector<std::string> names)
      : source_(std::move(source)), size_(size), names_(std::move(names)) {}
  int64_t size() const override { return size_; }
  std::vector<std::string> column_names() const override { return names_; }
  Row get(int64_t index, int64_t) const override {
    ZENITH_CHECK(index >= 0 && index < size_, "[GeneratorDataset] index ", index,
                 " out of range [0, ", size_, ")");
    py::gil_scoped_acquire gil;
    try {
      py::object item = source_.get()[py::int_(index)];
      Row row;
      const bool columns =
          py::isinstance<py::tuple>(item) || (names_.size() > 1 && py::isinstance<py::list>(item));
      if (columns) {
        for (py::handle v : item) row.push_back(to_owned_tensor(v));
      } else {
        row.push_back(to_owned_tensor(item));
      }
      if (row.size() != names_.size())
        throw py::value_error("[GeneratorDataset] item " + std::to_string(index) + " has " +
                              std::to_string(row.size()) + " column(s) but column_names has " +
                              std::to_string(names_.size()));
      return row;
    } catch (py::error_already_set& e) {
      annotate(e, "[GeneratorDataset] raised by the source for item " + std::to_string(index));
      throw;
    }
  }

 private:
  PyRef source_;
  int64_t size_;
  std::vector<std::string> names_;
};

// A Python callable as a per-column transform: gets a numpy array, returns an array (or
// anything a Tensor can be made from).
class PyTransform : public dataset::Transform {
 public:
  PyTransform(py::object fn, std::string name) : fn_(std::move(fn)), name_(std::move(name)) {}
  Tensor apply(const Tensor& x, std::mt19937_64&) const override {
    py::gil_scoped_acquire gil;
    try {
      return to_owned_tensor(fn_.get()(to_numpy(x)));
    } catch (py::error_already_set& e) {
      annotate(e, "[map] raised by the Python transform " + name_);
      throw;
    }
  }
  std::string name() const override { return name_; }

 private:
  PyRef fn_;
  std::string name_;
};

// An iterator over one epoch. Waiting for items and stopping the workers release the GIL:
// the workers may need it.
class PyIterator {
 public:
  PyIterator(const Dataset& ds, int64_t epoch, int workers, int prefetch) {
    py::gil_scoped_release release;
    it_ = std::make_unique<dataset::Iterator>(ds.create_iterator(epoch, workers, prefetch));
  }
  ~PyIterator() { close(); }
  std::optional<Row> next() {
    if (!it_) return std::nullopt;
    py::gil_scoped_release release;
    return it_->next();
  }
  void close() {
    if (!it_) return;
    if (PyGILState_Check()) {
      py::gil_scoped_release release;
      it_.reset();
    } else {
      it_.reset();
    }
  }
  int64_t size() const { return it_ ? it_->size() : 0; }
  double wait_seconds() const { return it_ ? it_->wait_seconds() : 0.0; }

 private:
  std::unique_ptr<dataset::Iterator> it_;
};

// Applies a transform to one value outside a pipeline (vision.Rescale(...)(image)).
Tensor apply_eagerly(const dataset::Transform& t, py::handle value) {
  Tensor x = to_owned_tensor(value);
  std::mt19937_64 rng(default_generator().engine()());
  py::gil_scoped_release release;
  return t.apply(x, rng);
}

}  // namespace

void bind_data(py::module_& root) {
  py::module_ m = root.def_submodule("data", "Datasets, transforms and the iterator.");

  py::class_<dataset::Transform, std::shared_ptr<dataset::Transform>>(m, "Transform")
      .def_property_readonly("name", &dataset::Transform::name)
      .def("__call__", &apply_eagerly);
  // The shared_ptr<const Transform> the pipeline takes, from the bound (non-const) type.
  auto ops = [](const std::vector<std::shared_ptr<dataset::Transform>>& in) {
    return std::vector<TransformPtr>(in.begin(), in.end());
  };
  auto transform = [](TransformPtr t) {
    return std::const_pointer_cast<dataset::Transform>(std::move(t));
  };
  m.def("Rescale", [=](double r, double s) { return transform(vision::Rescale(r, s)); });
  m.def("Normalize", [=](std::vector<double> mean, std::vector<double> std, bool hwc) {
    return transform(vision::Normalize(std::move(mean), std::move(std), hwc));
  });
  m.def("HWC2CHW", [=] { return transform(vision::HWC2CHW()); });
  m.def("RandomCrop", [=](std::vector<int64_t> size, int64_t padding, double fill) {
    return transform(vision::RandomCrop(std::move(size), padding, fill));
  });
  m.def("RandomHorizontalFlip",
        [=](double p) { return transform(vision::RandomHorizontalFlip(p)); });
  m.def("Resize",
        [=](std::vector<int64_t> size) { return transform(vision::Resize(std::move(size))); });
  m.def("TypeCast",
        [=](py::handle dtype) { return transform(transforms::TypeCast(dtype_arg(dtype))); });
  m.def("PyTransform", [](py::object fn, std::string name) -> std::shared_ptr<dataset::Transform> {
    return std::make_shared<PyTransform>(std::move(fn), std::move(name));
  });

  py::class_<Dataset>(m, "Dataset")
      .def("map",
           [=](const Dataset& d, const std::vector<std::shared_ptr<dataset::Transform>>& t,
               const std::string& column, int workers) { return d.map(ops(t), column, workers); })
      .def("shuffle", &Dataset::shuffle, py::arg("seed") = std::nullopt)
      .def("batch", &Dataset::batch, py::arg("batch_size"), py::arg("drop_remainder") = false)
      .def("repeat", &Dataset::repeat)
      .def("take", &Dataset::take)
      .def("slice", &Dataset::slice)
      .def("get_dataset_size", &Dataset::get_dataset_size)
      .def("get_col_names", &Dataset::get_col_names)
      .def("get", &Dataset::get, ReleaseGIL(), py::arg("index"), py::arg("epoch") = 0)
      .def("workers", [](const Dataset& d) { return d.node()->workers(); });

  py::class_<PyIterator>(m, "Iterator")
      .def(py::init<const Dataset&, int64_t, int, int>(), py::arg("dataset"), py::arg("epoch"),
           py::arg("workers") = 0, py::arg("prefetch") = 0)
      .def("next", &PyIterator::next)
      .def("close", &PyIterator::close)
      .def_property_readonly("size", &PyIterator::size)
      .def_property_readonly("wait_seconds", &PyIterator::wait_seconds);

  m.def("MnistDataset", &dataset::MnistDataset, ReleaseGIL());
  m.def("FashionMnistDataset", &dataset::FashionMnistDataset, ReleaseGIL());
  m.def("Cifar10Dataset", &dataset::Cifar10Dataset, ReleaseGIL());
  m.def("ImageFolderDataset", &dataset::ImageFolderDataset, ReleaseGIL());
  m.def("TensorDataset", &dataset::TensorDataset);
  m.def("GeneratorDataset", [](py::object source, int64_t size, std::vector<std::string> names) {
    return Dataset(std::make_shared<PySourceNode>(std::move(source), size, std::move(names)));
  });
  m.def("DistributedSampler", [](const Dataset& d, int64_t shards, int64_t id, bool shuffle,
                                 std::optional<uint64_t> seed, const std::string& remainder) {
    return dataset::DistributedSampler(d, shards, id,
                                       {.shuffle = shuffle, .seed = seed, .remainder = remainder});
  });
  // PNG/JPEG bytes -> HWC uint8 (the image datasets' decode=True), and PNG encoding for tests.
  m.def(
      "decode_image",
      [](py::bytes data, const std::string& name, int channels) {
        std::string bytes = data;
        py::gil_scoped_release release;
        return vision::decode_image(bytes, name, channels);
      },
      py::arg("data"), py::arg("name"), py::arg("channels") = 3);
  m.def("encode_png", [](const Tensor& image) { return py::bytes(vision::encode_png(image)); });
  m.def("default_dir",
        [](const std::string& name) { return dataset::dataset_info(name).default_dir; });

  py::module_ config = m.def_submodule("config", "Pipeline defaults (MindSpore's ds.config).");
  config.def("set_seed", &dataset::config::set_seed);
  config.def("get_seed", &dataset::config::get_seed);
  config.def("set_num_parallel_workers", &dataset::config::set_num_parallel_workers);
  config.def("get_num_parallel_workers", &dataset::config::get_num_parallel_workers);
  config.def("set_prefetch_size", &dataset::config::set_prefetch_size);
  config.def("get_prefetch_size", &dataset::config::get_prefetch_size);
}

}  // namespace zenith::python
