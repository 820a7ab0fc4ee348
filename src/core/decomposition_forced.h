// Whether a ForceDecomposition (core/dispatch.h) is alive for an op on this thread: an op that
// passes a kernel less than its decomposition needs (max pooling's backward gets a shape-only
// stand-in for x) asks it first. Declared apart from dispatch.h, which most of src includes.
#pragma once

#include "core/op_list.h"

namespace zenith::dispatch {

bool decomposition_forced(OpId op);

}  // namespace zenith::dispatch
