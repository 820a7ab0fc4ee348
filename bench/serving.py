#!/usr/bin/env python3
"""LLM serving beside llama.cpp (issue 38, "Speed"): zenith's decode and `serve` against
llama.cpp (node-llama-cpp 3.21.1's prebuilt CPU library, bench/serving_llamacpp.mjs) on the same
random LLaMA weights (bench/llm_quant --write-model: the 15M and 110M shapes, vocab 2048 and the
fortunes tokenizer) exported to GGUF with `zenith export`, greedy decoding, float32 KV caches.

  decode    batch 1, NEW greedy tokens after a 16-token prompt, timed from the first generated
            token to the last on both sides: bench/llm_quant --model and llama.cpp on the same GGUF
            files (`zenith export --dtype` f32, f16, bf16), per shape, dtype and threads
  streams   STREAMS requests at once (each its own prompt) to `zenith serve`'s OpenAI endpoint
            against llama.cpp with STREAMS sequences in one context: output tokens / wall time
            from the first request to the last token; beside zenith's own batch-1 rate (one
            request to the same server, its output tokens / its end-to-end time)
  poisson   vLLM's benchmark_serving definitions at three Poisson request rates (a quarter, half
            and all of the streams' measured capacity in requests/s): TTFT, TPOT = (e2e - TTFT)
            / (output tokens - 1), ITL (gaps between streamed chunks, a chunk a token), e2e latency (mean, p50,
            p99) and output tokens/s, each request a 32-token random prompt
  prefix    TTFT of a request whose 512-token system prompt is in the prefix cache against the
            same request uncached (a fresh system prompt each run, then the same one with
            another question): the issue asks for the cached one at least 3x lower; the ratio
            uncached / cached is printed (shorter on a model whose context is under 600)
  longprompt  the inter-token latency of a running stream while a prompt of 8x the engine's
            token budget (--max-batched-tokens) arrives: the largest gap from its arrival to its
            first token over the stream's median gap (the issue asks for at most 3), at the
            default budget 64 and at 16; and the long prompt's own TTFT (the price: while
            streams decode, the engine prefills only what keeps a step within --max-step-cost
            decode steps). Beside the client's gaps, the engine's: the times it sampled the
            stream's tokens (ZENITH_ENGINE_TRACE), and the step behind its largest gap, which
            tells a slow step from delivery (the HTTP thread, this client) and host noise (a
            client gap also spans two steps where text was held back: a character split over
            tokens)
  memory    `zenith serve`'s resident memory at rest (after start, and after the traffic) beside
            its weights (model.safetensors) and KV pool (--kv-cache-memory)

  bench/serving.py [--zenith build/release/zenith] [--shapes 15m,110m] [--dtypes f32,f16,bf16]
                   [--threads 1,2] [--new 64] [--runs 3] [--streams 8] [--requests 16]
                   [--kv-cache-memory 128Mi] [--model-dir DIR] [--json]
                   [--latency-only] [--max-step-cost X]

--llamacpp-latency adds llama.cpp's side of those two (bench/serving_llamacpp.mjs --latency: a
reused context sequence for the cached system prompt, its batch size as the budget).
--latency-only runs only the prefix and longprompt sections; --max-step-cost X passes that to
their servers (0: the engine's behaviour before the cap, for a before/after).
--model-dir DIR times that model directory (with a tokenizer) instead of the random shapes (the
ctest smoke test uses examples/llm/fortunes-llama). The machine fields (ISA, sgemm peak, read
bandwidth) are bench/llm_quant's. Client, servers and llama.cpp share the host's cores. In the
longprompt section the client's threads only read their sockets and stamp each read (parsing
comes after the stream), with a 0.1 ms GIL switch interval, so its own jitter stays out of the
gaps (a run whose reads mostly carried several events, a model too fast to tell its tokens
apart, is left out and another taken).
"""
import argparse
import json
import os
import random
import socket
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import http.client

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROMPT = [1] + [3 + (i * 97) % 2000 for i in range(1, 16)]  # bench/llm_quant's prompt length
LLAMACPP = "llama.cpp (node-llama-cpp 3.21.1)"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def load_average():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def run(cmd, **kw):
    out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return out.stdout


def percentiles(values):
    v = sorted(values)
    if not v:
        return {"mean": 0, "p50": 0, "p99": 0}

    def pct(p):  # linear interpolation, as numpy.percentile (vLLM's)
        k = (len(v) - 1) * p / 100
        lo = int(k)
        hi = min(lo + 1, len(v) - 1)
        return v[lo] + (v[hi] - v[lo]) * (k - lo)
    return {"mean": statistics.fmean(v), "p50": pct(50), "p99": pct(99)}


class Server:
    """`zenith serve DIR` in the foreground on a free loopback port, plain HTTP."""

    def __init__(self, zenith, model, threads, kv, work, extra=(), trace=False):
        self.work = tempfile.mkdtemp(dir=work)
        port_file = os.path.join(self.work, "port")
        # The engine trace (ZENITH_ENGINE_TRACE): each step's times and sampled tokens.
        self.trace = os.path.join(self.work, "engine-trace.jsonl") if trace else None
        env = dict(os.environ, **({"ZENITH_ENGINE_TRACE": self.trace} if trace else {}))
        self.log = open(os.path.join(self.work, "serve.log"), "w+")
        self.proc = subprocess.Popen(
            [zenith, "serve", model, "--name", "m", "--port", "0", "--port-file", port_file,
             "--data", os.path.join(self.work, "data"), "--insecure-http", "--threads",
             str(threads), "--kv-cache-memory", kv, *extra], stdout=self.log,
            stderr=subprocess.STDOUT, env=env)
        for _ in range(600):
            if os.path.exists(port_file) and os.path.getsize(port_file) > 0:
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        self.log.seek(0)
        text = self.log.read()
        if self.proc.poll() is not None or not os.path.exists(port_file):
            raise SystemExit(f"zenith serve did not start:\n{text[-2000:]}")
        self.port = int(open(port_file).read().strip())
        self.token = next(line.split(": ", 1)[1].strip() for line in text.splitlines()
                          if line.startswith("  token (shown once): "))

    def rss_bytes(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def complete(self, prompt, max_tokens, t_send=None, chunks=None):
        """One streamed /v1/completions request; returns its timings (perf_counter seconds).
        `chunks`, when given, gets each chunk's arrival time as it comes: every chunk with
        choices, also one whose text is "" (a token whose text the server holds back), as
        vLLM's benchmark counts them."""
        body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": max_tokens,
                           "temperature": 0, "stream": True,
                           "stream_options": {"include_usage": True}})
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        start = time.perf_counter() if t_send is None else t_send
        conn.request("POST", "/v1/completions", body,
                     {"Authorization": f"Bearer {self.token}",
                      "Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise SystemExit(f"/v1/completions answered {resp.status}: {resp.read()[:500]}")
        chunks = [] if chunks is None else chunks
        tokens, cached = 0, 0
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            event = json.loads(line[6:])
            if event.get("choices"):  # a token's chunk, its text possibly "" (held back)
                chunks.append(time.perf_counter())
            if event.get("usage"):
                tokens = event["usage"]["completion_tokens"]
                cached = (event["usage"].get("prompt_tokens_details") or {}).get(
                    "cached_tokens", 0)
        conn.close()
        return {"start": start, "chunks": chunks, "tokens": tokens, "cached": cached}

    def complete_raw(self, prompt, max_tokens, t_send=None, seen=None):
        """complete() for the long-prompt section, whose gaps are the issue's figure: the calling
        thread only reads the socket and stamps each read's arrival
        (perf_counter_ns: CLOCK_MONOTONIC, the engine trace's clock); the HTTP and SSE parsing
        come after the stream ends, so parsing never delays the next read. `seen`, when given,
        is a (threading.Event, n) set once n events arrived (counted by their "data: " lines)."""
        body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": max_tokens,
                           "temperature": 0, "stream": True,
                           "stream_options": {"include_usage": True}}).encode()
        head = (f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Bearer {self.token}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=600)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = time.perf_counter() if t_send is None else t_send
        sock.sendall(head + body)
        reads, count = [], 0  # (arrival ns, bytes)
        while True:
            data = sock.recv(65536)
            if not data:
                break
            reads.append((time.perf_counter_ns(), data))
            if seen is not None:
                count += data.count(b"data: ")
                if count >= seen[1]:
                    seen[0].set()
        sock.close()
        if seen is not None:
            seen[0].set()
        return parse_stream(reads, start)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def parse_stream(reads, start):
    """An SSE response read as `reads` (arrival ns, bytes): each chunk's arrival (the read that
    completed its event; every chunk with choices, as complete()), completion and cached
    tokens."""
    raw = b"".join(data for _, data in reads)
    ends, at = [], 0
    for _, data in reads:
        at += len(data)
        ends.append(at)
    header_end = raw.find(b"\r\n\r\n")
    status = raw[:raw.find(b"\r\n")].decode(errors="replace")
    if " 200 " not in status + " ":
        raise SystemExit(f"/v1/completions answered {status}: {raw[header_end + 4:][:500]}")
    chunked = b"transfer-encoding: chunked" in raw[:header_end].lower()
    pos, pending, events = header_end + 4, b"", []  # events: (raw offset of their end, bytes)
    while pos < len(raw):
        if chunked:
            eol = raw.find(b"\r\n", pos)
            size = int(raw[pos:eol].split(b";")[0], 16) if eol > pos else 0
            if size == 0:
                break
            pending += raw[eol + 2:eol + 2 + size]
            pos = eol + 2 + size + 2
        else:  # a read at a time
            end = next(e for e in ends if e > pos)
            pending, pos = pending + raw[pos:end], end
        while b"\n\n" in pending:
            event, pending = pending.split(b"\n\n", 1)
            events.append((min(pos, len(raw)) - 1, event))
    chunks, tokens, cached, read = [], 0, 0, 0
    for end, event in events:
        for line in event.split(b"\n"):
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            e = json.loads(line[6:])
            if e.get("choices"):
                while ends[read] <= end:
                    read += 1
                chunks.append(reads[read][0] / 1e9)
            if e.get("usage"):
                tokens = e["usage"]["completion_tokens"]
                cached = (e["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    return {"start": start, "chunks": chunks, "tokens": tokens, "cached": cached}


def concurrent(server, prompts, max_tokens):
    results = [None] * len(prompts)

    def one(i):
        results[i] = server.complete(prompts[i], max_tokens)
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    end = max(r["chunks"][-1] for r in results)
    return sum(r["tokens"] for r in results) / (end - t0)


def poisson(server, rate, requests, max_tokens, seed):
    rng = random.Random(seed)
    vocab = server.vocab
    prompts = [[1] + [rng.randrange(3, vocab) for _ in range(31)] for _ in range(requests)]
    gaps = [rng.expovariate(rate) for _ in range(requests)]
    results = [None] * requests

    def one(i, at):
        delay = at - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        results[i] = server.complete(prompts[i], max_tokens, t_send=at)
    t0 = time.perf_counter()
    at, threads = t0, []
    for i in range(requests):
        at += gaps[i]
        threads.append(threading.Thread(target=one, args=(i, at)))
        threads[-1].start()
    for t in threads:
        t.join()
    duration = max(r["chunks"][-1] for r in results) - t0
    ttft = [(r["chunks"][0] - r["start"]) * 1e3 for r in results]
    e2e = [(r["chunks"][-1] - r["start"]) * 1e3 for r in results]
    tpot = [(e - t) / (r["tokens"] - 1) for r, e, t in zip(results, e2e, ttft) if r["tokens"] > 1]
    itl = [(b - a) * 1e3 for r in results for a, b in zip(r["chunks"], r["chunks"][1:])]
    tokens = sum(r["tokens"] for r in results)
    return {"rate": rate, "requests": requests, "duration_s": duration,
            "output_tokens": tokens, "output_tokens_s": tokens / duration,
            "request_s": requests / duration, "ttft_ms": percentiles(ttft),
            "tpot_ms": percentiles(tpot), "itl_ms": percentiles(itl),
            "e2e_ms": percentiles(e2e)}


def prefix_cache(server, vocab, context, runs):
    """TTFT with a system prompt seen before (in the prefix cache) against one not seen: each run
    a fresh system prompt (512 tokens, whole 16-token blocks) with one question, then the same
    system prompt with another question."""
    length = min(512, (context - 48) // 16 * 16)
    rng = random.Random(5)
    uncached, cached, hits = [], [], []
    for _ in range(max(3, runs)):
        system = [1] + [rng.randrange(3, vocab) for _ in range(length - 1)]
        first = server.complete(system + [rng.randrange(3, vocab) for _ in range(16)], 4)
        again = server.complete(system + [rng.randrange(3, vocab) for _ in range(16)], 4)
        if not first["chunks"] or not again["chunks"]:
            continue
        uncached.append((first["chunks"][0] - first["start"]) * 1e3)
        cached.append((again["chunks"][0] - again["start"]) * 1e3)
        hits.append(again["cached"])
    u, c = statistics.median(uncached), statistics.median(cached)
    return {"system_prompt_tokens": length, "runs": len(cached), "uncached_ttft_ms": u,
            "cached_ttft_ms": c, "cached_tokens": min(hits), "uncached_over_cached": u / c}


def read_trace(path, sent, wanted):
    """The engine trace's (ZENITH_ENGINE_TRACE) steps, once it holds, for each (prompt tokens,
    tokens) in `wanted`, that many tokens sampled since `sent` for requests of that prompt
    length (the engine appends when idle, just after its last event: a moment after the client
    read it)."""
    steps = []
    for _ in range(200):
        if os.path.exists(path):
            with open(path) as f:
                steps = [json.loads(line) for line in f if line.strip()]
        sampled = [t[1] for st in steps if st["end_us"] * 1e-6 >= sent for t in st["tokens"]]
        if all(sampled.count(length) >= n for length, n in wanted):
            return steps
        time.sleep(0.01)
    return steps


def ratio_during(gaps, arrive, first):
    """gaps: (end, ms). The median gap, and the largest that ends between `arrive` and the
    first gap ending after `first` (inclusive)."""
    median = statistics.median(g for _, g in gaps)
    until = next((i for i, (t, _) in enumerate(gaps) if t > first), len(gaps))
    during = [g for t, g in gaps[:until + 1] if t >= arrive]
    return median, (max(during) if during else None)


def long_prompt(server, vocab, context, budget, runs):
    """A stream's inter-token gaps while a prompt of 8x the token budget arrives: the largest
    gap that ends between its arrival and its first token (+ one gap), over the stream's median
    gap. Each run a new stream of up to 96 tokens, the long prompt sent after its 12th token.
    The client's gaps (arrival of each chunk, as vLLM's benchmark times ITL) and, beside them,
    the engine's (each token's sampling time in the engine trace, when the server writes one),
    with the step behind the engine's largest gap: its time and prefill tokens."""
    long_len = min(8 * budget, context - 16)
    new = min(96, context - 17)
    rng = random.Random(9)
    ratios, medians, worst, ttft, engine = [], [], [], [], []
    for _ in range(3 * max(3, runs)):  # a run is left out where its gaps are not measurable
        if len(ratios) == max(3, runs):
            break
        result = {}
        short = [1] + [rng.randrange(3, vocab) for _ in range(15)]
        twelve = threading.Event()
        stream = threading.Thread(
            target=lambda: result.update(server.complete_raw(short, new, seen=(twelve, 12))))
        stream.start()
        twelve.wait()
        arrive = time.perf_counter()
        r = server.complete_raw([1] + [rng.randrange(3, vocab) for _ in range(long_len - 1)], 2)
        stream.join()
        if server.trace:
            steps = read_trace(server.trace, result["start"],
                               [(len(short), result["tokens"]), (long_len, r["tokens"])])
            engine.append(engine_gaps(steps, result["start"], arrive, len(short), long_len))
        chunks = result["chunks"]
        gaps = [(b, (b - a) * 1e3) for a, b in zip(chunks, chunks[1:])]
        if not r["chunks"] or len(gaps) < 4:
            continue
        median, largest = ratio_during(gaps, arrive, r["chunks"][0])
        if largest is None or median == 0:  # median 0: most reads carried several events
            continue
        medians.append(median)
        worst.append(largest)
        ttft.append((r["chunks"][0] - r["start"]) * 1e3)
        ratios.append(largest / median)
    row = {"budget": budget, "prompt_tokens": long_len, "stream_tokens": new,
           "runs": len(ratios), "median_itl_ms": statistics.median(medians),
           "max_itl_during_ms": statistics.median(worst),
           "max_over_median": statistics.median(ratios), "worst_max_over_median": max(ratios),
           "long_prompt_ttft_ms": statistics.median(ttft)}
    engine = [e for e in engine if e]
    if engine:
        row["engine"] = {
            "median_itl_ms": statistics.median(e["median_ms"] for e in engine),
            "max_itl_during_ms": statistics.median(e["largest_ms"] for e in engine),
            "max_over_median": statistics.median(e["ratio"] for e in engine),
            "worst_max_over_median": max(e["ratio"] for e in engine),
            "worst_step_ms": statistics.median(e["step_ms"] for e in engine),
            "worst_step_prefill": max(e["step_prefill"] for e in engine),
            "median_decode_step_ms": statistics.median(e["decode_step_ms"] for e in engine)}
    return row


def engine_gaps(steps, sent, arrive, short_len, long_len):
    """The stream's gaps as the engine sampled its tokens (trace times, the client's clock)."""
    us = 1e-6
    mine = [st for st in steps if st["end_us"] * us >= sent]
    seq = next((t[0] for st in mine for t in st["tokens"] if t[1] == short_len), None)
    long_first = next((t[2] * us for st in mine for t in st["tokens"] if t[1] == long_len), None)
    if seq is None or long_first is None:
        return None
    times = [(t[2] * us, st) for st in mine for t in st["tokens"] if t[0] == seq]
    gaps = [(b, (b - a) * 1e3) for (a, _), (b, _) in zip(times, times[1:])]
    if len(gaps) < 4:
        return None
    median, largest = ratio_during(gaps, arrive, long_first)
    if largest is None or median == 0:
        return None
    at = next(i for i, (_, g) in enumerate(gaps) if g == largest and gaps[i][0] >= arrive)
    step = times[at + 1][1]
    decode = [(st["end_us"] - st["start_us"]) * 1e-3 for st in mine if st["prefill"] == 0]
    return {"median_ms": median, "largest_ms": largest, "ratio": largest / median,
            "step_ms": (step["end_us"] - step["start_us"]) * 1e-3, "step_prefill": step["prefill"],
            "decode_step_ms": statistics.median(decode) if decode else 0}


def llamacpp(gguf, threads, new, runs, streams):
    out = run(["node", os.path.join(HERE, "serving_llamacpp.mjs"), gguf, "--threads",
               str(threads), "--new", str(new), "--runs", str(runs), "--streams", str(streams),
               "--prompt", ",".join(map(str, PROMPT))])
    return json.loads(out.strip().splitlines()[-1])


def zenith_decode(build, ggufs, threads, new, runs):
    """bench/llm_quant --model on the GGUF files: a 16-token prompt, then NEW greedy tokens timed
    from the first to the last, as llama.cpp's side. Returns its JSON (machine fields too)."""
    return json.loads(run([os.path.join(build, "bench", "llm_quant"), "--model", ",".join(ggufs),
                           "--threads", ",".join(map(str, threads)), "--gen-tokens", str(new),
                           "--runs", str(runs), "--json"]))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--zenith", default=os.path.join(ROOT, "build", "release", "zenith"))
    p.add_argument("--shapes", default="15m,110m")
    p.add_argument("--dtypes", default="f32,f16,bf16")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--new", type=int, default=64)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--streams", type=int, default=8)
    p.add_argument("--requests", type=int, default=16, help="requests per Poisson rate")
    p.add_argument("--kv-cache-memory", default="128Mi")
    p.add_argument("--model-dir", help="time this model directory instead of the shapes")
    p.add_argument("--json", action="store_true")
    p.add_argument("--latency-only", action="store_true",
                   help="only the prefix and longprompt sections (no llama.cpp)")
    p.add_argument("--max-step-cost", help="zenith serve --max-step-cost for those sections "
                   "(default: the server's)")
    p.add_argument("--llamacpp-latency", action="store_true",
                   help="llama.cpp's side of the prefix and longprompt sections too")
    a = p.parse_args()
    # The client's threads block in recv(); a short switch interval lets the one a read wakes
    # take the GIL at once rather than after up to 5 ms (CPython's default) of another's work.
    sys.setswitchinterval(1e-4)
    zenith = os.path.abspath(a.zenith)
    build = os.path.dirname(zenith)
    threads = [int(t) for t in a.threads.split(",")]
    dtypes = a.dtypes.split(",")
    work = tempfile.mkdtemp(prefix="zenith-serving-")
    try:
        out = {}
        out.update({"load_average_start": load_average(), "engine": LLAMACPP, "new_tokens": a.new,
                    "prompt": PROMPT, "runs": a.runs, "streams": a.streams,
                    "kv_cache_memory": a.kv_cache_memory, "decode": [], "concurrent": [],
                    "poisson": [], "prefix_cache": [], "long_prompt": [], "memory": []})
        models = {}
        if a.model_dir:
            models[os.path.basename(os.path.normpath(a.model_dir))] = os.path.abspath(a.model_dir)
        else:
            for shape in a.shapes.split(","):
                d = os.path.join(work, shape)
                run([os.path.join(build, "bench", "llm_quant"), "--only", shape, "--vocab", "2048",
                     "--write-model", d])
                models[shape] = d
        for shape, model in models.items():
            vocab = json.load(open(os.path.join(model, "config.json")))["vocab_size"]
            if not a.latency_only:
                ggufs = {}
                for dtype in dtypes:
                    ggufs[dtype] = os.path.join(work, f"{shape}-{dtype}.gguf")
                    run([zenith, "export", "--format", "gguf", "--model", model, "--dtype", dtype,
                         "--out", ggufs[dtype]])
                log(f"decode {shape}: zenith")
                z = zenith_decode(build, list(ggufs.values()), threads, a.new, a.runs)
                for k in ("isa", "onednn_isa", "avx2_fast_paths", "sgemm_peak_gflops", "threads",
                          "read_bandwidth_gbs"):
                    out.setdefault(k, z[k])
                zenith_rows = {(r["shape"], r["threads"]): r for r in z["results"]}
                for dtype, gguf in ggufs.items():
                    for t in threads:
                        log(f"decode {shape} {dtype} {t} thread(s): llama.cpp")
                        ll = llamacpp(gguf, t, a.new, a.runs, a.streams if dtype == "f32" else 0)
                        zr = zenith_rows[(gguf, t)]
                        out["decode"].append({
                            "shape": shape, "dtype": dtype, "threads": t,
                            "zenith_tokens_s": zr["tokens_s"],
                            "zenith_best_tokens_s": zr["best_tokens_s"],
                            "llamacpp_tokens_s": ll["decode"]["tokens_s"],
                            "llamacpp_best_tokens_s": ll["decode"]["best_tokens_s"]})
                        if dtype == "f32" and a.streams > 0:
                            out["concurrent"].append({"shape": shape, "threads": t,
                                                      "llamacpp_tokens_s": ll["streams"]["tokens_s"]})
                # The server: f32 weights as saved, at the most threads.
                t = max(threads)
                server = Server(zenith, model, t, a.kv_cache_memory, work)
                server.vocab = vocab
                try:
                    time.sleep(1)
                    rss_start = server.rss_bytes()
                    log(f"serve {shape}: batch 1 and {a.streams} streams")
                    server.complete(PROMPT, 8)  # warm-up
                    solo = []
                    for _ in range(a.runs):
                        r = server.complete(PROMPT, a.new)
                        solo.append(r["tokens"] / (r["chunks"][-1] - r["start"]))
                    many = [concurrent(server, [[PROMPT[0]] + [x + i for x in PROMPT[1:]]
                                                for i in range(a.streams)], a.new)
                            for _ in range(a.runs)]
                    row = next((c for c in out["concurrent"]
                                if c["shape"] == shape and c["threads"] == t), None)
                    if row is None:
                        row = {"shape": shape, "threads": t}
                        out["concurrent"].append(row)
                    row.update({"streams": a.streams, "zenith_tokens_s": statistics.median(many),
                                "zenith_batch1_tokens_s": statistics.median(solo)})
                    capacity = row["zenith_tokens_s"] / a.new  # requests/s the streams sustain
                    for i, frac in enumerate((0.25, 0.5, 1.0)):
                        log(f"serve {shape}: Poisson rate {capacity * frac:.2f}/s")
                        r = poisson(server, capacity * frac, a.requests, a.new, seed=i)
                        r.update({"shape": shape, "threads": t, "rate_of_capacity": frac})
                        out["poisson"].append(r)
                    time.sleep(1)
                    out["memory"].append({
                        "shape": shape, "threads": t, "rss_start_bytes": rss_start,
                        "rss_after_bytes": server.rss_bytes(),
                        "weight_bytes": os.path.getsize(os.path.join(model, "model.safetensors")),
                        "kv_cache_bytes": kv_bytes(a.kv_cache_memory)})
                finally:
                    server.stop()
            t = max(threads)  # the server's threads, as above
            context = json.load(open(os.path.join(model, "config.json")))[
                "max_position_embeddings"]
            budgets = sorted({min(64, context // 16), min(16, context // 16)}, reverse=True)
            for budget in budgets:
                extra = ["--max-batched-tokens", str(budget)]
                if a.max_step_cost is not None:
                    extra += ["--max-step-cost", a.max_step_cost]
                server = Server(zenith, model, t, a.kv_cache_memory, work, extra, trace=True)
                try:
                    server.complete(PROMPT, 8)  # warm-up
                    if budget == budgets[0]:
                        log(f"serve {shape}: TTFT with a cached system prompt")
                        row = prefix_cache(server, vocab, context, a.runs)
                        row.update({"shape": shape, "threads": t, "budget": budget})
                        out["prefix_cache"].append(row)
                    log(f"serve {shape}: a stream's ITL while a long prompt arrives, budget "
                        f"{budget}")
                    row = long_prompt(server, vocab, context, budget, a.runs)
                    row.update({"shape": shape, "threads": t})
                    out["long_prompt"].append(row)
                finally:
                    server.stop()
            if a.llamacpp_latency:
                log(f"llama.cpp {shape}: TTFT with a cached system prompt, ITL under a long "
                    "prompt")
                gguf = os.path.join(work, f"{shape}-f32.gguf")
                if not os.path.exists(gguf):
                    run([zenith, "export", "--format", "gguf", "--model", model, "--dtype",
                         "f32", "--out", gguf])
                ll = json.loads(run(
                    ["node", os.path.join(HERE, "serving_llamacpp.mjs"), gguf, "--threads",
                     str(t), "--new", "8", "--runs", str(a.runs), "--streams", "0", "--latency",
                     ",".join(map(str, budgets)), "--vocab", str(vocab)]).strip().splitlines()[-1])
                out.setdefault("llamacpp_prefix_cache", []).append(
                    dict(ll["prefix_cache"], shape=shape, threads=t))
                out.setdefault("llamacpp_long_prompt", []).extend(
                    dict(c, shape=shape, threads=t) for c in ll["long_prompt"])
        out["load_average_end"] = load_average()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if a.json:
        print(json.dumps(out, indent=2))
    else:
        print_tables(out)


def kv_bytes(text):
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
    for u, m in units.items():
        if text.endswith(u):
            return int(float(text[:-2]) * m)
    return int(text)


def print_tables(out):
    bw = ", ".join(f"{v:.1f} GB/s at {k} thread(s)"
                   for k, v in out.get("read_bandwidth_gbs", {}).items())
    print(f"ISA {out.get('isa', '?')}, sgemm peak {out.get('sgemm_peak_gflops', 0):.1f} GFLOP/s, "
          f"read bandwidth {bw}, load average {out['load_average_start']:.2f} .. "
          f"{out['load_average_end']:.2f}")
    print("decode, batch 1 (tok/s: median of runs)")
    for d in out["decode"]:
        print(f"  {d['shape']:>6} {d['dtype']:>5} {d['threads']}t  zenith "
              f"{d['zenith_tokens_s']:7.1f}  llama.cpp {d['llamacpp_tokens_s']:7.1f}  ratio "
              f"{d['zenith_tokens_s'] / d['llamacpp_tokens_s']:.2f}")
    print(f"{out['streams']} concurrent streams (aggregate output tok/s)")
    for c in out["concurrent"]:
        ll = c.get("llamacpp_tokens_s")
        if "zenith_tokens_s" not in c:
            continue
        print(f"  {c['shape']:>6} {c['threads']}t  zenith {c['zenith_tokens_s']:7.1f}  batch-1 "
              f"{c['zenith_batch1_tokens_s']:7.1f}  llama.cpp {ll or 0:7.1f}")
    print("Poisson arrivals (ms: p50 / p99)")
    for r in out["poisson"]:
        print(f"  {r['shape']:>6} {r['rate']:6.2f} req/s  out {r['output_tokens_s']:7.1f} tok/s"
              + "".join(f"  {k[:-3]} {r[k]['p50']:.1f}/{r[k]['p99']:.1f}"
                        for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")))
    print("prefix cache: TTFT (ms, median) of a request whose system prompt is cached")
    for c in out["prefix_cache"]:
        print(f"  {c['shape']:>6} {c['threads']}t  {c['system_prompt_tokens']}-token system "
              f"prompt: uncached {c['uncached_ttft_ms']:.1f}  cached {c['cached_ttft_ms']:.1f} "
              f"({c['cached_tokens']} cached tokens)  ratio {c['uncached_over_cached']:.2f}")
    print("a stream's ITL while a prompt of 8x the token budget arrives (ms)")
    for c in out["long_prompt"]:
        print(f"  {c['shape']:>6} {c['threads']}t  budget {c['budget']}: {c['prompt_tokens']}-"
              f"token prompt; median ITL {c['median_itl_ms']:.1f}, largest during "
              f"{c['max_itl_during_ms']:.1f}  ratio {c['max_over_median']:.2f} (worst "
              f"{c['worst_max_over_median']:.2f}); its TTFT "
              f"{c.get('long_prompt_ttft_ms', 0):.0f}")
        if c.get("engine"):
            e = c["engine"]
            print(f"  {'':>6}     engine-side (sampling times): median ITL "
                  f"{e['median_itl_ms']:.2f}, largest during {e['max_itl_during_ms']:.2f}  ratio "
                  f"{e['max_over_median']:.2f} (worst {e['worst_max_over_median']:.2f}); the step "
                  f"ending it {e['worst_step_ms']:.2f} ms (at most {e['worst_step_prefill']} "
                  f"prefill tokens), a decode step {e['median_decode_step_ms']:.2f}")
    for c in out.get("llamacpp_prefix_cache", []):
        print(f"  llama.cpp {c['shape']:>6} {c['threads']}t  prefix: {c['system_prompt_tokens']}-"
              f"token system prompt: uncached {c['uncached_ttft_ms']:.1f}  cached "
              f"{c['cached_ttft_ms']:.1f}  ratio {c['uncached_over_cached']:.2f}")
    for c in out.get("llamacpp_long_prompt", []):
        print(f"  llama.cpp {c['shape']:>6} {c['threads']}t  batch size {c['budget']}: "
              f"{c['prompt_tokens']}-token prompt; median ITL {c['median_itl_ms']:.1f}, largest "
              f"during {c['max_itl_during_ms']:.1f}  ratio {c['max_over_median']:.2f}; its TTFT "
              f"{c['long_prompt_ttft_ms']:.0f}")
    for m in out["memory"]:
        print(f"  RSS {m['shape']}: {m['rss_start_bytes'] / 2**20:.0f} MiB at start, "
              f"{m['rss_after_bytes'] / 2**20:.0f} after; weights {m['weight_bytes'] / 2**20:.0f}"
              f" + KV pool {m['kv_cache_bytes'] / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
