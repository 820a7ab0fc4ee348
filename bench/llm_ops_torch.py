#!/usr/bin/python3
"""PyTorch 1.13 eager side of bench/llm_ops.cpp: the same cases under the same names, float32,
best of --reps runs after one warm-up. PyTorch 1.13 has no F.scaled_dot_product_attention, so
attention is the manual form HF's eager LLaMA runs (q k^T * scale + causal mask, softmax, @ v).
A bfloat16 weight is used as HF keeps it on a CPU without bf16 arithmetic: converted to float32
on every call (w.float()).

    /usr/bin/python3 bench/llm_ops_torch.py --threads 2 [--reps 5] [--cases substring]

Prints one JSON line: {"version": torch version, "cases": {name: best ms}}.
"""
import argparse
import json
import math
import time

import torch
import torch.nn.functional as F

CONFIGS = [("15m", 288, 6, 768), ("110m", 768, 12, 2048)]
BATCH, SEQ, VOCAB = 8, 256, 32000
TOKENS = BATCH * SEQ


def fwd_bwd(f, inputs):
    def run():
        y = f()
        torch.autograd.grad([y], inputs, [torch.ones_like(y)])
    return run


def no_grad(f):
    def run():
        with torch.no_grad():
            f()
    return run


def attention(q, k, v, causal=True):
    t, s = q.shape[2], k.shape[2]
    scores = q @ k.transpose(2, 3) * (q.shape[3] ** -0.5)
    if causal:
        blocked = torch.ones(t, s, dtype=torch.bool).triu(s - t + 1)
        scores = scores.masked_fill(blocked, float("-inf"))
    return F.softmax(scores, dim=-1) @ v


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rms_norm(x, w, eps=1e-5):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def cases():
    out = {}
    for name, dim, heads, hidden in CONFIGS:
        d = dim // heads
        qkv = [torch.randn(BATCH, SEQ, heads, d).transpose(1, 2).requires_grad_()
               for _ in range(3)]
        out[f"{name} attention fwd+bwd"] = fwd_bwd(lambda qkv=qkv: attention(*qkv), qkv)
        out[f"{name} attention fwd"] = no_grad(lambda qkv=qkv: attention(*qkv))
        q1 = torch.randn(1, heads, 1, d)
        kc, vc = torch.randn(1, heads, SEQ, d), torch.randn(1, heads, SEQ, d)
        out[f"{name} attention decode T=1 S=256"] = no_grad(
            lambda q1=q1, kc=kc, vc=vc: attention(q1, kc, vc))
        for gname, fin, fout in (("qkvo", dim, dim), ("gate/up", dim, hidden),
                                 ("down", hidden, dim), ("lm_head", dim, VOCAB)):
            x, w = torch.randn(TOKENS, fin), torch.randn(fout, fin) * 0.02
            dy, wb = torch.randn(TOKENS, fout), w.bfloat16()
            n = f"{name} linear {gname} {TOKENS}x{fin}x{fout}"
            out[n + " f32"] = no_grad(lambda x=x, w=w: F.linear(x, w))
            out[n + " bf16 weight"] = no_grad(lambda x=x, wb=wb: F.linear(x, wb.float()))
            out[n + " dx with bf16 weight"] = no_grad(lambda dy=dy, wb=wb: dy @ wb.float())
            x1 = torch.randn(1, fin)
            out[f"{name} decode linear {gname} f32"] = no_grad(lambda x1=x1, w=w: F.linear(x1, w))
            out[f"{name} decode linear {gname} bf16 weight"] = no_grad(
                lambda x1=x1, wb=wb: F.linear(x1, wb.float()))
        xn, wn = torch.randn(TOKENS, dim, requires_grad=True), torch.randn(dim, requires_grad=True)
        out[f"{name} rms_norm fwd+bwd"] = fwd_bwd(lambda xn=xn, wn=wn: rms_norm(xn, wn), [xn, wn])
        xr = torch.randn(BATCH, SEQ, heads, d).transpose(1, 2).requires_grad_()
        inv = 1.0 / 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
        ang = torch.arange(SEQ, dtype=torch.float64)[:, None] * inv
        emb = torch.cat((ang, ang), -1)
        cos, sin = emb.cos().float()[None, None], emb.sin().float()[None, None]
        out[f"{name} rotary fwd+bwd"] = fwd_bwd(
            lambda xr=xr, cos=cos, sin=sin: xr * cos + rotate_half(xr) * sin, [xr])
        gate = torch.randn(TOKENS, hidden, requires_grad=True)
        up = torch.randn(TOKENS, hidden, requires_grad=True)
        out[f"{name} swiglu fwd+bwd"] = fwd_bwd(lambda g=gate, u=up: F.silu(g) * u, [gate, up])
    logits = torch.randn(TOKENS, VOCAB, requires_grad=True)
    target = torch.randint(0, VOCAB, (TOKENS,))
    out["cross_entropy fwd+bwd 2048x32000"] = fwd_bwd(
        lambda: F.cross_entropy(logits, target), [logits])
    return out


def best_ms(f, reps):
    f()
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cases", default="")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    results = {n: best_ms(f, args.reps) for n, f in cases().items() if args.cases in n}
    print(json.dumps({"version": torch.__version__, "cases": results}))


if __name__ == "__main__":
    main()
