#!/usr/bin/env bash
# The README's test command: installs dependencies, builds, runs every CTest test.
# With ZENITH_ASAN=1 (or --asan) it then runs the unit tests again under AddressSanitizer +
# UndefinedBehaviorSanitizer (the `asan` CTest preset).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" release
ctest --preset release
if [ "${ZENITH_ASAN:-0}" = 1 ] || [ "${1:-}" = "--asan" ]; then
  "$root/scripts/build.sh" asan
  ctest --preset asan
fi
