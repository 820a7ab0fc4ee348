#include "core/batch_invariant.h"

namespace zenith::core {
namespace {
thread_local bool on_ = false;
}  // namespace

bool batch_invariant() { return on_; }
void set_batch_invariant(bool on) { on_ = on; }

}  // namespace zenith::core
