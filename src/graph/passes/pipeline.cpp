// The pass pipeline graph mode runs on every capture.
#include "graph/passes/passes.h"

namespace zenith::graph {

PassReport optimize(Graph& g, const PassOptions& options) {
  PassReport r;
  r.ops_before = int(g.nodes.size());
  r.constants = fold_constants(g);
  r.common = eliminate_common_subexpressions(g);
  r.layouts = propagate_layouts(g);
  r.in_place = reuse_in_place(g);
  if (options.fuse) {
    fuse_conv_relu(g, r.fusions);
    fuse_batch_norm_relu(g, r.fusions);
    fuse_pool_relu(g, r.fusions);
    if (options.conv_pool) fuse_conv_pool(g, r.fusions);
    fuse_residual_norm(g, r.fusions);
    fold_transposing_copies(g, r.fusions);
    if (options.linear_cross_entropy) fuse_linear_cross_entropy(g, r.fusions);
    fuse_embedding_grad(g, r.fusions);
    fuse_matmul_add(g, r.fusions);
    fuse_elementwise(g, r.fusions);
    fuse_optimizer_updates(g, r.fusions);
  }
  if (options.update_in_backward) r.updates_in_backward = schedule_updates_early(g);
  r.dead = eliminate_dead_ops(g);
  r.overwrites = write_over_dying_inputs(g);
  for (auto it = r.fusions.begin(); it != r.fusions.end();)
    it = it->second == 0 ? r.fusions.erase(it) : std::next(it);
  r.ops_after = int(g.nodes.size());
  return r;
}

}  // namespace zenith::graph
