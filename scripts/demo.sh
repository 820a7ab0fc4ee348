#!/usr/bin/env bash
# The README's main job: installs dependencies, builds, trains SeedCNN on Fashion-MNIST
# and prints its test accuracy.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
"$root/scripts/install-deps.sh"
# Only the `zenith` command and the libraries it links; the tests, benchmarks, examples and the
# dashboard are left to scripts/test.sh, which builds everything in the same build directory.
"$root/scripts/build.sh" release --target zenith_cli
# The recipe: Momentum 0.9, lr 0.01, batch 64, no weight decay; the rate stays at 0.01, then
# falls linearly to 0 over the last 30% of the epochs (epochs 8-10 of 10; --schedule wsd).
exec "$root/build/release/zenith" train --model seedcnn --dataset fashion-mnist \
  --epochs "${EPOCHS:-10}" --batch-size 64 --lr 0.01 --momentum 0.9 --schedule wsd \
  --out "${OUT:-out/fashion-mnist}"
