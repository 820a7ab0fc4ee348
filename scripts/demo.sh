#!/usr/bin/env bash
# The README's main job: installs dependencies, builds, trains SeedCNN on Fashion-MNIST
# and prints its test accuracy.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" release
exec "$root/build/release/zenith" train --model seedcnn --dataset fashion-mnist \
  --epochs "${EPOCHS:-10}" --batch-size 64 --lr 0.01 --momentum 0.9 --out "${OUT:-out/fashion-mnist}"
