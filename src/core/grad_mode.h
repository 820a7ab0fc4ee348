// Whether ops record gradients on this thread (autograd's grad mode). It lives in core because
// the dispatcher reads it: a gradient op whose inputs require grad while grad mode is on runs
// its decomposition into ops, so that the gradient itself is differentiable.
#pragma once

namespace zenith::core {

bool grad_mode_enabled();
void set_grad_mode_enabled(bool enabled);

}  // namespace zenith::core
