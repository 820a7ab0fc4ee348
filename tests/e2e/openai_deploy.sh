#!/bin/bash
# An LLM deployed as a platform service (issue 38): `zenith deploy --model DIR --adapter
# NAME=DIR --name NAME` on a loopback `zenith server`, then the OpenAI API over HTTPS with the
# printed token (models with parent, chat with the base and the adapter), `zenith services
# adapter rm|add` on the running service, a second version and a rollback (the adapter added at
# run time kept by both), and a LoRA fine-tune's --out deployed as it is. $1 is the zenith binary.
set -u
ZENITH=$(realpath "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$here/../support/e2e_work.bash"
e2e_work openai_deploy
fail() {
  echo "FAIL: $*"
  [ -f "$work/server.log" ] && tail -20 "$work/server.log"
  for f in "$work"/srv/services/*/service.log; do [ -f "$f" ] && tail -20 "$f"; done
  exit 1
}
cd "$work"
"$ZENITH" server --host 127.0.0.1 --port 0 --data "$work/srv" --cpu-devices 1 --grace 1s \
  > "$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do [ -s "$work/srv/server.url" ] && break; sleep 0.1; done
[ -s "$work/srv/server.url" ] || fail "server did not start"
export ZENITH_SERVER=$(cat "$work/srv/server.url") ZENITH_DATA="$work/srv"
model="$repo/examples/llm/fortunes-llama"

# A LoRA adapter: two steps of `zenith finetune`.
"$ZENITH" finetune --model "$model" --data "$repo/examples/llm/finetune/train.jsonl" \
  --method lora --max-steps 2 --out "$work/lora" --threads 1 --progress none > finetune.log 2>&1 \
  || fail "finetune: $(tail -3 finetune.log)"

"$ZENITH" deploy --model "$model" --adapter fun="$work/lora" --name fortunes > deploy.log 2>&1 \
  || fail "deploy: $(cat deploy.log)"
cat deploy.log
token=$(sed -n 's/^  token: *//p' deploy.log)
url=$(sed -n 's/^  url: *//p' deploy.log)
cert=$(sed -n 's/^  cert: *//p' deploy.log)
[ -n "$token" ] && [ -n "$url" ] && [ -f "$cert" ] || fail "deploy printed no token, url or cert"
api() { curl -sS --cacert "$cert" -H "Authorization: Bearer $token" "$@"; }
chat() {
  api "$url/v1/chat/completions" -H 'Content-Type: application/json' \
    -d "{\"model\": \"$1\", \"messages\": [{\"role\": \"user\", \"content\": \"A fortune\"}], \"max_tokens\": 4}"
}

models=$(api "$url/v1/models") || fail "GET /v1/models"
echo "$models" | grep -q '"id":"fortunes"' || fail "no base model in $models"
echo "$models" | grep -q '"id":"fun","max_model_len":256,"object":"model","owned_by":"zenith","parent":"fortunes"' \
  || fail "no adapter with parent in $models"
chat fortunes | grep -q '"object":"chat.completion"' || fail "chat with the base: $(chat fortunes)"
chat fun | grep -q '"model":"fun"' || fail "chat with the adapter: $(chat fun)"
"$ZENITH" services | grep -q '^fortunes .* running' || fail "services: $("$ZENITH" services)"

"$ZENITH" services adapter rm fortunes fun || fail "adapter rm"
chat fun | grep -q '"code":"model_not_found"' || fail "removed adapter still answers: $(chat fun)"
"$ZENITH" services adapter add fortunes fun2="$work/lora" || fail "adapter add"
api "$url/v1/models" | grep -q '"id":"fun2"' || fail "added adapter not listed"
chat fun2 | grep -q '"model":"fun2"' || fail "chat with the added adapter: $(chat fun2)"
"$ZENITH" services adapter add fortunes bad="$work" 2>&1 | grep -q "adapter_config.json" \
  || fail "a directory without adapter_config.json was not refused"

# A second version, then back to the first: each serves the OpenAI API again.
"$ZENITH" deploy --model "$model" --name fortunes > deploy2.log 2>&1 || fail "deploy v2: $(cat deploy2.log)"
grep -q "version 2" deploy2.log || fail "second deploy: $(cat deploy2.log)"
url=$(sed -n 's/^  url: *//p' deploy2.log)
api "$url/v1/models" | grep -q '"id":"fun"' && fail "version 2 has no adapter, but lists one"
# fun2, added at run time, is the service's: kept in DATA/services/fortunes/adapters.json.
api "$url/v1/models" | grep -q '"id":"fun2"' || fail "version 2 lost the adapter added at run time"
"$ZENITH" services rollback fortunes > rollback.log 2>&1 || fail "rollback: $(cat rollback.log)"
grep -q "version 1" rollback.log || fail "rollback: $(cat rollback.log)"
url=$(sed -n 's/.* at \(https[^ ]*\) .*/\1/p' rollback.log)
api "$url/v1/models" | grep -q '"id":"fun"' || fail "version 1 after rollback lists no adapter"
chat fun2 | grep -q '"model":"fun2"' || fail "rollback lost the adapter added at run time"

# A LoRA fine-tune's --out deploys as it is: its base model plus the adapter named after it.
(cd "$repo" && "$ZENITH" deploy --model "$work/lora" --name tuned) > deploy3.log 2>&1 \
  || fail "deploy of a LoRA --out: $(cat deploy3.log)"
url3=$(sed -n 's/^  url: *//p' deploy3.log)
token=$(sed -n 's/^  token: *//p' deploy3.log)
api "$url3/v1/models" | grep -q '"id":"lora".*"parent":"tuned"' || fail "LoRA --out: $(api "$url3/v1/models")"

# A llama.cpp file deploys as it is (weights and vocabulary), quantized at the service's load.
"$ZENITH" export --format gguf --model "$model" --dtype f16 --out "$work/fortunes.gguf" \
  > export.log 2>&1 || fail "export: $(cat export.log)"
# Every LLM option of `zenith serve` reaches the service (its banner in service.log).
"$ZENITH" deploy --model "$work/fortunes.gguf" --dtype q8_0 --max-batched-tokens 32 \
  --max-step-cost 3.5 --kv-cache-memory 64Mi --threads 1 --chat-template chatml --name gguf \
  > deploy4.log 2>&1 \
  || fail "deploy of a GGUF file: $(cat deploy4.log)"
url=$(sed -n 's/^  url: *//p' deploy4.log)
token=$(sed -n 's/^  token: *//p' deploy4.log)
api "$url/v1/models" | grep -q '"id":"gguf"' || fail "GGUF: $(api "$url/v1/models")"
chat gguf | grep -q '"object":"chat.completion"' || fail "chat with the GGUF service: $(chat gguf)"
grep -q "weights: q8_0 (--dtype, at load)" "$work/srv/services/gguf/service.log" \
  || fail "the GGUF service was not quantized to q8_0 at load"
grep -q "engine: max batched tokens 32, max step cost 3.5, KV cache 64Mi, threads 1" \
  "$work/srv/services/gguf/service.log" || fail "engine options did not reach the service"
grep -q "chat template: chatml (--chat-template)" "$work/srv/services/gguf/service.log" \
  || fail "--chat-template did not reach the service"
"$ZENITH" deploy --model "$model" --max-step-cost -1 --name bad 2>&1 \
  | grep -q "max-step-cost must be >= 0, got -1" || fail "--max-step-cost -1 accepted"
"$ZENITH" deploy --model "$work/fortunes.gguf" --dtype q5_0 --name bad 2>&1 \
  | grep -q "expected f32, bf16, f16, q8_0, q4_0 or q4_k, got 'q5_0'" || fail "--dtype q5_0 accepted"
echo "PASS"
