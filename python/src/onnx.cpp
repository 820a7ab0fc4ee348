// zenith.export / zenith.load (MindSpore's names) on zenith's ONNX exporter and interpreter:
// a network's inference forward traced into an ONNX graph, written atomically, and a file read
// back as a Cell (nn.GraphCell). The trace calls Python cells' construct, so the GIL is held.
#include "bindings.h"
#include "core/atomic_file.h"
#include "onnx/onnx_export.h"
#include "onnx/onnx_runtime.h"

namespace zenith::python {

void bind_onnx(py::module_& m) {
  auto o = m.def_submodule("onnx", "ONNX export and loading (zenith.export, zenith.load)");
  o.def(
      "export",
      [](nn::Cell& net, const Shape& input_shape, const std::string& path,
         const std::map<std::string, std::string>& metadata, const std::string& name) {
        onnx::OnnxExportOptions options;
        options.metadata = metadata;
        options.graph_name = name;
        onnx::OnnxGraph graph = onnx::export_onnx(net, input_shape, options);
        core::write_file_atomic(path, onnx::serialize_onnx(graph));
        return graph.nodes.size();
      },
      py::arg("net"), py::arg("input_shape"), py::arg("path"), py::arg("metadata"), py::arg("name"),
      "Traces net on inputs of input_shape (without the batch) and writes the ONNX file; "
      "returns the number of nodes.");
  o.def("load_cell", &onnx::onnx_cell, py::arg("path"),
        "A Cell running the file's graph (one input, the first output).");
  o.def(
      "metadata", [](const std::string& path) { return onnx::read_onnx(path).metadata; },
      py::arg("path"), "The file's metadata_props.");
}

}  // namespace zenith::python
