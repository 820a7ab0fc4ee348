#include "core/grad_mode.h"

namespace zenith::core {
namespace {
thread_local bool g_grad_mode = true;
}  // namespace

bool grad_mode_enabled() { return g_grad_mode; }
void set_grad_mode_enabled(bool enabled) { g_grad_mode = enabled; }

}  // namespace zenith::core
