#!/bin/bash
# The OpenAI API of `zenith serve` on an LLM directory, through the official openai npm SDK
# (tests/e2e/openai_sdk.mjs; openai 6.x from tests/npm, installed by the CTest fixture
# npm.install): models with an adapter, chat and completions, streaming, logprobs, seeds, JSON
# schema, tool calls (named, required, auto), several prompts and echo, errors as the SDK's
# APIError, an aborted stream; then with curl, greedy text
# equal to `zenith generate`'s, and an adapter's equal to the merged model's. A few seconds with
# examples/llm/fortunes-llama over HTTPS on loopback. $1 is the zenith binary.
set -u
ZENITH=$(realpath "$1")
here=$(realpath "$(dirname "${BASH_SOURCE[0]}")")
model=$(realpath "$here/../../examples/llm/fortunes-llama")
[ -f "$here/../npm/node_modules/openai/package.json" ] ||
  { echo "FAIL: tests/npm/node_modules is missing: run tests/npm/install.sh (CTest fixture npm.install)"; exit 1; }
source "$here/../support/e2e_work.bash"
e2e_work openai_sdk
fail() { echo "FAIL: $*"; tail -20 "$work/serve.log"; exit 1; }
cd "$work"

# A LoRA adapter: ten steps of `zenith finetune` at a high rate, enough to change greedy text.
"$ZENITH" finetune --model "$model" --data "$here/../../examples/llm/finetune/train.jsonl" \
  --method lora --max-steps 10 --lr 3e-3 --out "$work/lora" --threads 1 --progress none > finetune.log 2>&1 \
  || fail "finetune: $(tail -3 finetune.log)"

"$ZENITH" serve "$model" --adapter tuned="$work/lora" --name fortunes --port 0 \
  --port-file "$work/port" --data "$work/data" --threads 1 > serve.log 2>&1 &
server_pid=$!
for _ in $(seq 300); do [ -s "$work/port" ] && break; sleep 0.1; done
[ -s "$work/port" ] || fail "zenith serve did not start"
token=$(sed -n 's/^  token (shown once): //p' serve.log)
cert=$(sed -n 's/^  certificate: //p' serve.log)
[ -n "$token" ] && [ -f "$cert" ] || fail "no token or certificate printed"
# The SDK trusts the service's self-signed certificate as an extra CA.
ln -s "$here/../npm/node_modules" "$work/node_modules"
cp "$here/openai_sdk.mjs" "$work/"
NODE_EXTRA_CA_CERTS="$cert" node "$work/openai_sdk.mjs" "https://127.0.0.1:$(cat "$work/port")" \
  "$token" fortunes tuned || fail "openai SDK checks"

# Greedy text through the API equals `zenith generate`'s for the same prompt.
want=$("$ZENITH" generate --model "$model" --prompt "Once upon a time" --max-new-tokens 12 \
  --temperature 0 --threads 1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["text"])') \
  || fail "zenith generate"
got=$(curl -sS --cacert "$cert" -H "Authorization: Bearer $token" \
  "https://127.0.0.1:$(cat "$work/port")/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model": "fortunes", "prompt": "Once upon a time", "max_tokens": 12, "temperature": 0}' \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])') \
  || fail "completions over curl"
# (generate decodes the new tokens as a text of their own, dropping the leading space of the
# first; the API continues the prompt's text, as OpenAI and vLLM do.)
[ "${got# }" = "$want" ] || fail "the API's greedy text '$got' is not zenith generate's '$want'"
base_text=$want
echo "PASS: greedy text equals zenith generate's"

# The adapter's greedy text through the API equals the merged model's (zenith merge-adapter).
"$ZENITH" merge-adapter --model "$model" --adapter "$work/lora" --out "$work/merged" > merge.log 2>&1 \
  || fail "merge-adapter: $(cat merge.log)"
want=$("$ZENITH" generate --model "$work/merged" --prompt "Once upon a time" --max-new-tokens 12 \
  --temperature 0 --threads 1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["text"])') \
  || fail "zenith generate on the merged model"
got=$(curl -sS --cacert "$cert" -H "Authorization: Bearer $token" \
  "https://127.0.0.1:$(cat "$work/port")/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model": "tuned", "prompt": "Once upon a time", "max_tokens": 12, "temperature": 0}' \
  | python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])') \
  || fail "completions with the adapter"
[ "${got# }" = "$want" ] || fail "the adapter's greedy text '$got' is not the merged model's '$want'"
[ "$want" != "$base_text" ] || fail "the adapter does not change the greedy text: a weak check"
echo "PASS: the adapter's greedy text equals the merged model's"
