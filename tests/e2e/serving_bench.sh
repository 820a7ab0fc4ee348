#!/bin/bash
# Smoke run of the serving bench (bench/serving.py; its figures are in docs/performance.md):
# examples/llm/fortunes-llama at f32, 1 thread, 8 new tokens, 4 streams, 4 requests a Poisson
# rate, against llama.cpp through node-llama-cpp (CTest fixture npm.install). Checks that every
# section of its --json is there with positive figures. About 20 s. $1 is the zenith binary.
set -u
ZENITH=$(realpath "$1")
here=$(realpath "$(dirname "${BASH_SOURCE[0]}")")
[ -f "$here/../npm/node_modules/node-llama-cpp/package.json" ] || {
  echo "FAIL: tests/npm/node_modules is missing: run tests/npm/install.sh (fixture npm.install)"
  exit 1
}
[ -x "$(dirname "$ZENITH")/bench/llm_quant" ] || { echo "FAIL: build bench/llm_quant"; exit 1; }
source "$here/../support/e2e_work.bash"
e2e_work serving_bench
TMPDIR="$work" python3 "$here/../../bench/serving.py" --zenith "$ZENITH" \
  --model-dir "$here/../../examples/llm/fortunes-llama" --dtypes f32 --threads 1 --new 8 \
  --runs 1 --streams 4 --requests 4 --kv-cache-memory 16Mi --json > "$work/out.json" \
  2> "$work/err.log" || { echo "FAIL: bench/serving.py"; tail -20 "$work/err.log"; exit 1; }
python3 - "$work/out.json" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
for key in ("isa", "sgemm_peak_gflops", "threads", "read_bandwidth_gbs", "engine",
            "load_average_start", "load_average_end"):
    assert key in r, f"no '{key}' in the bench's JSON"
(d,) = r["decode"]
assert d["dtype"] == "f32" and d["threads"] == 1, d
assert d["zenith_tokens_s"] > 0 and d["llamacpp_tokens_s"] > 0, d
(c,) = r["concurrent"]
assert c["streams"] == 4 and c["zenith_tokens_s"] > 0 and c["llamacpp_tokens_s"] > 0, c
assert c["zenith_batch1_tokens_s"] > 0, c
assert len(r["poisson"]) == 3, r["poisson"]
for p in r["poisson"]:
    assert p["requests"] == 4 and p["output_tokens"] > 0, p
    for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        assert 0 <= p[k]["p50"] <= p[k]["p99"] and p[k]["p99"] > 0, (k, p[k])
# The issue's two latency ratios are timed figures for the page, not asserted here (timed
# assertions are not tests); what is checked is that they were measured as described.
(c,) = r["prefix_cache"]
assert c["cached_tokens"] == c["system_prompt_tokens"] > 0, c
assert c["uncached_ttft_ms"] > 0 and c["cached_ttft_ms"] > 0 and c["uncached_over_cached"] > 0, c
assert [p["budget"] for p in r["long_prompt"]] == [16], r["long_prompt"]
for p in r["long_prompt"]:
    assert p["prompt_tokens"] == 8 * p["budget"] and p["runs"] >= 1, p
    assert p["max_itl_during_ms"] > 0 and p["max_over_median"] > 0, p
    # The engine's side of the same gaps, from its trace (ZENITH_ENGINE_TRACE).
    e = p["engine"]
    assert 0 < e["median_itl_ms"] <= e["max_itl_during_ms"] and e["max_over_median"] >= 1, e
    assert e["median_decode_step_ms"] > 0 and e["worst_step_ms"] > 0, e
(m,) = r["memory"]
assert m["rss_start_bytes"] > m["weight_bytes"] > 0 and m["kv_cache_bytes"] == 16 << 20, m
print("serving bench smoke run: ok")
PY
