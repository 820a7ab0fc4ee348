#!/bin/bash
# The dashboard in a real browser (Debian chromium, headless, driven by playwright-core from the
# build's npm dir): a server on loopback runs a short 2-rank training job, a job that fails, a
# job that logs 100k points and a short zenith finetune job; dashboard_browser.js checks the
# pages (deploying the training job's checkpoint for the services page, and
# examples/llm/fortunes-llama for an LLM service's live charts), counts its checks and
# saves screenshots under <build>/test-artifacts/dashboard/. $1 is the zenith binary.
set -u
ZENITH=$(realpath "$1")
build=$(dirname "$ZENITH")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
modules="$build/web-npm/node_modules"
artifacts="$build/test-artifacts/dashboard"
source "$here/../support/e2e_work.bash"
e2e_work dashboard
fail() {
  echo "FAIL: $*"
  [ -f "$work/server.log" ] && tail -20 "$work/server.log" && cp "$work/server.log" "$artifacts/" 2>/dev/null
  exit 1
}

command -v node > /dev/null || fail "node not found (apt-get install nodejs npm)"
chromium=$(command -v chromium || command -v chromium-browser) || fail "chromium not found (apt-get install chromium)"
[ -f "$modules/playwright-core/package.json" ] || fail "no playwright-core in $modules (build the zenith_web target)"
[ -f "$build/share/zenith/web/index.html" ] || fail "no dashboard files in $build/share/zenith/web (build zenith_web)"
[ -d /usr/share/datasets/fashion-mnist ] || fail "Fashion-MNIST missing (apt-get install dataset-fashion-mnist)"
rm -rf "$artifacts" && mkdir -p "$artifacts"
cd "$work"

"$ZENITH" server --host 127.0.0.1 --port 0 --data "$work/srv" --cpu-devices 2 --grace 1s \
  > "$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do [ -s "$work/srv/server.url" ] && break; sleep 0.1; done
[ -s "$work/srv/server.url" ] || fail "server did not start"
export ZENITH_SERVER=$(cat "$work/srv/server.url") ZENITH_DATA="$work/srv"

# A short data-parallel training run: the seed's CNN on 24,000 Fashion-MNIST images, 2 ranks
# (DDP over Gloo), 3 epochs of batch 16, a loss every 10 steps. About 20 s on two idle cores:
# long enough for several 2-second device samples while it runs (12,000 images x 2 epochs
# once ended before the device chart had two points on an idle CI machine). Steps 2..21 are
# profiled (the job page's profile card and trace download).
cat > train.yaml <<YAML
job:
  name: seedcnn-fashion-mnist-ddp
  resources: { npu: 2 }
  env: { ZENITH_NUM_THREADS: "1" }
  entry: >-
    $ZENITH train --model seedcnn --dataset fashion-mnist --epochs 3 --limit-train 24000 --limit-test 1000 --batch-size 16 --log-every 10 --progress plain --out out --profile 20
YAML
printf 'job:\n  name: crashes\n  resources: { npu: 1 }\n  entry: echo "about to fail"; exit 3\n' > fail.yaml
# 100,000 loss points, as a long run would log them.
cat > big.yaml <<'YAML'
job:
  name: hundred-thousand-points
  resources: { npu: 1 }
  entry: >-
    awk 'BEGIN { for (i = 0; i < 100000; i++) printf "{\"step\": %d, \"epoch\": %d, \"name\": \"loss\", \"value\": %.5f, \"time\": %d}\n", i, int(i / 10000), 2.3 * exp(-i / 30000) + 0.05 * sin(i / 40), 1700000000 + i }' >> "$ZENITH_METRICS_FILE"
YAML
# A short zenith finetune run (LoRA on the demo model, 12 steps, eval every 4) whose step 10 is
# made a loss spike: its tokens/s and eval loss charts, and the spike's alert.
cat > finetune.yaml <<YAML
job:
  name: finetune-spike
  resources: { npu: 1 }
  env: { ZENITH_NUM_THREADS: "1" }
  entry: >-
    $ZENITH finetune --model $here/../../examples/llm/demo-llama
    --data $here/../../examples/llm/finetune/train.jsonl
    --eval-data $here/../../examples/llm/finetune/eval.jsonl --max-steps 12 --batch-size 4
    --eval-steps 4 --inject-spike 10 --out out-finetune
YAML
id_of() { sed -n 's/^submitted job \([0-9]*\) .*/\1/p'; }
# The quick jobs first: the training job then holds both devices.
fail_id=$("$ZENITH" submit fail.yaml | id_of)
big_id=$("$ZENITH" submit big.yaml | id_of)
finetune_id=$("$ZENITH" submit finetune.yaml | id_of)
train_id=$("$ZENITH" submit train.yaml | id_of)
[ -n "$train_id" ] && [ -n "$fail_id" ] && [ -n "$big_id" ] && [ -n "$finetune_id" ] || fail "submit"
echo "jobs: train $train_id, fail $fail_id, 100k points $big_id"

ZENITH_URL="$ZENITH_SERVER" ZENITH_TOKEN=$(cat "$work/srv/token") TRAIN_ID=$train_id \
  FAIL_ID=$fail_id BIG_ID=$big_id FINETUNE_ID=$finetune_id ARTIFACTS="$artifacts" CHROMIUM="$chromium" \
  ZENITH_BIN="$ZENITH" TRAIN_WORK="$work" \
  NODE_PATH="$modules" timeout 600 node "$here/dashboard_browser.js" || fail "browser checks"
"$ZENITH" job "$train_id" | grep -q succeeded || fail "training job: $("$ZENITH" job "$train_id"; tail -5 "$work/srv/jobs/$train_id/logs/rank_0.log")"
echo "screenshots: $artifacts"
echo "dashboard: all checks passed"
