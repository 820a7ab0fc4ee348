#!/usr/bin/env bash
# The README's main job: installs dependencies, builds, trains SeedCNN on Fashion-MNIST
# and prints its test accuracy.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" release
# The recipe: Momentum 0.9, lr 0.01, batch 64, no weight decay; the rate drops 10x for the
# last 30% of the epochs (epochs 8-10 of 10).
epochs="${EPOCHS:-10}"
decay=$(( epochs * 3 / 10 )); [ "$decay" -ge 1 ] || decay=1
exec "$root/build/release/zenith" train --model seedcnn --dataset fashion-mnist \
  --epochs "$epochs" --batch-size 64 --lr 0.01 --momentum 0.9 \
  --schedule step --step-epochs $(( epochs > decay ? epochs - decay : epochs )) --gamma 0.1 \
  --out "${OUT:-out/fashion-mnist}"
