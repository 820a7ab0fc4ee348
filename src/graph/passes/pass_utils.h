// Small helpers the fusion passes share.
#pragma once

#include <vector>

#include "graph/ir.h"

namespace zenith::graph {

// Whether a node strictly between `from` and `to` writes value v in place (writers: from
// Graph::writers()).
inline bool written_between(const std::vector<std::vector<int>>& writers, ValueId v, int from,
                            int to) {
  if (v == kNoValue) return false;
  for (int w : writers[size_t(v)])
    if (w > from && w < to) return true;
  return false;
}

}  // namespace zenith::graph
