#!/usr/bin/env bash
# The README's test command: installs dependencies, builds, runs every CTest test,
# then the unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" release
ctest --preset release
if [ "${ZENITH_SKIP_ASAN:-0}" != 1 ]; then
  "$root/scripts/build.sh" asan
  ctest --preset asan
fi
