// OnnxGraph <-> onnx.ModelProto bytes with the repo's protobuf wire-format helpers
// (io/protobuf_lite.h); field numbers from onnx.proto (Debian's libonnx-dev ships it as
// /usr/include/onnx/onnx.proto). Not the generated classes of libonnx/libprotobuf: Debian's
// libsentencepiece.so.0 carries its own protobuf-lite and exports its symbols, and a process that
// loads both it and libprotobuf.so crashes while registering descriptors at start-up (the
// `zenith` binary loads sentencepiece for its tokenizers). The unit tests read these files back
// with libonnx's generated classes and run its checker (tests/onnx/).
#include <cstring>

#include "core/atomic_file.h"
#include "io/protobuf_lite.h"
#include "onnx/onnx_graph.h"

namespace zenith::onnx {
namespace {

namespace pb = io::pb;

// onnx.proto's field numbers, by message.
namespace model {
enum : uint32_t { ir_version = 1, producer_name = 2, producer_version = 3, graph = 7 };
enum : uint32_t { opset_import = 8, metadata_props = 14 };
}  // namespace model
namespace graph_f {
enum : uint32_t { node = 1, name = 2, initializer = 5, input = 11, output = 12 };
}
namespace node_f {
enum : uint32_t { input = 1, output = 2, name = 3, op_type = 4, attribute = 5, domain = 7 };
}
namespace attr_f {
enum : uint32_t { name = 1, f = 2, i = 3, s = 4, ints = 8, type = 20 };
enum Type : int64_t { kFloat = 1, kInt = 2, kString = 3, kInts = 7 };
}  // namespace attr_f
namespace tensor_f {
enum : uint32_t { dims = 1, data_type = 2, float_data = 4, int64_data = 7, name = 8, raw_data = 9 };
enum DataType : int64_t { kFloat = 1, kInt64 = 7 };
}  // namespace tensor_f
// ValueInfoProto{name 1, type 2} > TypeProto{tensor_type 1} > Tensor{elem_type 1, shape 2} >
// TensorShapeProto{dim 1} > Dimension{dim_value 1, dim_param 2}; OperatorSetIdProto{domain 1,
// version 2}; StringStringEntryProto{key 1, value 2}.

constexpr const char* kBatchDim = "batch";

void put_string(std::string& out, uint32_t field, const std::string& s) {
  pb::put_bytes(out, field, s);
}

std::string value_info(const OnnxValue& v) {
  std::string shape;
  for (int64_t d : v.shape) {
    std::string dim;
    if (d < 0)
      put_string(dim, 2, kBatchDim);
    else
      pb::put_int64(dim, 1, d);
    pb::put_bytes(shape, 1, dim);
  }
  std::string tensor;
  pb::put_int64(tensor, 1, tensor_f::kFloat);
  pb::put_bytes(tensor, 2, shape);
  std::string type;
  pb::put_bytes(type, 1, tensor);
  std::string out;
  put_string(out, 1, v.name);
  pb::put_bytes(out, 2, type);
  return out;
}

std::string tensor_proto(const std::string& name, const Tensor& t) {
  ZENITH_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::i64, "[onnx] initializer ", name,
               " is ", dtype_name(t.dtype()), "; only f32 and i64 are written");
  std::string out;
  for (int64_t d : t.shape()) pb::put_int64(out, tensor_f::dims, d);
  pb::put_int64(out, tensor_f::data_type,
                t.dtype() == DType::f32 ? tensor_f::kFloat : tensor_f::kInt64);
  put_string(out, tensor_f::name, name);
  Tensor c = t.contiguous();
  // raw_data is little-endian, as this host is.
  pb::put_bytes(out, tensor_f::raw_data,
                std::string_view(static_cast<const char*>(c.raw_data()), c.nbytes()));
  return out;
}

std::string attribute(const std::string& name, const OnnxAttr& value) {
  std::string out;
  put_string(out, attr_f::name, name);
  if (auto* i = std::get_if<int64_t>(&value)) {
    pb::put_int64(out, attr_f::i, *i);
    pb::put_int64(out, attr_f::type, attr_f::kInt);
  } else if (auto* f = std::get_if<float>(&value)) {
    pb::put_fixed32(out, attr_f::f, *f);
    pb::put_int64(out, attr_f::type, attr_f::kFloat);
  } else if (auto* ints = std::get_if<std::vector<int64_t>>(&value)) {
    for (int64_t v : *ints) pb::put_int64(out, attr_f::ints, v);
    pb::put_int64(out, attr_f::type, attr_f::kInts);
  } else {
    put_string(out, attr_f::s, std::get<std::string>(value));
    pb::put_int64(out, attr_f::type, attr_f::kString);
  }
  return out;
}

std::string node_proto(const OnnxNode& n) {
  std::string out;
  for (const auto& in : n.inputs) put_string(out, node_f::input, in);
  for (const auto& o : n.outputs) put_string(out, node_f::output, o);
  put_string(out, node_f::name, n.name);
  put_string(out, node_f::op_type, n.op_type);
  for (const auto& [k, v] : n.attrs) pb::put_bytes(out, node_f::attribute, attribute(k, v));
  return out;
}

// ---- reading

// A repeated scalar field, packed (one length-delimited run) or not.
template <typename Read>
void read_repeated(pb::Reader& r, pb::WireType type, const std::string& origin, Read read_one) {
  if (type != pb::kLengthDelimited) return read_one(r);
  pb::Reader packed(r.length_delimited(), origin);
  while (!packed.done()) read_one(packed);
}

OnnxValue read_value_info(std::string_view bytes, const std::string& origin) {
  OnnxValue v;
  pb::Reader r(bytes, origin);
  uint32_t field;
  pb::WireType type;
  while (!r.done()) {
    r.next(&field, &type);
    if (field == 1 && type == pb::kLengthDelimited) {
      v.name = std::string(r.length_delimited());
    } else if (field == 2 && type == pb::kLengthDelimited) {  // TypeProto
      pb::Reader tp(r.length_delimited(), origin);
      while (!tp.done()) {
        tp.next(&field, &type);
        if (field != 1 || type != pb::kLengthDelimited) {  // not a tensor type
          tp.skip(type);
          continue;
        }
        pb::Reader tensor(tp.length_delimited(), origin);
        while (!tensor.done()) {
          tensor.next(&field, &type);
          if (field != 2 || type != pb::kLengthDelimited) {
            tensor.skip(type);
            continue;
          }
          pb::Reader shape(tensor.length_delimited(), origin);
          while (!shape.done()) {
            shape.next(&field, &type);
            if (field != 1 || type != pb::kLengthDelimited) {
              shape.skip(type);
              continue;
            }
            pb::Reader dim(shape.length_delimited(), origin);
            int64_t size = -1;  // a dim_param, or unknown
            while (!dim.done()) {
              dim.next(&field, &type);
              if (field == 1 && type == pb::kVarint)
                size = int64_t(dim.varint());
              else
                dim.skip(type);
            }
            v.shape.push_back(size);
          }
        }
      }
    } else {
      r.skip(type);
    }
  }
  return v;
}

std::pair<std::string, Tensor> read_tensor(std::string_view bytes, const std::string& origin) {
  pb::Reader r(bytes, origin);
  uint32_t field;
  pb::WireType type;
  std::string name;
  Shape dims;
  int64_t data_type = 0;
  std::string_view raw;
  bool has_raw = false;
  std::vector<float> floats;
  std::vector<int64_t> int64s;
  while (!r.done()) {
    r.next(&field, &type);
    if (field == tensor_f::dims) {
      read_repeated(r, type, origin, [&](pb::Reader& x) { dims.push_back(int64_t(x.varint())); });
    } else if (field == tensor_f::data_type && type == pb::kVarint) {
      data_type = int64_t(r.varint());
    } else if (field == tensor_f::float_data) {
      read_repeated(r, type, origin, [&](pb::Reader& x) { floats.push_back(x.fixed32()); });
    } else if (field == tensor_f::int64_data) {
      read_repeated(r, type, origin, [&](pb::Reader& x) { int64s.push_back(int64_t(x.varint())); });
    } else if (field == tensor_f::name && type == pb::kLengthDelimited) {
      name = std::string(r.length_delimited());
    } else if (field == tensor_f::raw_data && type == pb::kLengthDelimited) {
      raw = r.length_delimited();
      has_raw = true;
    } else {
      r.skip(type);
    }
  }
  const int64_t n = shape_numel(dims);
  if (data_type == tensor_f::kFloat) {
    if (has_raw) {
      ZENITH_CHECK(raw.size() == size_t(n) * 4, "[onnx] ", origin, ": initializer ", name, " has ",
                   raw.size(), " bytes for ", n, " floats");
      floats.resize(size_t(n));
      std::memcpy(floats.data(), raw.data(), raw.size());
    }
    ZENITH_CHECK(int64_t(floats.size()) == n, "[onnx] ", origin, ": initializer ", name, " holds ",
                 floats.size(), " of ", n, " floats");
    return {name, Tensor::from_vector(floats, dims)};
  }
  if (data_type == tensor_f::kInt64) {
    if (has_raw) {
      ZENITH_CHECK(raw.size() == size_t(n) * 8, "[onnx] ", origin, ": initializer ", name, " has ",
                   raw.size(), " bytes for ", n, " int64s");
      int64s.resize(size_t(n));
      std::memcpy(int64s.data(), raw.data(), raw.size());
    }
    ZENITH_CHECK(int64_t(int64s.size()) == n, "[onnx] ", origin, ": initializer ", name, " holds ",
                 int64s.size(), " of ", n, " int64s");
    return {name, Tensor::from_vector(int64s, dims)};
  }
  ZENITH_FAIL("[onnx] ", origin, ": initializer ", name, " has data type ", data_type,
              "; float (1) and int64 (7) are supported");
}

std::pair<std::string, OnnxAttr> read_attribute(std::string_view bytes, const std::string& origin) {
  pb::Reader r(bytes, origin);
  uint32_t field;
  pb::WireType type;
  std::string name, s;
  int64_t attr_type = 0, i = 0;
  float f = 0;
  std::vector<int64_t> ints;
  while (!r.done()) {
    r.next(&field, &type);
    if (field == attr_f::name && type == pb::kLengthDelimited)
      name = std::string(r.length_delimited());
    else if (field == attr_f::type && type == pb::kVarint)
      attr_type = int64_t(r.varint());
    else if (field == attr_f::i && type == pb::kVarint)
      i = int64_t(r.varint());
    else if (field == attr_f::f && type == pb::kFixed32)
      f = r.fixed32();
    else if (field == attr_f::s && type == pb::kLengthDelimited)
      s = std::string(r.length_delimited());
    else if (field == attr_f::ints)
      read_repeated(r, type, origin, [&](pb::Reader& x) { ints.push_back(int64_t(x.varint())); });
    else
      r.skip(type);
  }
  switch (attr_type) {
    case attr_f::kInt:
      return {name, i};
    case attr_f::kFloat:
      return {name, f};
    case attr_f::kInts:
      return {name, ints};
    case attr_f::kString:
      return {name, s};
    default:
      ZENITH_FAIL("[onnx] ", origin, ": attribute ", name, " has type ", attr_type,
                  "; int, float, ints and string are supported");
  }
}

OnnxNode read_node(std::string_view bytes, const std::string& origin) {
  pb::Reader r(bytes, origin);
  uint32_t field;
  pb::WireType type;
  OnnxNode n;
  std::string domain;
  while (!r.done()) {
    r.next(&field, &type);
    if (type != pb::kLengthDelimited) {
      r.skip(type);
      continue;
    }
    std::string_view v = r.length_delimited();
    if (field == node_f::input) n.inputs.emplace_back(v);
    if (field == node_f::output) n.outputs.emplace_back(v);
    if (field == node_f::name) n.name = std::string(v);
    if (field == node_f::op_type) n.op_type = std::string(v);
    if (field == node_f::domain) domain = std::string(v);
    if (field == node_f::attribute) n.attrs.insert(read_attribute(v, origin));
  }
  ZENITH_CHECK(domain.empty() || domain == "ai.onnx", "[onnx] ", origin, ": op ", n.op_type,
               " of domain '", domain, "' is not supported");
  return n;
}

void read_graph(std::string_view bytes, const std::string& origin, OnnxGraph& g) {
  pb::Reader r(bytes, origin);
  uint32_t field;
  pb::WireType type;
  std::vector<OnnxValue> inputs;
  while (!r.done()) {
    r.next(&field, &type);
    if (type != pb::kLengthDelimited) {
      r.skip(type);
      continue;
    }
    std::string_view v = r.length_delimited();
    if (field == graph_f::node) g.nodes.push_back(read_node(v, origin));
    if (field == graph_f::name) g.name = std::string(v);
    if (field == graph_f::initializer) g.initializers.push_back(read_tensor(v, origin));
    if (field == graph_f::input) inputs.push_back(read_value_info(v, origin));
    if (field == graph_f::output) g.outputs.push_back(read_value_info(v, origin));
  }
  // Graphs of IR < 4 also list initializers as inputs: those are not the model's inputs.
  for (OnnxValue& v : inputs)
    if (!g.initializer(v.name)) g.inputs.push_back(std::move(v));
}

// StringStringEntryProto or OperatorSetIdProto: field 1 a string, field 2 a string or varint.
std::pair<std::string, std::string> read_pair(std::string_view bytes, const std::string& origin) {
  pb::Reader r(bytes, origin);
  uint32_t field;
  pb::WireType type;
  std::pair<std::string, std::string> out;
  while (!r.done()) {
    r.next(&field, &type);
    if (field == 1 && type == pb::kLengthDelimited)
      out.first = std::string(r.length_delimited());
    else if (field == 2 && type == pb::kLengthDelimited)
      out.second = std::string(r.length_delimited());
    else if (field == 2 && type == pb::kVarint)
      out.second = std::to_string(r.varint());
    else
      r.skip(type);
  }
  return out;
}

}  // namespace

std::string serialize_onnx(const OnnxGraph& g) {
  std::string graph;
  for (const OnnxNode& n : g.nodes) pb::put_bytes(graph, graph_f::node, node_proto(n));
  put_string(graph, graph_f::name, g.name);
  for (const auto& [name, t] : g.initializers)
    pb::put_bytes(graph, graph_f::initializer, tensor_proto(name, t));
  for (const OnnxValue& v : g.inputs) pb::put_bytes(graph, graph_f::input, value_info(v));
  for (const OnnxValue& v : g.outputs) pb::put_bytes(graph, graph_f::output, value_info(v));

  std::string out;
  pb::put_int64(out, model::ir_version, kOnnxIrVersion);
  put_string(out, model::producer_name, "zenith");
  put_string(out, model::producer_version, "0.1.0");
  pb::put_bytes(out, model::graph, graph);
  std::string opset;
  put_string(opset, 1, "");
  pb::put_int64(opset, 2, kOnnxOpset);
  pb::put_bytes(out, model::opset_import, opset);
  for (const auto& [k, v] : g.metadata) {
    std::string entry;
    put_string(entry, 1, k);
    put_string(entry, 2, v);
    pb::put_bytes(out, model::metadata_props, entry);
  }
  return out;
}

void write_onnx(const OnnxGraph& graph, const std::string& path) {
  core::write_file_atomic(path, serialize_onnx(graph));
}

OnnxGraph parse_onnx(const std::string& bytes, const std::string& origin) {
  OnnxGraph g;
  pb::Reader r(bytes, origin);
  uint32_t field;
  pb::WireType type;
  bool has_graph = false;
  while (!r.done()) {
    r.next(&field, &type);
    if (field == model::graph && type == pb::kLengthDelimited) {
      read_graph(r.length_delimited(), origin, g);
      has_graph = true;
    } else if (field == model::opset_import && type == pb::kLengthDelimited) {
      auto [domain, version] = read_pair(r.length_delimited(), origin);
      ZENITH_CHECK(!domain.empty() || std::stoll(version.empty() ? "0" : version) <= kOnnxOpset,
                   "[onnx] ", origin, " needs opset ", version, "; zenith reads up to ",
                   kOnnxOpset);
    } else if (field == model::metadata_props && type == pb::kLengthDelimited) {
      g.metadata.insert(read_pair(r.length_delimited(), origin));
    } else {
      r.skip(type);
    }
  }
  ZENITH_CHECK(has_graph, "[onnx] ", origin, " holds no graph (not an ONNX model?)");
  return g;
}

OnnxGraph read_onnx(const std::string& path) {
  return parse_onnx(core::read_file(path, "onnx"), path);
}

}  // namespace zenith::onnx
