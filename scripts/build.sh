#!/usr/bin/env bash
# Configures and builds a CMake preset (default: release), every target unless told otherwise,
# then points the machine's Python 3 interpreters at the build's `zenith` package when the
# Python module was built (scripts/install-python.sh):
#   scripts/build.sh [preset] [cmake --build options], e.g. scripts/build.sh release --target zenith_cli
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
preset="${1:-release}"
[ $# -gt 0 ] && shift
cd "$root"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" "$@"
"$root/scripts/install-python.sh" "$root/build/$preset"
