#!/usr/bin/env bash
# Configures and builds a CMake preset (default: release). Usage: scripts/build.sh [preset]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
preset="${1:-release}"
cd "$root"
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
