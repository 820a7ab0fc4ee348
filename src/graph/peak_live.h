// What a graph holds at its activation peak: the intermediates alive where
// Graph::peak_intermediate_bytes is reached, grouped by the op that made them and their role in
// the step (saved for backward, a parameter's gradient, ...), largest first.
#pragma once

#include <string>
#include <vector>

#include "graph/ir.h"
#include "zenith/graph.h"

namespace zenith::graph {

// The role of an intermediate in a step recorded as phases (forward + loss, backward, update).
const char* value_role(const Graph& g, ValueId v, const std::vector<std::vector<int>>& readers);
// The groups alive at the peak, and the node where it is reached (its op in `peak_op`).
std::vector<LiveGroup> live_at_peak_groups(const Graph& g, std::string* peak_op = nullptr);

}  // namespace zenith::graph
