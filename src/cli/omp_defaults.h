// The OpenMP settings `zenith` runs with when the user gave none.
#pragma once

namespace zenith::cli {

// Without OMP_WAIT_POLICY or GOMP_SPINCOUNT in the environment, sets OMP_WAIT_POLICY=PASSIVE and
// re-executes this program with the same arguments (same pid): libgomp reads the policy once,
// when it is loaded, before main. Idle threads then sleep instead of spinning, which on a machine
// with other work running made short training runs several times slower. Returns (changing
// nothing) when either variable is set, or when the re-execution fails.
void apply_omp_defaults(char** argv);

}  // namespace zenith::cli
