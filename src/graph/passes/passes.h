// Graph passes over a captured step. Each returns how many nodes it changed; each keeps the
// graph's results equal to the eager step's (tests/graph/passes_test.cpp shows every pass on a
// graph before and after, with op counts and numerical equality).
//
// Nodes keep their order; a pass that merges nodes puts the merged node where the last of them
// was, and only when no node in between reads what the merged ones made or writes what they
// read. Nodes that write values in place (optimizer updates, batch norm's running statistics,
// fills and copies into a buffer) and random ops are never dropped or merged with others, except
// where noted.
#pragma once

#include <map>
#include <string>

#include "graph/ir.h"

namespace zenith::graph {

// Drops nodes whose outputs nothing needs and that write nothing that outlives them.
int eliminate_dead_ops(Graph& g);
// Merges a node into an earlier one with the same op, attributes and operands (no write to an
// operand in between): to_plain of one tensor twice, the same sum twice.
int eliminate_common_subexpressions(Graph& g);
// Evaluates nodes whose inputs are all constants once, at compile time (the scalars and fills
// eager mode makes every step: the seed gradient of the loss, scalar operands).
int fold_constants(Graph& g);
// Layout conversions: drops to_plain of a tensor that is already plain (identity) and merges
// conversions of one blocked tensor, so a oneDNN blocked activation is converted at most once.
int propagate_layouts(Graph& g);
// In-place reuse: a copy of a buffer that dies at the copy (autograd's gradient clones, a
// contiguous() of a fresh result) becomes that buffer itself.
int reuse_in_place(Graph& g);
// Marks nodes whose kernel can write output 0 over an input that dies at the node (same bytes,
// plain): cross-entropy's backward over the logits. Sets Node::overwrites; the replay's memory
// plan then places both buffers at one offset. Runs last (fusions make new nodes).
int write_over_dying_inputs(Graph& g);

// Fusions; `counts` gains one entry per fused group, by kind ("conv+relu", "bn+relu",
// "bn+relu backward", "maxpool+relu", "conv+relu+maxpool", "add+rmsnorm", "rmsnorm backward+add",
// "linear+cross-entropy", "rope+transpose", "elementwise", "optimizer").
using FusionCounts = std::map<std::string, int>;
// conv2d whose output only relu reads -> conv2d_relu (oneDNN post-op). relu's backward reads
// relu's output, which the fused op still returns.
int fuse_conv_relu(Graph& g, FusionCounts& counts);
// batch_norm whose output only relu reads -> batch_norm_relu; relu_backward whose result only a
// batch_norm_backward reads -> batch_norm_relu_backward.
int fuse_batch_norm_relu(Graph& g, FusionCounts& counts);
// relu reading only max_pool2d's output (as SequentialCell runs ReLU then MaxPool2d) ->
// max_pool2d_relu; the relu_backward whose result only that pooling's backward reads goes into
// it as max_pool2d_relu_backward, with relu's mask in the workspace (both or neither). CPU
// float32 2x2 stride-2 windows over channels a multiple of 8 (what that kernel runs itself).
int fuse_pool_relu(Graph& g, FusionCounts& counts);
// conv2d whose output only a max_pool2d_relu reads (3x3, stride 1, unpadded, at most 4 input
// channels, output channels a multiple of 8, f32 on the CPU; the pooling 2x2 stride 2) ->
// conv2d_relu_max_pool; that pooling's backward and the weight gradient, the only reader of its
// result (the input needs no gradient), -> conv2d_relu_max_pool_backward (both or neither).
// Runs after fuse_pool_relu; its groups leave that pass's counts.
int fuse_conv_pool(Graph& g, FusionCounts& counts);
// A residual add and the rms_norm reading its sum -> add_rms_norm (both results); an
// rms_norm_backward whose dx only an add reads (the residual stream's gradient sum) ->
// rms_norm_add_backward. float32/float64 operands of one shape only.
int fuse_residual_norm(Graph& g, FusionCounts& counts);
// linear(x, W) whose logits only cross_entropy_rows and its backward read -> linear_cross_entropy
// at the loss, making the loss and the logits' gradient in one pass over vocabulary tiles (the
// gradient's matmuls stay). Needs the backward's seed at the loss (a folded constant).
int fuse_linear_cross_entropy(Graph& g, FusionCounts& counts);
// A copy whose only source is a row-wise op's result (RoPE and its backward), read with the
// leading dims permuted (autograd's [B, H, T, D] -> [B, T, H, D] before a projection's gradient):
// the op reads every operand through that permutation and writes the copy's result; the copy
// goes ("rope+transpose").
int fold_transposing_copies(Graph& g, FusionCounts& counts);
// embedding_backward whose [V, D] result only an add with another [V, D] gradient reads (a tied
// embedding: the output layer's weight gradient) -> embedding_backward_add.
int fuse_embedding_grad(Graph& g, FusionCounts& counts);
// add(c, matmul(a, b)) whose product only the add reads (a gradient sum: the input gradients of
// a tensor several linears read) -> matmul_add(a, b, c), the gemm accumulating onto c
// ("matmul+add").
int fuse_matmul_add(Graph& g, FusionCounts& counts);
// Chains and trees of elementwise ops over one shape (0-d scalars and trailing-dim broadcasts
// allowed), and a full sum at their end, -> one fused_elementwise loop. Never fuses a GEMM or
// convolution. Transformer patterns (residual adds, SwiGLU's silu * gate, the scale and mask
// before a softmax, the elementwise parts of RMSNorm and RoPE written with ops) are such chains.
int fuse_elementwise(Graph& g, FusionCounts& counts);
// The optimizer's per-parameter updates with equal hyperparameters -> one multi-tensor update.
int fuse_optimizer_updates(Graph& g, FusionCounts& counts);

// Optimizer updates move to just after the last node that makes, reads or writes any of their
// operands (the gradient final, the parameter no longer read by the backward) where that lowers
// the graph's peak, and stay after the backward otherwise; a multi-tensor update splits into one
// per group of parameters ready at the same node. Updates may move into the backward's segment:
// only for steps whose host code never skips the update phase. Returns the updates placed early.
int schedule_updates_early(Graph& g);
// Bytes a node's kernel holds while it runs beyond its outputs, where that can set a step's
// peak (Graph::peak_intermediate_bytes(workspace)); 0 for most ops.
size_t kernel_workspace_bytes(const Node& n);

struct PassOptions {
  bool fuse = true;  // false: only the clean-up passes (DCE, CSE, constants, layouts, in place)
  bool linear_cross_entropy = true;  // fuse_linear_cross_entropy (when fuse)
  bool conv_pool = true;             // fuse_conv_pool (when fuse)
  bool update_in_backward = false;   // schedule_updates_early
};

struct PassReport {
  int ops_before = 0, ops_after = 0;
  int dead = 0, common = 0, constants = 0, layouts = 0, in_place = 0;
  int overwrites = 0;           // outputs written over a dying input
  int updates_in_backward = 0;  // update nodes schedule_updates_early placed
  FusionCounts fusions;
};
// Every pass in order: constants, CSE, layouts, in-place reuse, fusions, updates in the
// backward (when asked), DCE, overwrites.
PassReport optimize(Graph& g, const PassOptions& options = {});

}  // namespace zenith::graph
