#include "core/grad_mode.h"

namespace zenith::core {
namespace {
thread_local bool g_grad_mode = true;
thread_local bool g_recomputed_forward = false;
}  // namespace

bool grad_mode_enabled() { return g_grad_mode; }
void set_grad_mode_enabled(bool enabled) { g_grad_mode = enabled; }
bool recomputed_forward() { return g_recomputed_forward; }
void set_recomputed_forward(bool on) { g_recomputed_forward = on; }

}  // namespace zenith::core
