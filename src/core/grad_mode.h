// Whether ops record gradients on this thread (autograd's grad mode). It lives in core because
// the dispatcher reads it: a gradient op whose inputs require grad while grad mode is on runs
// its decomposition into ops, so that the gradient itself is differentiable.
#pragma once

namespace zenith::core {

bool grad_mode_enabled();
void set_grad_mode_enabled(bool enabled);

// Whether this thread runs a forward that the backward repeats with gradients (activation
// checkpointing's first pass): gradients are off, yet the pass is training's, not inference's,
// so kernels keep no inference-only state for it (the quantized linear's repacked copy).
bool recomputed_forward();
void set_recomputed_forward(bool on);

}  // namespace zenith::core
