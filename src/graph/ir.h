// The graph IR: a captured training step as a list of nodes, each one op of the op list
// (core/ops.def) with its typed attributes, reading and writing values. A value is one buffer
// (a Storage at capture time); an operand is a view of it (shape, strides, offset, dtype,
// layout), so reshapes and slices need no node of their own. Nodes run in list order: passes
// keep that order for every node that writes a value another node reads.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/op_list.h"
#include "zenith/tensor.h"

namespace zenith::graph {

using ValueId = int32_t;
constexpr ValueId kNoValue = -1;

// Where a value comes from, and so how a replay binds it.
enum class ValueKind : uint8_t {
  kInput,         // a tensor of the step's inputs, bound anew at every replay
  kState,         // parameters, buffers, optimizer slots: the same tensors at every replay
  kConstant,      // made during capture outside any op (scalars, zeros): kept and reused
  kIntermediate,  // the output of a node
};
const char* value_kind_name(ValueKind kind);

// How an operand sees its value's buffer.
struct View {
  Shape shape;
  Shape strides;
  int64_t offset = 0;
  DType dtype = DType::f32;
  std::shared_ptr<const OpaqueLayout> layout;  // oneDNN blocked format, or null
  bool operator==(const View& o) const {
    return shape == o.shape && strides == o.strides && offset == o.offset && dtype == o.dtype &&
           layout == o.layout;
  }
  static View of(const Tensor& t);
  size_t nbytes() const { return size_t(shape_numel(shape)) * itemsize(dtype); }
};

struct Operand {
  ValueId value = kNoValue;  // kNoValue: an undefined (optional) input
  View view;
  bool defined() const { return value != kNoValue; }
};

struct Value {
  ValueKind kind = ValueKind::kIntermediate;
  size_t nbytes = 0;     // of the buffer
  Device device;         //
  int input_index = -1;  // kInput: which step input
  int producer = -1;     // kIntermediate: the node, and its output index
  int output_index = 0;  //
  View def;              // kIntermediate: the view its producer returned
  Tensor tensor;         // kState/kConstant: the tensor bound (its storage is the buffer)
  std::string name;      // kState: a parameter or slot name, when known
};

// Attributes kept by a node: a copy of the op's typed struct.
using AttrsPtr = std::shared_ptr<const void>;
AttrsPtr copy_attrs(OpId op, const void* attrs);
bool attrs_equal(OpId op, const void* a, const void* b);

struct Node {
  OpId op = OpId::neg;
  AttrsPtr attrs;
  std::vector<Operand> inputs;
  std::vector<ValueId> outputs;  // kNoValue for an undefined output
  std::vector<int> writes;       // indices of inputs the op updates in place
  int segment = 0;               // the step phase it belongs to (see StepGraph)
  std::string fused;             // a fusion's description, for the report ("conv+relu")
  // The input whose buffer output 0 takes over (it dies here, and the kernel may write its
  // result over it: write_over_dying_inputs); -1: none. The memory plan puts both in one place.
  int overwrites = -1;
  AttrsRef attrs_ref() const { return AttrsRef(op, attrs.get()); }
  template <OpId id>
  const AttrsOf<id>& get() const {
    return attrs_ref().get<id>();
  }
};

// A tensor the host code receives from a segment (a loss), or a gradient the replay sets.
struct Binding {
  Operand operand;
  int segment = 0;  // after which segment it is complete
};

struct Graph {
  std::vector<Value> values;
  std::vector<Node> nodes;
  int segments = 1;
  std::vector<std::vector<Binding>> segment_outputs;  // per segment: what it returns
  // Gradients the step leaves in .grad of state tensors: (state value, gradient).
  std::vector<std::pair<ValueId, Binding>> grads;

  ValueId add_value(Value v);
  // Every use of `from` (operands, segment outputs, gradients) reads `to` instead; operands that
  // viewed all of `from` view all of `to`.
  void replace_value(ValueId from, ValueId to);
  // Drops the nodes marked in `removed` and renumbers producers; values only they produced are
  // left without a producer (unused).
  void remove_nodes(const std::vector<bool>& removed);
  // The nodes that write each value in place.
  std::vector<std::vector<int>> writers() const;
  // Node indices reading each value (in order), and the last node that reads or writes it.
  std::vector<std::vector<int>> readers() const;
  // Every value some later node, a segment output or a gradient needs, or that is not an
  // intermediate (state and constants outlive the step).
  std::vector<bool> live_out() const;
  // Op counts by name, for tests and the report.
  std::map<std::string, int> op_counts() const;
  int count(OpId op) const;
  // One line per node: "%5 = conv2d(%1, %2) [fused conv+relu]".
  std::string dump() const;
  // Peak bytes of intermediate values when each lives from its producer to its last reader,
  // in node order (what eager mode holds, without allocator rounding); an output written over
  // an input (Node::overwrites) adds nothing.
  size_t peak_intermediate_bytes() const;
  // The same with each node's workspace (bytes its kernel holds while it runs, beyond its
  // outputs) counted at that node.
  size_t peak_intermediate_bytes(const std::function<size_t(const Node&)>& workspace) const;
  // The intermediate values alive at that peak (the first node where it is reached), and the
  // node.
  std::vector<ValueId> live_at_peak(int* node = nullptr) const;
};

// Inputs an op updates in place (optimizer updates, fills and copies, batch norm's running
// statistics); graph passes never drop, merge or move such a node.
std::vector<int> written_inputs(OpId op, const void* attrs, size_t num_inputs);
// Ops whose result is not a function of their inputs (random masks).
bool is_random(OpId op);

}  // namespace zenith::graph
