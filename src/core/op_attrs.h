// The typed attributes of the ops in core/ops.def: plain aggregates, compared with ==, written
// as stable text (attrs_text) and hashed (attrs_hash) for primitive caches and graph capture.
// Each struct lists its fields once in fields(f), which the text form walks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zenith/tensor.h"

namespace zenith {

struct NoAttrs {
  bool operator==(const NoAttrs&) const = default;
  template <typename F>
  void fields(F&&) const {}
};

struct PowScalarAttrs {
  double exponent = 1.0;
  bool operator==(const PowScalarAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("exponent", exponent);
  }
};

// masked_fill's and fill_'s value.
struct FillAttrs {
  double value = 0.0;
  bool operator==(const FillAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("value", value);
  }
};

// sum over `dims` (sorted, unique, non-negative) giving `out_shape`.
struct ReduceAttrs {
  std::vector<int64_t> dims;
  Shape out_shape;
  bool operator==(const ReduceAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("dims", dims);
    f("out_shape", out_shape);
  }
};

// var over `dims`, dividing by count - correction.
struct VarAttrs {
  std::vector<int64_t> dims;
  Shape out_shape;
  int64_t correction = 1;
  bool operator==(const VarAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("dims", dims);
    f("out_shape", out_shape);
    f("correction", correction);
  }
};

// max_dim / min_dim over one non-negative `dim`.
struct ReduceDimAttrs {
  int64_t dim = 0;
  Shape out_shape;
  bool operator==(const ReduceDimAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("dim", dim);
    f("out_shape", out_shape);
  }
};

// conv2d and its two gradients. The geometry is resolved once by ops::conv2d (padding mode,
// output size) and carried here, so kernels never recompute a shape rule.
// N batch, C in channels, H x W input; O out channels, KH x KW kernel; OH x OW output.
struct Conv2dAttrs {
  Shape input_shape;                     // [N, C, H, W]
  Shape weight_shape;                    // [O, C / groups, KH, KW]
  Shape output_shape;                    // [N, O, OH, OW]
  std::vector<int64_t> stride{1, 1};     // [h, w]
  std::vector<int64_t> pad_begin{0, 0};  // [top, left]
  std::vector<int64_t> pad_end{0, 0};    // [bottom, right]
  std::vector<int64_t> dilation{1, 1};   // 1 = none, as in PyTorch
  int64_t groups = 1;
  bool bias = false;
  bool operator==(const Conv2dAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("input_shape", input_shape);
    f("weight_shape", weight_shape);
    f("output_shape", output_shape);
    f("stride", stride);
    f("pad_begin", pad_begin);
    f("pad_end", pad_end);
    f("dilation", dilation);
    f("groups", groups);
    f("bias", bias);
  }
};

// max/avg pooling and their gradients; the output size is resolved by the op.
struct Pool2dAttrs {
  std::vector<int64_t> kernel{1, 1};       // [KH, KW]
  std::vector<int64_t> stride{1, 1};       // [SH, SW]
  std::vector<int64_t> padding{0, 0};      // [PH, PW], both sides
  std::vector<int64_t> output_size{1, 1};  // [OH, OW]
  bool training = false;                   // max pooling keeps what its backward needs
  bool count_include_pad = true;           // avg pooling's divisor
  bool operator==(const Pool2dAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("kernel", kernel);
    f("stride", stride);
    f("padding", padding);
    f("output_size", output_size);
    f("training", training);
    f("count_include_pad", count_include_pad);
  }
};

// Adaptive average pooling from an [H, W] input to an [OH, OW] output.
struct AdaptivePool2dAttrs {
  Shape input_shape;                       // [N, C, H, W]
  std::vector<int64_t> output_size{1, 1};  // [OH, OW]
  bool operator==(const AdaptivePool2dAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("input_shape", input_shape);
    f("output_size", output_size);
  }
};

// Which CPU batch norm implementation runs; kAuto picks the fastest (tests force the others).
enum class BatchNormImpl : uint8_t { kAuto, kLoops, kOnednn };

struct BatchNormAttrs {
  bool training = true;
  double momentum = 0.1;
  double eps = 1e-5;
  BatchNormImpl impl = BatchNormImpl::kAuto;
  bool operator==(const BatchNormAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("training", training);
    f("momentum", momentum);
    f("eps", eps);
    f("impl", impl);
  }
};

// layer_norm and rms_norm over rows of D elements (the normalised trailing dims).
struct LayerNormAttrs {
  int64_t D = 1;
  double eps = 1e-5;
  bool operator==(const LayerNormAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("D", D);
    f("eps", eps);
  }
};

struct DropoutAttrs {
  double p = 0.5;
  bool operator==(const DropoutAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("p", p);
  }
};

// scaled_dot_product_attention: scores = q k^T scale (+ masks); causal keeps key j for query i
// when j <= i + (S - T) (bottom-right aligned, so a decode step with T = 1 sees the whole cache).
struct AttentionAttrs {
  bool causal = false;
  double scale = 1.0;
  bool operator==(const AttentionAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("causal", causal);
    f("scale", scale);
  }
};

// quantized_linear: a weight [out_features, in_features] held as blocks of `format` (a
// QuantFormat of include/zenith/quant.h, as its integer value).
struct QuantizedLinearAttrs {
  int64_t format = 0;
  int64_t out_features = 0, in_features = 0;
  bool operator==(const QuantizedLinearAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("format", format);
    f("out_features", out_features);
    f("in_features", in_features);
  }
};

// paged_attention: scores = q k^T scale over each token's own sequence (causal within it).
struct PagedAttentionAttrs {
  double scale = 1.0;
  bool operator==(const PagedAttentionAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("scale", scale);
  }
};

// softmax / log_softmax (and gradients) over one non-negative dim.
struct SoftmaxAttrs {
  int64_t dim = 0;
  bool operator==(const SoftmaxAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("dim", dim);
  }
};

enum class Reduction : uint8_t { kNone, kMean, kSum };

struct CrossEntropyAttrs {
  int64_t ignore_index = -100;
  double label_smoothing = 0.0;
  Reduction reduction = Reduction::kMean;
  // linear_cross_entropy_grads only: false where the weight takes no gradient (a frozen output
  // layer): no dweight is made (its output undefined).
  bool weight_grad = true;
  bool operator==(const CrossEntropyAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("ignore_index", ignore_index);
    f("label_smoothing", label_smoothing);
    f("reduction", reduction);
    f("weight_grad", weight_grad);
  }
};

// gather along a non-negative dim; index_select runs as a gather (its errors name it).
struct GatherAttrs {
  int64_t dim = 0;
  bool index_select = false;
  bool operator==(const GatherAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("dim", dim);
    f("index_select", index_select);
  }
};

// zeros(shape) with src added at index along dim.
struct ScatterAddAttrs {
  int64_t dim = 0;
  Shape shape;
  bool operator==(const ScatterAddAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("dim", dim);
    f("shape", shape);
  }
};

struct EmbeddingBackwardAttrs {
  int64_t num_rows = 0;
  bool operator==(const EmbeddingBackwardAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("num_rows", num_rows);
  }
};

struct CatAttrs {
  int64_t dim = 0;
  DType dtype = DType::f32;
  Shape out_shape;
  bool operator==(const CatAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("dim", dim);
    f("dtype", dtype);
    f("out_shape", out_shape);
  }
};

struct CopyAttrs {
  DType dtype = DType::f32;
  bool operator==(const CopyAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("dtype", dtype);
  }
};

// g = grad + wd p; v = momentum v + g; p -= lr (nesterov ? g + momentum v : v).
struct MomentumUpdateAttrs {
  double lr = 0.0;
  double momentum = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool operator==(const MomentumUpdateAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("lr", lr);
    f("momentum", momentum);
    f("weight_decay", weight_decay);
    f("nesterov", nesterov);
  }
};

// Adam at 1-based `step`; decoupled = AdamW's weight decay.
struct AdamUpdateAttrs {
  double lr = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled = false;
  int64_t step = 1;
  bool operator==(const AdamUpdateAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("lr", lr);
    f("beta1", beta1);
    f("beta2", beta2);
    f("eps", eps);
    f("weight_decay", weight_decay);
    f("decoupled", decoupled);
    f("step", step);
  }
};

// fused_elementwise: a program over the elementwise ops of the list, run in one loop. Registers
// 0..num_inputs-1 hold the inputs; instruction i writes register dst = num_inputs + i.
// code holds 5 numbers per instruction: op (an OpId of the closed set in graph/passes/
// elementwise_ops.h), dst, a, b (-1 for a unary op), imm (pow_scalar's exponent as its bits).
struct FusedElementwiseAttrs {
  std::vector<int64_t> code;
  std::vector<int64_t> outputs;  // registers returned, in order
  int64_t num_inputs = 0;
  Shape shape;            // of every input that is not 0-d, and of the outputs
  bool sum_last = false;  // the last output is summed to a 0-d tensor (a fused reduction)
  bool operator==(const FusedElementwiseAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("code", code);
    f("outputs", outputs);
    f("num_inputs", num_inputs);
    f("shape", shape);
    f("sum_last", sum_last);
  }
};

// momentum_update over `count` parameters at once.
struct MultiMomentumUpdateAttrs {
  int64_t count = 0;
  double lr = 0.0;
  double momentum = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool operator==(const MultiMomentumUpdateAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("count", count);
    f("lr", lr);
    f("momentum", momentum);
    f("weight_decay", weight_decay);
    f("nesterov", nesterov);
  }
};

// adam_update over `count` parameters at once.
struct MultiAdamUpdateAttrs {
  int64_t count = 0;
  double lr = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled = false;
  int64_t step = 1;
  bool operator==(const MultiAdamUpdateAttrs&) const = default;
  template <typename F>
  void fields(F&& f) const {
    f("count", count);
    f("lr", lr);
    f("beta1", beta1);
    f("beta2", beta2);
    f("eps", eps);
    f("weight_decay", weight_decay);
    f("decoupled", decoupled);
    f("step", step);
  }
};

const char* reduction_name(Reduction r);  // "none", "mean", "sum"
const char* batch_norm_impl_name(BatchNormImpl impl);

// "name=value;" per field, in declaration order: doubles with 17 significant digits, shapes as
// comma lists, dtypes and enums by name. Equal attributes give equal text.
template <typename A>
std::string attrs_text(const A& attrs);
// FNV-1a of attrs_text: the same in every process.
uint64_t text_hash(const std::string& text);
template <typename A>
uint64_t attrs_hash(const A& attrs) {
  return text_hash(attrs_text(attrs));
}

namespace detail {
void append_field(std::string& out, const char* name, int64_t v);
void append_field(std::string& out, const char* name, double v);
void append_field(std::string& out, const char* name, bool v);
void append_field(std::string& out, const char* name, const std::vector<int64_t>& v);
void append_field(std::string& out, const char* name, DType v);
void append_field(std::string& out, const char* name, Reduction v);
void append_field(std::string& out, const char* name, BatchNormImpl v);
}  // namespace detail

template <typename A>
std::string attrs_text(const A& attrs) {
  std::string out;
  attrs.fields([&](const char* name, const auto& v) { detail::append_field(out, name, v); });
  return out;
}

}  // namespace zenith
