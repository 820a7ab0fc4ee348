#!/usr/bin/env bash
# What OpenMP's wait policy costs and saves: wall-clock seconds of a 30-step LoRA fine-tune and a
# short `zenith train`, for each policy, on the machine as it is ("as-is") and with a busy loop on
# every core (another program's load). zenith's default is OMP_WAIT_POLICY=PASSIVE
# (src/cli/omp_defaults.cpp); "spin 300000" is libgomp's default, what zenith ran with before.
# A bench, not a test: it prints figures and asserts nothing.
#   bench/omp_wait_policy.sh [--zenith PATH] [--reps N] [--json]
set -euo pipefail
cd "$(dirname "$0")/.."
zenith=build/release/zenith reps=3 json=0
while [ $# -gt 0 ]; do
  case "$1" in
    --zenith) zenith=$2; shift ;;
    --reps) reps=$2; shift ;;
    --json) json=1 ;;
    *) echo "usage: $0 [--zenith PATH] [--reps N] [--json]" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$zenith" ] || { echo "no zenith binary at $zenith (build zenith_cli)" >&2; exit 1; }

work=$(mktemp -d)
busy=()
stop_load() {
  for pid in "${busy[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${busy[@]}"; do wait "$pid" 2>/dev/null || true; done
  busy=()
}
trap 'stop_load; rm -rf "$work"' EXIT

# name|environment for `env` (each run starts from neither variable set)
policies=(
  "passive (zenith's default)|"
  "spin 30000 (platform, own cores)|GOMP_SPINCOUNT=30000"
  "spin 300000 (libgomp's default)|GOMP_SPINCOUNT=300000"
)
run=0
command_for() {  # $1: finetune or train; sets cmd, writing into a fresh output dir
  run=$((run + 1))
  case "$1" in
    finetune)
      cmd=("$zenith" finetune --model examples/llm/demo-llama --lora-targets all-linear
           --data examples/llm/finetune/train.jsonl --max-steps 30 --progress none
           --out "$work/out$run") ;;
    train)
      cmd=("$zenith" train --model seedcnn --dataset fashion-mnist --epochs 1 --limit-train 2048
           --limit-test 256 --batch-size 64 --progress none --out "$work/out$run") ;;
  esac
}

[ "$json" = 1 ] || printf "%-6s %-9s %-34s %s\n" load workload policy "seconds (each run)"
rows=()
if [ "$json" = 1 ]; then
  # The machine's fields (ISA, sgemm peak) as every bench's --json has them, from a one-call
  # conv_ops run at the start (bench_machine.h).
  conv_ops=$(dirname "$zenith")/bench/conv_ops
  [ -x "$conv_ops" ] || { echo "--json needs $conv_ops for the machine's fields" >&2; exit 1; }
  machine=$("$conv_ops" --reps 1 --threads "$(nproc)" --json 2>/dev/null |
    python3 -c 'import json, sys; d = json.load(sys.stdin)
print(json.dumps({k: v for k, v in d.items() if not isinstance(v, (list, dict)) and k != "reps"}))')
fi
for load in as-is busy; do
  if [ "$load" = busy ]; then
    for _ in $(seq "$(nproc)"); do (while :; do :; done) & busy+=($!); done
  fi
  for w in finetune train; do
    for p in "${policies[@]}"; do
      name=${p%%|*} vars=${p#*|}
      times=()
      for _ in $(seq "$reps"); do
        command_for "$w"
        start=$(date +%s.%N)
        # shellcheck disable=SC2086  # $vars: zero or more NAME=VALUE words
        env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT $vars "${cmd[@]}" >"$work/log" 2>&1 ||
          { cat "$work/log" >&2; echo "$w failed under '$name'" >&2; exit 1; }
        times+=("$(echo "$start $(date +%s.%N)" | awk '{printf "%.2f", $2 - $1}')")
      done
      if [ "$json" = 1 ]; then
        rows+=("$(printf '{"load":"%s","workload":"%s","policy":"%s","seconds":[%s]}' \
          "$load" "$w" "$name" "$(IFS=,; echo "${times[*]}")")")
      else
        printf "%-6s %-9s %-34s %s\n" "$load" "$w" "$name" "${times[*]}"
      fi
    done
  done
  stop_load
done
if [ "$json" = 1 ]; then
  # One object: the machine's fields, then each (load, workload, policy) row.
  printf '%s' "$machine" | python3 -c 'import json, sys
d = json.load(sys.stdin)
d.update(bench="omp_wait_policy", cores=int(sys.argv[1]), reps=int(sys.argv[2]),
         rows=[json.loads(r) for r in sys.argv[3:]])
print(json.dumps(d, indent=1))' "$(nproc)" "$reps" "${rows[@]}"
fi
