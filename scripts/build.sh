#!/usr/bin/env bash
# Configures and builds a CMake preset (default: release), every target unless told otherwise:
#   scripts/build.sh [preset] [cmake --build options], e.g. scripts/build.sh release --target zenith_cli
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
preset="${1:-release}"
[ $# -gt 0 ] && shift
cd "$root"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" "$@"
