#!/usr/bin/env bash
# The README's main job: installs dependencies, builds what the quick start uses, trains SeedCNN
# on Fashion-MNIST and prints its test accuracy.
#   scripts/demo.sh [--build-only] [--dry-run]
# --build-only installs and builds, and trains nothing; --dry-run prints each command (shell
# quoted, one a line) instead of running it.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build_only=0 dry_run=0
for arg in "$@"; do
  case "$arg" in
    --build-only) build_only=1 ;;
    --dry-run) dry_run=1 ;;
    *) echo "usage: scripts/demo.sh [--build-only] [--dry-run] (unknown: $arg)" >&2 && exit 2 ;;
  esac
done
run() {
  if [ "$dry_run" = 1 ]; then printf '%q ' "$@" && echo; else "$@"; fi
}

run "$root/scripts/install-deps.sh"
# What the quick start uses: the `zenith` command, the Python module (`import zenith`: build.sh
# then points the machine's Python 3 interpreters at it) and the dashboard's web files (`zenith
# server`). The tests, benchmarks and examples are left to scripts/test.sh, which builds
# everything in the same build directory.
run "$root/scripts/build.sh" release --target zenith_cli zenith_python zenith_web
[ "$build_only" = 1 ] && exit 0
# The recipe: Momentum 0.9, lr 0.01, batch 64, no weight decay; the rate stays at 0.01, then
# falls linearly to 0 over the last 30% of the epochs (epochs 8-10 of 10; --schedule wsd).
run "$root/build/release/zenith" train --model seedcnn --dataset fashion-mnist \
  --epochs "${EPOCHS:-10}" --batch-size 64 --lr 0.01 --momentum 0.9 --schedule wsd \
  --out "${OUT:-out/fashion-mnist}" --overwrite-output-dir
