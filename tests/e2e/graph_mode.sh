#!/bin/bash
# `zenith train --mode graph`: the training step is captured once (one `graph: N ops -> M after
# fusion ...` line, the same figures in metrics.jsonl) and replayed; the losses and the final
# accuracy equal an eager (--mode pynative) run's; an unknown mode is rejected. Uses the first
# samples of Fashion-MNIST; a few seconds. `zenith finetune --mode graph` on the demo LLaMA
# (LoRA, packed sequences: one batch shape) likewise: one capture line, its figures in
# metrics.jsonl, the losses of eager mode (to 1e-5: graph mode sums the gradient norm in float32);
# and on unpacked examples of many lengths, batches padded to a multiple of 64 (graph mode's
# default): at most 4 captures in 8 steps, the losses of pynative mode padded alike.
# $1 is the zenith binary.
set -u
ZENITH=$(realpath "$1")
llm=$(realpath "$(dirname "${BASH_SOURCE[0]}")/../../examples/llm")
data=/usr/share/datasets/fashion-mnist
[ -d "$data" ] || { echo "missing $data: apt-get install dataset-fashion-mnist" >&2; exit 1; }
source "$(dirname "${BASH_SOURCE[0]}")/../support/e2e_work.bash"
e2e_work graph_mode
fail() { echo "FAIL: $*"; exit 1; }
cd "$work"

for mode in pynative graph; do
  "$ZENITH" train --mode $mode --model seedcnn --dataset fashion-mnist --epochs 2 --limit-train 512 \
    --limit-test 256 --batch-size 64 --threads 1 --log-every 1 --progress plain --out "$work/$mode" \
    > $mode.out 2> $mode.err || fail "train --mode $mode exited $?: $(tail -20 $mode.err $mode.out)"
done
[ "$(grep -c '^graph: ' graph.out)" = 1 ] || fail "expected one capture line: $(cat graph.out)"
# One micro-batch per step: the updates run in the backward where that lowers the step's peak
# (2 groups here), the others in one update after it;
# the first convolution fuses with its ReLU and 2x2 max-pool, the second max-pool with its ReLU,
# forward and backward.
grep -q '^graph: 30 ops -> 17 after fusion (conv+relu+maxpool 1, conv+relu+maxpool backward 1, maxpool+relu 1, maxpool+relu backward 1, optimizer 1, .*, updates in backward 2); activations .* MB -> .* MB$' graph.out \
  || fail "capture line: $(grep '^graph' graph.out)"
! grep -q '^graph: ' pynative.out || fail "pynative mode captured a graph"
for name in graph/ops graph/ops_after_fusion graph/activations_mb_before graph/arena_mb; do
  grep -q "\"name\":\"$name\"" graph/metrics.jsonl || fail "no $name in metrics.jsonl"
done
losses() { grep '"name":"loss"' "$1/metrics.jsonl" | sed 's/.*"step":\([0-9]*\).*"value":\(.*\)}/\1 \2/'; }
[ "$(losses pynative | wc -l)" = 16 ] || fail "expected 16 logged losses: $(losses pynative)"
[ "$(losses pynative)" = "$(losses graph)" ] || fail "losses differ: $(diff <(losses pynative) <(losses graph))"
final() { grep 'final test accuracy' "$1.out"; }
[ "$(final pynative | sed 's|/pynative/|/X/|')" = "$(final graph | sed 's|/graph/|/X/|')" ] \
  || fail "final lines differ: $(final pynative) / $(final graph)"
echo "ok: --mode graph captures once and trains as --mode pynative does"

"$ZENITH" train --mode turbo --out "$work/bad" > /dev/null 2> bad.err && fail "--mode turbo accepted"
grep -q "unknown mode 'turbo' (known: pynative, graph)" bad.err || fail "bad --mode message: $(cat bad.err)"
echo "ok: an unknown mode is rejected"

for mode in pynative graph; do
  "$ZENITH" finetune --model "$llm/demo-llama" --data "$llm/finetune/train.jsonl" --method lora \
    --max-steps 6 --batch-size 4 --packing --max-seq-len 64 --mode $mode --out "$work/ft_$mode" \
    > ft_$mode.out 2>&1 || fail "finetune --mode $mode exited $?: $(tail -20 ft_$mode.out)"
done
[ "$(grep -c '^graph: ' ft_graph.out)" = 1 ] || fail "finetune: expected one capture line: $(cat ft_graph.out)"
grep -q '^graph: [0-9]* ops -> [0-9]* after fusion (.*optimizer 1.*); activations .* MB -> .* MB$' \
  ft_graph.out || fail "finetune capture line: $(grep '^graph' ft_graph.out)"
! grep -q '^graph: ' ft_pynative.out || fail "finetune --mode pynative captured a graph"
for name in graph/ops graph/ops_after_fusion graph/activations_mb_after; do
  grep -q "\"name\":\"$name\"" ft_graph/metrics.jsonl || fail "finetune: no $name in metrics.jsonl"
done
paste <(losses ft_pynative) <(losses ft_graph) | awk '
  { n++; d = $2 - $4; if (d < 0) d = -d; if ($1 != $3 || d > 1e-5 * $2) bad = 1 }
  END { exit (n == 6 && !bad) ? 0 : 1 }' \
  || fail "finetune losses differ: $(paste <(losses ft_pynative) <(losses ft_graph))"
echo "ok: finetune --mode graph captures once and trains as --mode pynative does"

# Unpacked examples of many lengths: graph mode pads each batch to a multiple of 64 tokens by
# default (a graph per padded length, at most 4 up to the demo's 256, not one per batch length);
# pynative mode given the same padding trains the same steps.
for mode in pynative graph; do
  pad=""
  [ $mode = pynative ] && pad="--pad-to-multiple-of 64"
  "$ZENITH" finetune --model "$llm/demo-llama" --data "$llm/finetune/train.jsonl" --method lora \
    --max-steps 8 --batch-size 4 --mode $mode $pad --out "$work/ftv_$mode" > ftv_$mode.out 2>&1 \
    || fail "finetune --mode $mode $pad exited $?: $(tail -20 ftv_$mode.out)"
done
grep -q "batches padded to a multiple of 64 tokens (at most 4 lengths): graph mode's default" \
  ftv_graph.out || fail "no padding line: $(grep '^\[finetune\]' ftv_graph.out)"
# The bfloat16 base's frozen output layer, its loss and dx in one op.
grep -q '^graph: .*linear+cross-entropy 1, .*output layer gradients 1, ' ftv_graph.out \
  || fail "finetune: output layer not fused: $(grep '^graph' ftv_graph.out | head -1)"
captures=$(grep -c '^graph: ' ftv_graph.out)
[ "$captures" -ge 1 ] && [ "$captures" -le 4 ] || fail "finetune: $captures captures in 8 steps"
paste <(losses ftv_pynative) <(losses ftv_graph) | awk '
  { n++; d = $2 - $4; if (d < 0) d = -d; if ($1 != $3 || d > 1e-5 * $2) bad = 1 }
  END { exit (n == 8 && !bad) ? 0 : 1 }' \
  || fail "padded finetune losses differ: $(paste <(losses ftv_pynative) <(losses ftv_graph))"
echo "ok: finetune --mode graph pads batches to a few lengths and trains as padded pynative does"
