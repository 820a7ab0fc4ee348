#!/usr/bin/env python3
"""Renders docs/performance.md from the benches' --json output committed in docs/perf/.

docs/perf/runs.json lists the runs: for each, the JSON file a bench wrote with --json, the
command that wrote it, when and on what host. Each run becomes a table headed by the host's ISA
and the sgemm peak the bench measured beside it. Nothing here is measured: re-running this
script on the same files gives the same page, which tests/rules (ctest rules.perf_page) checks.

  scripts/perf_report.py            write docs/performance.md
  scripts/perf_report.py --check    exit 1 (with a diff) when docs/performance.md differs

To refresh a table: run the bench with --json into docs/perf/<file>, update its entry in
runs.json (command, date, host), run this script, and commit the three together.
"""
import argparse
import difflib
import json
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PERF = os.path.join(ROOT, "docs", "perf")
PAGE = os.path.join(ROOT, "docs", "performance.md")


def num(v, digits=1):
    return f"{v:.{digits}f}"


def machine_line(r):
    isa = r["isa"]
    if "onednn_isa" in r:  # bench_machine.h's fields; llm_ops lists the CPU's flags instead
        paths = "on" if r.get("avx2_fast_paths") else "off"
        isa += f" (oneDNN uses {r['onednn_isa']}; zenith's AVX2 fast paths {paths})"
    return (f"Host ISA: {isa}; sgemm peak (dnnl_sgemm 2048^3): "
            f"{num(r['sgemm_peak_gflops'])} GFLOP/s; {r['threads']} thread(s).")


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out


def render_graph_vs_eager(r):
    lines = [
        "One training step (forward, loss, backward, update) per workload in both modes, timed "
        "alternately in one process. ratio = eager / graph (> 1: graph mode is faster); "
        "cpu x: the same for CPU time; % peak: the step's conv and matmul FLOP/s against the "
        "sgemm peak measured beside that workload; DRAM: STREAM triad, GB/s; MB: the step's peak "
        "memory.", ""]
    header = ["workload", "steps", "eager ms", "graph ms", "ratio", "cpu x", "eager % peak",
              "graph % peak", "sgemm GF/s", "DRAM GB/s", "eager MB", "graph MB"]
    rows = []
    for name, w in r["workloads"].items():
        rows.append([name, w["steps"], num(w["eager_median_ms"]), num(w["graph_median_ms"]),
                     num(w["ratio"], 2), num(w["cpu_ratio"], 2), num(w["eager_pct_of_peak"]),
                     num(w["graph_pct_of_peak"]), num(w["sgemm_peak_gflops"]),
                     num(w["stream_gbps"]), num(w["eager_step_peak_mb"]),
                     num(w["graph_step_peak_mb"])])
    return lines + table(header, rows)


def render_conv_ops(r):
    lines = [
        f"ms per call, min and median of {r['reps']} calls; GFLOP/s of the direct convolution at "
        "the min. Rows \"same, oneDNN's\" run the op above them with zenith's AVX2 fast paths "
        "off.", ""]
    header = ["op", "min ms", "median ms", "GFLOP/s", "% peak"]
    rows = [[row["op"].strip(), num(row["min_ms"], 3), num(row["median_ms"], 3),
             num(row["gflops"]), num(row["pct_of_peak"])] for row in r["rows"]]
    return lines + table(header, rows)


def render_lm_head(r):
    clock = "CPU" if r["time"] == "cpu" else "wall"
    lines = [
        f"stories15M's output layer (D 288, V 32000). {clock} ms per call, median (min) of "
        f"{r['reps']}: linear_cross_entropy (logits GEMM, loss and dlogits) and the two matmuls "
        "that read dlogits, against linear_cross_entropy_grads (all three without dlogits).", ""]
    header = ["rows", "linear_cross_entropy", "its GFLOP/s", "dx matmul", "dW matmul", "sum",
              "linear_cross_entropy_grads", "its GFLOP/s"]

    def cell(s):
        return f"{num(s['median_ms'], 2)} ({num(s['min_ms'], 2)})"

    rows = [[row["rows"], cell(row["linear_cross_entropy"]),
             num(row["linear_cross_entropy_gflops"]), cell(row["dx_matmul"]),
             cell(row["dw_matmul"]), num(row["sum_median_ms"]),
             cell(row["linear_cross_entropy_grads"]), num(row["grads_gflops"])]
            for row in r["rows"]]
    return lines + table(header, rows)


def render_serving(r):
    bw = ", ".join(f"{num(v)} GB/s at {t} thread(s)" for t, v in r["read_bandwidth_gbs"].items())
    lines = [
        f"Random LLaMAs of the 15M and 110M shapes (vocab 2048) beside {r['engine']} on GGUF "
        "exports of the same weights, greedy, float32 KV caches, "
        f"{r['new_tokens']} new tokens a request; medians of {r['runs']} runs. Read bandwidth "
        f"{bw}; load average {num(r['load_average_start'], 2)} at the start, "
        f"{num(r['load_average_end'], 2)} at the end.", "",
        "Decode at batch 1 (tokens/s from the first generated token to the last, after a "
        "16-token prompt; best run in brackets):", ""]

    def pair(c, side):
        return f"{num(c[side + '_tokens_s'])} ({num(c[side + '_best_tokens_s'])})"
    lines += table(["shape", "weights", "threads", "zenith", "llama.cpp", "zenith / llama.cpp"],
                   [[c["shape"], c["dtype"], c["threads"], pair(c, "zenith"), pair(c, "llamacpp"),
                     num(c["zenith_tokens_s"] / c["llamacpp_tokens_s"], 2)]
                    for c in r["decode"]])
    rows = [c for c in r["concurrent"] if "zenith_tokens_s" in c]
    lines += ["", f"{r['streams']} concurrent streams, aggregate output tokens/s (all tokens / "
              "wall time from the first request to the last token, prompts included): `zenith "
              "serve`'s OpenAI endpoint (f32 weights) against llama.cpp with "
              f"{r['streams']} sequences in one context, and zenith's own batch-1 rate through "
              "the same server:", ""]
    lines += table(["shape", "threads", "zenith", "llama.cpp", "zenith / llama.cpp",
                    "zenith batch 1", "streams / batch 1"],
                   [[c["shape"], c["threads"], num(c["zenith_tokens_s"]),
                     num(c["llamacpp_tokens_s"]) if "llamacpp_tokens_s" in c else "",
                     num(c["zenith_tokens_s"] / c["llamacpp_tokens_s"], 2)
                     if "llamacpp_tokens_s" in c else "",
                     num(c["zenith_batch1_tokens_s"]),
                     num(c["zenith_tokens_s"] / c["zenith_batch1_tokens_s"], 2)] for c in rows])
    lines += ["", "vLLM's benchmark_serving definitions at Poisson request rates (a quarter, half "
              "and all of the streams' capacity), 32-token random prompts; ms, p50 / p99:", ""]

    def pc(m):
        return f"{num(m['p50'])} / {num(m['p99'])}"
    lines += table(["shape", "threads", "requests/s", "requests", "output tok/s", "TTFT", "TPOT",
                    "ITL", "e2e latency"],
                   [[p["shape"], p["threads"], num(p["rate"], 2), p["requests"],
                     num(p["output_tokens_s"]), pc(p["ttft_ms"]), pc(p["tpot_ms"]),
                     pc(p["itl_ms"]), pc(p["e2e_ms"])] for p in r["poisson"]])
    if r.get("prefix_cache"):
        lines += ["", "The issue's two latency ratios, timed through `zenith serve` (medians of "
                  "the runs): TTFT of a request whose system prompt is in the prefix cache "
                  "against the same request with a system prompt not seen before (the issue: "
                  "at least 3x lower), and the largest inter-token gap of a running stream "
                  "while a prompt of 8x the engine's token budget (`--max-batched-tokens`) "
                  "arrives, over the stream's median gap (the issue: within 3x). Taken on the "
                  "shared host under the load above:", ""]
        lines += table(["shape", "threads", "system prompt tokens", "cached tokens",
                        "TTFT uncached ms", "TTFT cached ms", "uncached / cached"],
                       [[c["shape"], c["threads"], c["system_prompt_tokens"], c["cached_tokens"],
                         num(c["uncached_ttft_ms"]), num(c["cached_ttft_ms"]),
                         num(c["uncached_over_cached"], 2)] for c in r["prefix_cache"]])

        def long_rows(rows):
            return table(["shape", "threads", "token budget", "long prompt tokens",
                          "median ITL ms", "largest ITL during ms", "largest / median",
                          "worst run", "long prompt TTFT ms"],
                         [[c["shape"], c["threads"], c["budget"], c["prompt_tokens"],
                           num(c["median_itl_ms"]), num(c["max_itl_during_ms"]),
                           num(c["max_over_median"], 2), num(c["worst_max_over_median"], 2),
                           num(c["long_prompt_ttft_ms"]) if "long_prompt_ttft_ms" in c else ""]
                          for c in rows])
        lines += [""] + long_rows(r["long_prompt"])
        if r.get("long_prompt_uncapped"):
            lines += ["", "The same without the prefill cap (`zenith serve --max-step-cost 0`: "
                      "every step takes the whole budget, as before the cap), "
                      f"{r.get('uncapped_note', '')}:", ""]
            lines += long_rows(r["long_prompt_uncapped"])
        for key, what in (("llamacpp_prefix_cache", "prefix"), ("llamacpp_long_prompt", "long")):
            if not r.get(key):
                continue
            if what == "prefix":
                lines += ["", f"{r['engine']}'s side (bench/serving_llamacpp.mjs --latency, "
                          "same threads and prompt lengths): the cached system prompt kept in "
                          "a reused context sequence (only the question evaluated), and its "
                          "batch size as the token budget:", ""]
                lines += table(["shape", "threads", "system prompt tokens", "TTFT uncached ms",
                                "TTFT cached ms", "uncached / cached"],
                               [[c["shape"], c["threads"], c["system_prompt_tokens"],
                                 num(c["uncached_ttft_ms"]), num(c["cached_ttft_ms"]),
                                 num(c["uncached_over_cached"], 2)] for c in r[key]])
            else:
                lines += [""] + long_rows(r[key])
    lines += ["", "`zenith serve`'s resident memory (VmRSS) at rest, after start and after the "
              "traffic above, beside its weights and its KV pool (`--kv-cache-memory`):", ""]
    mib = 1 << 20
    lines += table(["shape", "weights MiB", "KV pool MiB", "RSS at start MiB", "RSS after MiB",
                    "after - weights - pool MiB"],
                   [[m["shape"], num(m["weight_bytes"] / mib), num(m["kv_cache_bytes"] / mib),
                     num(m["rss_start_bytes"] / mib), num(m["rss_after_bytes"] / mib),
                     num((m["rss_after_bytes"] - m["weight_bytes"] - m["kv_cache_bytes"]) / mib)]
                    for m in r["memory"]])
    return lines


def render_llm_ops(r):
    lines = [
        "The transformer ops at the two benchmark LLaMA configs' shapes (15m: dim 288; 110m: dim "
        "768; batch 8 x seq 256): the best of the calls, GFLOP/s (and % of the sgemm peak) where "
        "the op is counted in FLOPs, else GB/s; PyTorch's time where the run included it. Load "
        f"average {r['load_average_before']} before, {r['load_average_after']} after.", ""]
    header = ["case", "ms", "GFLOP/s", "% peak", "GB/s", "PyTorch ms"]
    rows = [[c["case"], num(c["ms"], 3), num(c["gflops"]) if "gflops" in c else "",
             num(c["pct_of_peak"]) if "pct_of_peak" in c else "",
             num(c["gbs"]) if "gbs" in c else "",
             num(c["torch_ms"], 3) if "torch_ms" in c else ""] for c in r["cases"]]
    if not any("torch_ms" in c for c in r["cases"]):  # run with --no-pytorch
        header, rows = header[:-1], [row[:-1] for row in rows]
    return lines + table(header, rows)


def render_omp_wait_policy(r):
    lines = [
        "Wall seconds of whole `zenith` runs (each run listed) under OpenMP's wait policies, on "
        "the machine as it is and with a busy loop on every core (another program's load). "
        "zenith's default is the passive policy; libgomp's spinning default is what it ran "
        "with before.", ""]
    header = ["load", "workload", "policy", "seconds (each run)"]
    rows = [[w["load"], w["workload"], w["policy"], " ".join(num(t, 2) for t in w["seconds"])]
            for w in r["rows"]]
    return lines + table(header, rows)


def render_llm_quant(r):
    bw = ", ".join(f"{num(v)} GB/s at {t} thread(s)" for t, v in r["read_bandwidth_gbs"].items())
    lines = [
        "Batch-1 greedy decoding after a 16-token prompt on random LLaMAs of the 15M and 110M "
        f"shapes, quantized kernels {r['quant_isa']}: median and best tokens/s over the runs, "
        "the weight bytes a step reads, and the best run's share of the measured read "
        f"bandwidth ({bw}); above 100% the weights are served from the caches. Load average "
        f"{num(r['load_average'], 2)} at the start.", ""]
    header = ["shape", "weights", "threads", "tok/s", "best tok/s", "MB/token", "% of bandwidth"]
    rows = [[c["shape"], c["dtype"], c["threads"], num(c["tokens_s"]), num(c["best_tokens_s"]),
             num(c["bytes_per_token"] / 1e6), num(c["bandwidth_pct"])] for c in r["results"]]
    lines += table(header, rows)
    if "vs_llamacpp" in r:
        v = r["vs_llamacpp"]
        lines += ["", f"Beside {v['engine']} on the same GGUF files ({v['model']}), best "
                  "tokens/s of each:", ""]
        lines += table(["file", "threads", "zenith", "llama.cpp", "zenith / llama.cpp"],
                       [[c["file"], c["threads"], num(c["zenith"]), num(c["llamacpp"]),
                         num(c["zenith"] / c["llamacpp"], 2)] for c in v["rows"]])
    return lines


def render_finetune(r):
    lines = [
        f"One fine-tuning step (forward, chunked loss, backward, AdamW) at batch {r['batch']} x "
        f"seq {r['seq']}, random weights and tokens, LoRA r {r['lora']['r']} alpha "
        f"{num(r['lora']['alpha'], 0)} on {r['lora']['targets']}: median wall and CPU ms per "
        "step, tokens/s, % of the sgemm peak for the FLOPs the step needs, peak RSS. lora: float32 "
        "base; lora-bf16-o1: the base in bfloat16 with `--amp O1`, whose linear products run in "
        "bfloat16 arithmetic (float32 accumulation) where the CPU has AVX512_BF16.", ""]
    header = ["shape", "case", "step ms", "CPU ms", "tokens/s", "% peak", "peak RSS MB"]
    rows = [[c["config"], c["case"], num(c["zenith"]["median_ms"]),
             num(c["zenith"]["median_cpu_ms"]), num(c["zenith_tokens_s"]),
             num(c["zenith_pct"]), num(c["zenith_peak_mb"], 0)]
            for c in r["results"] if "zenith" in c]
    lines += table(header, rows)
    for config, c in r.get("checks", {}).items():
        if "bf16_o1_speedup" in c:
            arith = "bfloat16" if c["bf16_arithmetic"] else "float32"
            lines += ["", f"{config}: the O1 step ({arith} arithmetic) is "
                      f"{num(c['bf16_o1_speedup'], 2)}x the float32 step in wall time, "
                      f"{num(c['bf16_o1_cpu_speedup'], 2)}x in CPU time (target >= 1.5x on an "
                      "AVX512_BF16 host)."]
    return lines


def one_process(r):
    """bench/model_parallel's and bench/zero's one-process row."""
    return next(m for m in r["modes"] if m["ranks"] == 1)


def render_model_parallel(r):
    c, mib, one = r["config"], 1 << 20, one_process(r)
    lines = [
        f"A LLaMA of hidden {c['hidden']}, {c['layers']} layers, vocabulary {c['vocab']} "
        f"(Ψ = {num(one['parameters'] / 1e6, 2)}M), global batch {c['batch']} x {c['seq']} "
        f"tokens, AdamW, mean of {c['steps']} steps after a warm-up; ranks forked on this host "
        "(Gloo over 127.0.0.1), 1 thread each, against one process at 2 threads. Step time: the "
        "slowest rank's; memory: the larger rank's; bytes sent: rank 0's in each mesh group, "
        "beside what the implementation's collectives must move (tensor: the all-reduces, "
        "all-gathers and reduce-scatters its layers issue, see bench/model_parallel.cpp; "
        "pipeline: stage 0's activations; data: a ring all-reduce of every gradient). Model "
        "state: weights + gradients + AdamW's two moments, against 16Ψ/(tensor x pipeline). "
        f"Load average {num(r['load_average_start'], 2)} at the start, "
        f"{num(r['load_average_end'], 2)} at the end.", ""]
    header = ["mode", "ranks x threads", "step s", "tokens/s", "vs one process",
              "model state MiB", "16Ψ/degree MiB", "vs one", "peak live MiB",
              "sent KiB (formula): tensor", "pipeline", "data", "comm s",
              "blocked s: tensor / pipeline / data (share of step)"]

    def blocked(m):  # time rank 0 waited in each group's collectives (bench/model_parallel)
        if "blocked_seconds_per_step" not in m:
            return ""
        parts = " / ".join(num(m.get(g + "_blocked_seconds_per_step", 0), 3)
                           for g in ("tensor", "pipeline", "data"))
        return f"{parts} ({num(100 * m['blocked_share_of_step'], 0)}%)"

    def sent(m, group):
        got, want = m[group + "_sent_bytes_per_step"], m[group + "_sent_formula"]
        return f"{num(got / 1024, 0)} ({num(want / 1024, 0)})" if got or want else ""
    rows = [[m["mode"], f"{m['ranks']} x {m['threads_per_rank']}", num(m["step_seconds"], 3),
             num(m["tokens_per_second"], 0),
             num(m["tokens_per_second"] / one["tokens_per_second"], 2),
             num(m["model_state_bytes"] / mib), num(m["model_state_formula"] / mib),
             num(m["model_state_vs_one_process"], 3), num(m["peak_live_bytes"] / mib),
             sent(m, "tensor"), sent(m, "pipeline"), sent(m, "data"),
             num(m["communication_seconds_per_step"], 3), blocked(m)] for m in r["modes"]]
    lines += table(header, rows)
    lines += ["", "The pipeline's bubble: two stages of the same model (stage 0: the embedding "
              "and the first half of the layers; stage 1: the rest, the norm, the output layer "
              "and the loss), one batch of 8 x " f"{c['seq']} in m micro-batches. A stage's "
              "idle fraction is 1 - (its forward and backward seconds, from clock readings "
              "around each micro-batch's work) / (the step's seconds), summed over the steps; "
              "ideal: (p-1)/(m+p-1), equal stages and free communication; at these stages' times: "
              "stage 0 / stage 1 idle if the step took m+p-1 slots of the slower stage's "
              "micro-batch time and communication were free.", ""]
    header = ["schedule", "m", "ideal", "stage 0 idle", "stage 1 idle",
              "ideal at these stages' times", "stage 0 busy s", "stage 1 busy s", "step s",
              "stage 0 activations MiB", "in flight"]

    def uneven(b):  # each stage's idle fraction if the step took (m+p-1) of the slowest slots
        busy = [s["compute_seconds_per_step"] for s in b["per_stage"]]
        m, p = b["micro_batches"], b["stages"]
        step = (m + p - 1) * max(busy) / m
        return " / ".join(num(1 - c / step, 3) for c in busy)
    rows = [[b["schedule"], b["micro_batches"], num(b["ideal_bubble"], 3),
             num(b["per_stage"][0]["bubble"], 3), num(b["per_stage"][1]["bubble"], 3), uneven(b),
             num(b["per_stage"][0]["compute_seconds_per_step"], 3),
             num(b["per_stage"][1]["compute_seconds_per_step"], 3),
             num(b["per_stage"][0]["step_seconds"], 3),
             num(b["per_stage"][0]["peak_activation_bytes"] / mib, 2),
             b["per_stage"][0]["max_in_flight"]] for b in r["pipeline"]]
    return lines + table(header, rows)


def render_zero(r):
    c, mib = r["config"], 1 << 20
    lines = [
        f"The same LLaMA (Ψ = {num(one_process(r)['parameters'] / 1e6, 2)}M), global batch "
        f"{c['batch']} x {c['seq']}, AdamW, mean of {c['steps']} steps; one process against {c['ranks']} forked "
        "ranks, every process at 1 thread. Model state after a step (weights, gradients, AdamW's "
        "moments) against ZeRO's formulas (one process and DDP 16Ψ, ZeRO-1 8Ψ + 8Ψ/N, ZeRO-2 "
        "4Ψ + 12Ψ/N, ZeRO-3 16Ψ/N); bytes rank 0 sent per step against a ring's (2 x 4Ψ(N-1)/N, "
        f"ZeRO-3 3 x). Load average {num(r['load_average_start'], 2)} at the start, "
        f"{num(r['load_average_end'], 2)} at the end.", ""]
    header = ["mode", "ranks", "step s", "model state MiB", "formula MiB", "vs one process",
              "peak live MiB", "sent MiB/step", "ring formula MiB",
              "blocked s/step (share)"]

    def blocked(m):  # time rank 0 waited in the collectives (bench/zero)
        if "blocked_seconds_per_step" not in m:
            return ""
        return (f"{num(m['blocked_seconds_per_step'], 3)} "
                f"({num(100 * m['blocked_share_of_step'], 0)}%)")
    rows = [[m["mode"], m["ranks"], num(m["step_seconds"], 3),
             num(m["model_state_bytes"] / mib), num(m["model_state_formula"] / mib),
             num(m["model_state_vs_one_process"], 3), num(m["peak_live_bytes"] / mib),
             num(m["sent_bytes_per_step"] / mib, 2), num(m["sent_formula"] / mib, 2),
             blocked(m)] for m in r["modes"]]
    return lines + table(header, rows)


def render_zero_memory(r):
    mib = 1 << 20
    lines = [
        f"Full fine-tuning with AdamW of a LLaMA of Ψ = {num(r['parameters'] / 1e6, 1)}M "
        f"parameters, {r['steps']} steps, {r['seq']} tokens per rank: one process against "
        f"{r['ranks']} forked ranks, every process at 1 thread. Peak RSS is each process's VmHWM "
        "(reset when it starts; the largest over the ranks); the allocator's live peak is its "
        "tensors' bytes at their most; growth is the peak RSS less the RSS the process started "
        "with (the libraries and the forking parent's pages). The formulas: "
        "one process 16Ψ, ZeRO-1 8Ψ + 8Ψ/N, ZeRO-2 4Ψ + 12Ψ/N, ZeRO-3 16Ψ/N. ZeRO-3 built "
        "whole then sharded holds the whole model (4Ψ) while it builds; built shape-only "
        "(distributed::hollow_llama, each rank drawing only its rows) it never does.", ""]
    header = ["mode", "processes", "model state MiB", "formula MiB", "allocator live peak MiB",
              "peak RSS MiB", "growth MiB", "growth / formula", "step s"]
    rows = [[m["mode"], m["processes"], num(m["model_state_bytes"] / mib),
             num(m["formula_bytes"] / mib), num(m["allocator_peak_live_bytes"] / mib),
             num(m["peak_rss_bytes"] / mib), num(m["peak_rss_growth_bytes"] / mib),
             num(m["peak_rss_growth_bytes"] / m["formula_bytes"], 2), num(m["step_seconds"], 2)]
            for m in r["modes"]]
    return lines + table(header, rows)


def render_qlora_memory(r):
    sh = r["shape"]
    lines = [
        f"`zenith finetune` at the 110M shape (dim {sh['hidden_size']}, {sh['num_hidden_layers']} "
        f"layers, MLP {sh['intermediate_size']}, vocabulary {r['vocab_size']}, random weights), "
        f"LoRA r {r['lora']['r']} on all linear layers, {r['steps']} steps at {r['threads']} "
        "threads on examples/llm/finetune/train.jsonl: peak RSS (/usr/bin/time's maximum "
        "resident set) and wall time of the whole run, load and build included. QLoRA keeps the "
        "frozen weights 4-bit; its ratios to LoRA's peak are below the table (targets: "
        f"{r['targets']['of_lora_f32']} of LoRA on a float32 base, {r['targets']['of_lora_bf16']} "
        "of LoRA on a bfloat16 base).", ""]
    recipes = list(dict.fromkeys(x["recipe"] for x in r["results"]))
    runs = list(dict.fromkeys(x["run"] for x in r["results"]))
    cell = {(x["recipe"], x["run"]): x for x in r["results"]}
    header = ["run"] + [f"{rc}: MiB (s)" for rc in recipes]
    rows = [[run] + [f"{num(cell[rc, run]['peak_rss_mib'])} ({num(cell[rc, run]['wall_s'])})"
                     for rc in recipes] for run in runs]
    ratios = {(x["recipe"], x["run"]): x for x in r["ratios"]}
    qruns = list(dict.fromkeys(x["run"] for x in r["ratios"]))
    rows += [[f"{run} / LoRA f32, / LoRA bf16"] +
             [f"{num(ratios[rc, run]['of_lora_f32'], 3)}, {num(ratios[rc, run]['of_lora_bf16'], 3)}"
              for rc in recipes] for run in qruns]
    return lines + table(header, rows)


RENDERERS = {
    "qlora_memory": render_qlora_memory,
    "zero_memory": render_zero_memory,
    "finetune": render_finetune,
    "llm_quant": render_llm_quant,
    "omp_wait_policy": render_omp_wait_policy,
    "llm_ops": render_llm_ops,
    "graph_vs_eager": render_graph_vs_eager,
    "conv_ops": render_conv_ops,
    "lm_head": render_lm_head,
    "serving": render_serving,
    "model_parallel": render_model_parallel,
    "zero": render_zero,
}


def render(perf_dir):
    with open(os.path.join(perf_dir, "runs.json")) as f:
        runs = json.load(f)
    out = [
        "# Performance",
        "",
        "<!-- Written by scripts/perf_report.py from docs/perf/*.json; do not edit by hand. -->",
        "",
        "Every table below is rendered from a bench's `--json` output committed in "
        "[docs/perf/](perf/), with the command that wrote it; `scripts/perf_report.py` "
        "rewrites this page from those files and ctest's `rules.perf_page` fails when the page "
        "and the files disagree. Each table names the host's ISA and the sgemm peak the bench "
        "measured beside it: compare figures only between tables from the same host and phase.",
        "",
    ]
    out += [runs["note"], ""] if runs.get("note") else []
    for run in runs["runs"]:
        bench = run["bench"]
        if bench not in RENDERERS:
            sys.exit(f"perf_report: runs.json names bench '{bench}', which has no renderer "
                     f"(known: {', '.join(sorted(RENDERERS))})")
        path = os.path.join(perf_dir, run["file"])
        with open(path) as f:
            result = json.load(f)
        for key in ("isa", "sgemm_peak_gflops", "threads"):
            if key not in result:
                sys.exit(f"perf_report: {path} has no '{key}' (every bench's --json starts with "
                         "the machine fields of bench_machine.h)")
        out += [f"## {run['title']}", "",
                f"`{run['command']}` ({run['date']}, {run['host']}; [JSON](perf/{run['file']}))",
                "", machine_line(result), ""]
        out += RENDERERS[bench](result)
        out += [""] + ([run["note"], ""] if run.get("note") else [])
    return "\n".join(out).rstrip("\n") + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="compare docs/performance.md with a fresh render instead of writing it")
    ap.add_argument("--perf-dir", default=PERF)
    ap.add_argument("--page", default=PAGE)
    args = ap.parse_args()
    page = render(args.perf_dir)
    if not args.check:
        tmp = args.page + ".tmp"
        with open(tmp, "w") as f:
            f.write(page)
        os.replace(tmp, args.page)  # atomic: a reader sees the old page or the new one
        return
    try:
        with open(args.page) as f:
            have = f.read()
    except FileNotFoundError:
        sys.exit(f"perf_report: {args.page} is missing; run scripts/perf_report.py")
    if have != page:
        sys.stdout.writelines(difflib.unified_diff(
            have.splitlines(True), page.splitlines(True), args.page, "rendered from docs/perf"))
        sys.exit(f"perf_report: {args.page} differs from what docs/perf/*.json renders; "
                 "run scripts/perf_report.py and commit the page with its JSON")
    print(f"{args.page} matches docs/perf/*.json")


if __name__ == "__main__":
    main()
