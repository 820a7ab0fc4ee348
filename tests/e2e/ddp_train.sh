#!/bin/bash
# Data-parallel `zenith train` through the platform: --nproc 2 trains and only rank 0 writes;
# a job YAML with `npu: 2` whose entry is `zenith train`, with one rank SIGKILLed mid-training:
# without restarts the job fails with an alert, with max_restarts: 1 it resumes from the last
# checkpoint and finishes. Uses the first samples of Fashion-MNIST; about a minute on 2 cores.
# $1 is the zenith binary.
set -u
ZENITH=$(realpath "$1")
data=/usr/share/datasets/fashion-mnist
[ -d "$data" ] || { echo "missing $data: apt-get install dataset-fashion-mnist" >&2; exit 1; }
source "$(dirname "${BASH_SOURCE[0]}")/../support/e2e_work.bash"
e2e_work ddp
fail() { echo "FAIL: $*"; exit 1; }
cd "$work"
export ZENITH_DATA="$work/data" ZENITH_COMM_TIMEOUT=20

# --- zenith train --nproc 2
"$ZENITH" train --nproc 2 --model seedcnn --dataset fashion-mnist --epochs 2 --limit-train 1024 \
  --limit-test 300 --batch-size 32 --threads 1 --log-every 8 --progress plain --out "$work/out1" \
  > train1.out 2> train1.err || fail "train --nproc 2 exited $?: $(tail -20 train1.err train1.out)"
grep -q "^\[rank 1\] .*rank 1 of 2; writing nothing" train1.out || fail "rank 1 did not train: $(cat train1.out)"
grep -q "^\[rank 0\] .*final test accuracy" train1.out || fail "no final line: $(tail train1.out)"
for f in eval_log.json metrics.jsonl checkpoint_epoch_1.safetensors checkpoint_epoch_2.safetensors; do
  [ -s "out1/$f" ] || fail "missing out1/$f"
done
[ "$(ls out1/summary | wc -l)" = 1 ] || fail "expected one event file (rank 0's): $(ls out1/summary)"
grep -q '"ranks": 2' out1/eval_log.json || fail "eval_log.json does not say 2 ranks"
grep -q '"name":"comm_bytes_per_second"' out1/metrics.jsonl || fail "no comm metrics in metrics.jsonl"
# 1024 samples over 2 ranks of batch 32: 16 steps per epoch, 32 in all.
tail -1 out1/metrics.jsonl | grep -q '"step":32' || fail "expected 32 global steps: $(tail -1 out1/metrics.jsonl)"
echo "ok: zenith train --nproc 2"

"$ZENITH" train --nproc 0 --out "$work/bad" > /dev/null 2> bad.err && fail "--nproc 0 accepted"
grep -q "\-\-nproc must be >= 1" bad.err || fail "bad --nproc message: $(cat bad.err)"
WORLD_SIZE=2 "$ZENITH" train --nproc 2 --out "$work/bad" > /dev/null 2> bad.err && fail "--nproc inside a job accepted"
grep -q "\-\-nproc 2 inside a job of 2 ranks" bad.err || fail "nested --nproc message: $(cat bad.err)"
[ ! -e "$work/bad" ] || fail "a rejected command wrote its output directory"
echo "ok: --nproc 0 and --nproc inside a job rejected"

# --- a job YAML with npu: 2 whose entry is zenith train; rank 1 killed mid-training.
write_job() {  # $1 file, $2 max_restarts, $3 out dir
  cat > "$1" <<YAML
job:
  name: ddp-kill
  resources: { npu: 2 }
  max_restarts: $2
  working_dir: $work
  entry: >-
    $ZENITH train --model seedcnn --dataset fashion-mnist --epochs 2 --limit-train 4096
    --limit-test 200 --batch-size 16 --threads 1 --save-steps 20 --log-every 20
    --progress plain --out $3
YAML
}
# Waits for a step checkpoint in $1, then SIGKILLs the `zenith train` of rank 1 writing to $1.
kill_rank1_after_checkpoint() {
  for _ in $(seq 600); do ls "$1"/checkpoint_step_*.safetensors > /dev/null 2>&1 && break; sleep 0.1; done
  ls "$1"/checkpoint_step_*.safetensors > /dev/null 2>&1 || { echo "no step checkpoint appeared"; return 1; }
  for p in $(grep -lsa "ZENITH_JOB_DIR=" /proc/[0-9]*/environ | cut -d/ -f3); do
    tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | grep -q "train .*--out $1\b" || continue
    tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "RANK=1" || continue
    case "$(readlink /proc/$p/exe)" in "$ZENITH") kill -KILL "$p"; echo "killed rank 1 (pid $p)"; return 0 ;; esac
  done
  echo "rank 1 not found"; return 1
}

write_job fail.yaml 0 "$work/out2"
"$ZENITH" run fail.yaml --data "$work/data" > run2.out 2> run2.err &
run_pid=$!
kill_rank1_after_checkpoint "$work/out2" || fail "could not kill rank 1: $(tail run2.out)"
start=$(date +%s)
wait $run_pid
code=$?
[ $code != 0 ] || fail "job with a killed rank succeeded"
[ $(( $(date +%s) - start )) -lt 30 ] || fail "the job took too long to fail"
grep -q "\[alert\] abnormal_exit: " run2.err || fail "no alert: $(cat run2.err)"
# Whichever the platform sees first: rank 1's signal, or rank 0 failing on the lost peer with a
# clear communication error.
grep -q "rank 1 was killed by signal 9" run2.err ||
  grep -q "^\[rank 0\] .*error: \[communication\] .*rank 1 lost" run2.out ||
  fail "neither rank 1's signal nor rank 0's communication error reported: $(cat run2.err)"
grep -q "\[run\] job failed" run2.err || fail "job not marked failed: $(cat run2.err)"
echo "ok: killed rank -> job failed with an alert (exit $code)"

write_job restart.yaml 1 "$work/out3"
"$ZENITH" run restart.yaml --data "$work/data" > run3.out 2> run3.err &
run_pid=$!
kill_rank1_after_checkpoint "$work/out3" || fail "could not kill rank 1: $(tail run3.out)"
wait $run_pid || fail "restarted job failed: $(tail -20 run3.err run3.out)"
grep -q "Restarting job after failure (rank [01] " run3.err run3.out || fail "no restart: $(cat run3.err)"
grep -q "^\[rank 0\] .*\[train\] restart 1: resuming from $work/out3/checkpoint_step_" run3.out || fail "rank 0 did not resume: $(grep train run3.out | head)"
grep -q "^\[rank 1\] .*\[train\] restart 1: resuming from $work/out3/checkpoint_step_" run3.out || fail "rank 1 did not resume"
grep -q '"status": "finished"' out3/eval_log.json || fail "eval_log.json not finished"
grep -q '"epochs_done": 2' out3/eval_log.json || fail "did not finish 2 epochs"
[ -s out3/checkpoint_epoch_2.safetensors ] || fail "no final checkpoint"
echo "ok: killed rank -> restart resumes from the last checkpoint and finishes"
echo "PASS"
