// The ONNX exporter: a dispatch observer turns each outermost op of the traced forward into ONNX
// nodes, naming values by the tensors that carry them.
#include "onnx/onnx_export.h"

#include <unordered_map>

#include "core/dispatch.h"
#include "zenith/autograd.h"

namespace zenith::onnx {
namespace {

constexpr int64_t kTraceBatch = 2;

const char* unary_onnx(OpId op) {
  switch (op) {
    case OpId::relu:
      return "Relu";
    case OpId::sigmoid:
      return "Sigmoid";
    case OpId::tanh:
      return "Tanh";
    case OpId::exp:
      return "Exp";
    case OpId::log:
      return "Log";
    case OpId::sqrt:
      return "Sqrt";
    case OpId::neg:
      return "Neg";
    case OpId::abs:
      return "Abs";
    case OpId::erf:
      return "Erf";
    default:
      return nullptr;
  }
}

const char* binary_onnx(OpId op) {
  switch (op) {
    case OpId::add:
      return "Add";
    case OpId::sub:
      return "Sub";
    case OpId::mul:
      return "Mul";
    case OpId::div:
      return "Div";
    case OpId::pow:
      return "Pow";
    case OpId::maximum:
      return "Max";
    case OpId::minimum:
      return "Min";
    default:
      return nullptr;
  }
}

// Dim 0 of a traced shape is the batch when it is the traced batch size.
Shape symbolic(Shape s) {
  if (!s.empty() && s[0] == kTraceBatch) s[0] = -1;
  return s;
}

class Tracer {
 public:
  Tracer(nn::Cell& net, const Tensor& input) {
    for (const auto& [name, t] : net.named_parameters()) params_.emplace(t.impl_ptr().get(), name);
    for (const auto& [name, t] : net.named_buffers()) params_.emplace(t.impl_ptr().get(), name);
    bind(input, "input");
    graph_.inputs.push_back({"input", symbolic(input.shape())});
  }

  static void begin(void* self, OpId) {
    auto* t = static_cast<Tracer*>(self);
    if (!t->converting_) ++t->depth_;
  }
  static void end(void* self, const dispatch::OpEvent& e) {
    auto* t = static_cast<Tracer*>(self);
    if (t->converting_) return;   // the tracer's own copies of constants
    if (--t->depth_ > 0) return;  // a decomposition's ops are inside its own
    t->converting_ = true;
    struct Reset {
      bool& flag;
      ~Reset() { flag = false; }
    } reset{t->converting_};
    t->convert(e);
  }

  OnnxGraph finish(const Tensor& output) {
    const std::string name = value(output);
    graph_.outputs.push_back({"output", symbolic(output.shape())});
    for (OnnxNode& n : graph_.nodes)
      for (auto* list : {&n.inputs, &n.outputs})
        for (std::string& v : *list)
          if (v == name) v = "output";
    if (name == "input" || graph_.initializer(name))  // the net computes nothing
      graph_.nodes.push_back({"Identity", "identity", {name}, {"output"}, {}});
    return std::move(graph_);
  }

 private:
  void bind(const Tensor& t, const std::string& name) {
    kept_.push_back(t);  // alive until the end: its address names no other tensor meanwhile
    names_[t.impl_ptr().get()] = name;
  }

  // The value `t` carries: a traced value, a parameter or buffer, a reshaping view of a traced
  // value (a Flatten/Reshape node), or a constant made during the forward.
  std::string value(const Tensor& t) {
    if (auto it = names_.find(t.impl_ptr().get()); it != names_.end()) return it->second;
    if (auto it = params_.find(t.impl_ptr().get()); it != params_.end()) {
      add_initializer(it->second, t);
      bind(t, it->second);
      return it->second;
    }
    for (const Tensor& known : kept_)
      if (known.storage() == t.storage() && names_.count(known.impl_ptr().get()) &&
          !graph_.initializer(names_[known.impl_ptr().get()]))
        return reshape_of(known, t);
    const std::string name = "const_" + std::to_string(++constants_);
    add_initializer(name, t);
    bind(t, name);
    return name;
  }

  std::string reshape_of(const Tensor& src, const Tensor& view) {
    ZENITH_CHECK(src.is_contiguous() && !src.has_layout() && view.is_contiguous() &&
                     src.offset() == view.offset() && src.numel() == view.numel(),
                 "[export] a view ", shape_str(view.shape()), " of ", shape_str(src.shape()),
                 " that is not a reshape (a slice, transpose or expand) has no ONNX mapping");
    const Shape& from = src.shape();
    const Shape& to = view.shape();
    const std::string out = "reshape_" + std::to_string(++counter_);
    if (to.size() == 2 && !from.empty() && to[0] == from[0]) {
      graph_.nodes.push_back({"Flatten", out, {names_[src.impl_ptr().get()]}, {out}, {}});
      graph_.nodes.back().attrs["axis"] = int64_t(1);
    } else {
      Shape target = to;
      if (!target.empty() && !from.empty() && target[0] == kTraceBatch && from[0] == kTraceBatch)
        target[0] = 0;  // ONNX Reshape: 0 copies the input's dim (the batch)
      const std::string shape_name = out + ".shape";
      add_initializer(shape_name, Tensor::from_vector(target, {int64_t(target.size())}));
      graph_.nodes.push_back(
          {"Reshape", out, {names_[src.impl_ptr().get()], shape_name}, {out}, {}});
    }
    bind(view, out);
    return out;
  }

  void add_initializer(const std::string& name, const Tensor& t) {
    if (graph_.initializer(name)) return;
    Tensor plain = t.contiguous();
    if (plain.dtype() != DType::f32 && plain.dtype() != DType::i64) plain = plain.to(DType::f32);
    graph_.initializers.emplace_back(name, plain.is_same(t) ? t.clone() : plain);
  }

  OnnxNode& emit(const char* op_type, std::vector<std::string> inputs, const Tensor& output) {
    const std::string name = std::string(op_type) + "_" + std::to_string(++counter_);
    graph_.nodes.push_back({op_type, name, std::move(inputs), {name}, {}});
    bind(output, name);
    return graph_.nodes.back();
  }

  std::vector<std::string> values(const std::vector<Tensor>& inputs) {
    std::vector<std::string> out;
    for (const Tensor& t : inputs) out.push_back(t.defined() ? value(t) : "");
    while (!out.empty() && out.back().empty()) out.pop_back();  // absent trailing optionals
    return out;
  }

  void convert(const dispatch::OpEvent& e) {
    const Tensor& y = e.outputs.at(0);
    if (const char* op = unary_onnx(e.op)) return void(emit(op, values(e.inputs), y));
    if (const char* op = binary_onnx(e.op)) return void(emit(op, values(e.inputs), y));
    switch (e.op) {
      case OpId::to_plain:  // a layout change: the same value
        return bind(y, value(e.inputs[0]));
      case OpId::copy:
        if (y.dtype() == e.inputs[0].dtype()) return bind(y, value(e.inputs[0]));
        break;
      case OpId::conv2d: {
        const Conv2dAttrs& a = e.attrs.get<OpId::conv2d>();
        OnnxNode& n = emit("Conv", values(e.inputs), y);
        n.attrs = {{"kernel_shape", Shape{a.weight_shape[2], a.weight_shape[3]}},
                   {"strides", a.stride},
                   {"pads", Shape{a.pad_begin[0], a.pad_begin[1], a.pad_end[0], a.pad_end[1]}},
                   {"dilations", a.dilation},
                   {"group", a.groups}};
        return;
      }
      case OpId::max_pool2d:
      case OpId::avg_pool2d: {
        const bool max = e.op == OpId::max_pool2d;
        const Pool2dAttrs& a =
            max ? e.attrs.get<OpId::max_pool2d>() : e.attrs.get<OpId::avg_pool2d>();
        const Shape& x = e.inputs[0].shape();
        if (!max && a.kernel == Shape{x[2], x[3]} && a.padding == Shape{0, 0})  // ResNet's pool
          return void(emit("GlobalAveragePool", values({e.inputs[0]}), y));
        OnnxNode& n = emit(max ? "MaxPool" : "AveragePool", values({e.inputs[0]}), y);
        const Shape& in = e.inputs[0].shape();
        const int64_t floor_h = (in[2] + 2 * a.padding[0] - a.kernel[0]) / a.stride[0] + 1;
        const int64_t floor_w = (in[3] + 2 * a.padding[1] - a.kernel[1]) / a.stride[1] + 1;
        n.attrs = {
            {"kernel_shape", a.kernel},
            {"strides", a.stride},
            {"pads", Shape{a.padding[0], a.padding[1], a.padding[0], a.padding[1]}},
            {"ceil_mode", int64_t(a.output_size[0] != floor_h || a.output_size[1] != floor_w)}};
        if (!max) n.attrs["count_include_pad"] = int64_t(a.count_include_pad);
        return;
      }
      case OpId::adaptive_avg_pool2d: {
        const AdaptivePool2dAttrs& a = e.attrs.get<OpId::adaptive_avg_pool2d>();
        const int64_t h = a.input_shape[2], w = a.input_shape[3];
        const int64_t oh = a.output_size[0], ow = a.output_size[1];
        if (oh == 1 && ow == 1) return void(emit("GlobalAveragePool", values(e.inputs), y));
        ZENITH_CHECK(h % oh == 0 && w % ow == 0, "[export] adaptive_avg_pool2d from ", h, "x", w,
                     " to ", oh, "x", ow, " has uneven windows; ONNX has no such pooling");
        OnnxNode& n = emit("AveragePool", values(e.inputs), y);
        n.attrs = {{"kernel_shape", Shape{h / oh, w / ow}}, {"strides", Shape{h / oh, w / ow}}};
        return;
      }
      case OpId::batch_norm: {
        const BatchNormAttrs& a = e.attrs.get<OpId::batch_norm>();
        ZENITH_CHECK(!a.training, "[export] batch_norm in training mode");
        std::vector<Tensor> in = e.inputs;
        const int64_t c = in[0].size(1);
        if (!in[1].defined()) in[1] = Tensor::ones({c});
        if (!in[2].defined()) in[2] = Tensor::zeros({c});
        OnnxNode& n = emit("BatchNormalization", values(in), y);
        n.attrs["epsilon"] = float(a.eps);
        return;
      }
      case OpId::linear: {
        ZENITH_CHECK(e.inputs[0].dim() == 2, "[export] linear on a ", e.inputs[0].dim(),
                     "-d input; ONNX Gemm takes 2-d (flatten first)");
        OnnxNode& n = emit("Gemm", values(e.inputs), y);
        n.attrs["transB"] = int64_t(1);
        return;
      }
      case OpId::matmul:
        return void(emit("MatMul", values(e.inputs), y));
      case OpId::softmax:
      case OpId::log_softmax: {
        const bool log = e.op == OpId::log_softmax;
        OnnxNode& n = emit(log ? "LogSoftmax" : "Softmax", values(e.inputs), y);
        n.attrs["axis"] =
            log ? e.attrs.get<OpId::log_softmax>().dim : e.attrs.get<OpId::softmax>().dim;
        return;
      }
      default:
        break;
    }
    ZENITH_FAIL("[export] op ", op_name(e.op),
                " has no ONNX mapping (exported: conv2d, pooling, batch_norm, linear, matmul, "
                "softmax, elementwise ops)");
  }

  OnnxGraph graph_;
  std::unordered_map<const TensorImpl*, std::string> params_;
  std::unordered_map<const TensorImpl*, std::string> names_;
  std::vector<Tensor> kept_;
  int depth_ = 0;
  bool converting_ = false;
  int counter_ = 0;
  int constants_ = 0;
};

// Registered for its lifetime.
class ObserverScope {
 public:
  explicit ObserverScope(Tracer& t)
      : id_(dispatch::add_observer(&Tracer::end, &t, &Tracer::begin)) {}
  ~ObserverScope() { dispatch::remove_observer(id_); }
  ObserverScope(const ObserverScope&) = delete;
  ObserverScope& operator=(const ObserverScope&) = delete;

 private:
  int id_;
};

}  // namespace

OnnxGraph export_onnx(nn::Cell& net, const Shape& input_shape, const OnnxExportOptions& options) {
  ZENITH_CHECK(!input_shape.empty(), "[export] needs the input's shape without the batch dim");
  const bool was_training = net.training();
  net.set_train(false);
  Shape shape = input_shape;
  shape.insert(shape.begin(), kTraceBatch);
  Tensor input = Tensor::zeros(shape);
  Tracer tracer(net, input);
  Tensor output;
  try {
    NoGradGuard no_grad;
    ObserverScope scope(tracer);
    output = net.forward(input);
  } catch (...) {
    net.set_train(was_training);
    throw;
  }
  net.set_train(was_training);
  OnnxGraph g = tracer.finish(output);
  g.name = options.graph_name;
  g.metadata = options.metadata;
  if (options.fold_batch_norm) {
    const int folded = fold_batch_norms(g);
    g.metadata["zenith.batch_norms_folded"] = std::to_string(folded);
  }
  return g;
}

}  // namespace zenith::onnx
