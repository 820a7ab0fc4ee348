#!/usr/bin/env bash
# The README's test command: installs dependencies, checks the C++ formatting (.clang-format),
# builds, runs the CTest tests, including
# those labelled slow (the Fashion-MNIST accuracy run, about a minute on two idle cores; the
# tests that start a two-node Slurm cluster, about 15 s each);
# --quick (or ZENITH_QUICK=1) leaves the slow ones out.
# With ZENITH_ASAN=1 (or --asan) it then runs the unit and security (attack suite) tests again
# under AddressSanitizer + UndefinedBehaviorSanitizer (the `asan` CTest preset), the platform's
# and the services' included. That preset leaves out TrainNproc: its
# 1e-5 equivalence of N ranks and one process after 20 steps holds for the release build's
# arithmetic (4e-7) but not for the sanitizer build's -O2 code (1.9e-5 on the test's data).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
"$root/scripts/install-deps.sh"
"$root/scripts/check-format.sh"
"$root/scripts/build.sh" release
slow=()
for arg in "$@"; do [ "$arg" = --quick ] && slow=(-LE slow); done
[ "${ZENITH_QUICK:-0}" = 1 ] && slow=(-LE slow)
ctest --preset release "${slow[@]}"
asan="${ZENITH_ASAN:-0}"
for arg in "$@"; do [ "$arg" = --asan ] && asan=1; done
if [ "$asan" = 1 ]; then
  "$root/scripts/build.sh" asan
  ctest --preset asan
fi
