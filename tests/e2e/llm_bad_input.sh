#!/bin/bash
# Bad input to an LLM service (issue 38, "Load and bad input"): `zenith serve
# examples/llm/fortunes-llama` on loopback (plain HTTP) gets oversized bodies, 10,000 stop
# strings, n: 1000, max_tokens: 10^9, deeply nested JSON, invalid UTF-8, prompts of only special
# tokens and more over raw HTTP (tests/e2e/llm_bad_input.mjs): each a 4xx in OpenAI's envelope
# naming the field, the service answering a real completion after each. A few seconds.
# $1 is the zenith binary.
set -u
ZENITH=$(realpath "$1")
here=$(realpath "$(dirname "${BASH_SOURCE[0]}")")
model=$(realpath "$here/../../examples/llm/fortunes-llama")
command -v node > /dev/null || { echo "FAIL: node not found (apt-get install nodejs)"; exit 1; }
source "$here/../support/e2e_work.bash"
e2e_work llm_bad_input
fail() { echo "FAIL: $*"; tail -20 "$work/serve.log"; exit 1; }
cd "$work"

"$ZENITH" serve "$model" --name fortunes --port 0 --port-file "$work/port" --data "$work/data" \
  --insecure-http --threads 1 > serve.log 2>&1 &
server_pid=$!
for _ in $(seq 300); do [ -s "$work/port" ] && break; sleep 0.1; done
[ -s "$work/port" ] || fail "zenith serve did not start"
token=$(sed -n 's/^  token (shown once): //p' serve.log)
[ -n "$token" ] || fail "no token printed"
node "$here/llm_bad_input.mjs" "http://127.0.0.1:$(cat "$work/port")" "$token" fortunes ||
  fail "bad input checks"
kill -0 "$server_pid" 2> /dev/null || fail "the service died"
