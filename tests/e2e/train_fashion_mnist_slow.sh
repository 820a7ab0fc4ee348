#!/usr/bin/env bash
# The README's main job, shortened: SeedCNN on the real Fashion-MNIST (Debian package
# dataset-fashion-mnist) with the README's recipe (Momentum 0.9, lr 0.01, batch 64, --schedule
# wsd: the rate falls linearly to 0 over the last 30% of the epochs, here the last one) for
# EPOCHS (default 6) epochs must reach >= 90% test accuracy; `zenith eval` on the last
# checkpoint must agree with eval_log.json. Labelled slow: about 20 s on two idle cores.
set -euo pipefail
zenith="$1"
epochs="${EPOCHS:-6}"
data=/usr/share/datasets/fashion-mnist
[ -d "$data" ] || { echo "missing $data: apt-get install dataset-fashion-mnist" >&2; exit 1; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

start=$(date +%s)
"$zenith" train --model seedcnn --dataset fashion-mnist --epochs "$epochs" --batch-size 64 \
  --lr 0.01 --momentum 0.9 --schedule wsd \
  --out "$out" --progress plain --log-every 300
echo "training took $(( $(date +%s) - start )) s"

for f in eval_log.json metrics.jsonl "checkpoint_epoch_$epochs.safetensors"; do
  [ -s "$out/$f" ] || { echo "missing $out/$f" >&2; exit 1; }
done
ls "$out"/summary/events.out.tfevents.* > /dev/null

json=$("$zenith" eval --model seedcnn --dataset fashion-mnist \
  --checkpoint "$out/checkpoint_epoch_$epochs.safetensors")
echo "zenith eval: $json"
acc=$(echo "$json" | sed -n 's/.*"Accuracy":\([0-9.eE+-]*\).*/\1/p')
logged=$(tr -d ' \n' < "$out/eval_log.json" | sed -n 's/.*"final":{"Accuracy":\([0-9.eE+-]*\).*/\1/p')
awk -v a="$acc" -v l="$logged" 'BEGIN {
  if (a == "" || l == "") { print "could not read the accuracy"; exit 1 }
  if (a + 0 != l + 0) { print "eval " a " != eval_log.json " l; exit 1 }
  if (a + 0 < 0.90) { print "test accuracy " a " < 0.90"; exit 1 }
  print "test accuracy " a " >= 0.90"
}'
