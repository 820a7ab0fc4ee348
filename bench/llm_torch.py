#!/usr/bin/python3
"""PyTorch side of the LLM benchmark (issues 14 and 15): eager PyTorch on the reference LLaMA
of scripts/llama_reference.py, float32.

    /usr/bin/python3 bench/llm_torch.py --config 15m --mode train --threads 2 --json
    /usr/bin/python3 bench/llm_torch.py --config 15m --mode train --seq 64 --batch 1 --json
    /usr/bin/python3 bench/llm_torch.py --config 110m --mode generate --gen-tokens 32 --json
    /usr/bin/python3 bench/llm_torch.py --config 15m --mode train --lora-targets q_proj,v_proj

Configs: 15m = stories15M's shape (dim 288, 6 layers, 6 heads, hidden 768, vocab 32000) with an
untied head; 110m = stories110M's (dim 768, 12 layers, 12 heads, hidden 2048, vocab 32000).
  train     random token batches [batch, seq] (labels = inputs, HF's shifted loss); one step
            = zero_grad, forward, cross entropy, backward, AdamW(lr 3e-4, weight decay 0.1).
            tokens/s = batch * seq / median step time. With --lora-targets the base is frozen
            and only adapters (r, alpha) train, as a hand-written PEFT LoRA.
  generate  batch 1: a random prompt of --prompt-len tokens through the model once (prefill,
            timed apart), then --gen-tokens greedy steps of one token each with a KV cache;
            tokens/s = gen_tokens / decode time.
Prints one JSON object (--json) or a line of text. Besides the rates: params,
non_embedding_params (all but model.embed_tokens and the adapters: the weights a decode step reads, x4 bytes
in weight_bytes_per_token), flops_per_token (train: 6 x non-embedding params + attention
12 x layers x seq x heads x head_dim, no causal discount; LoRA: 4 x non-embedding params +
6 x adapter params + the same attention term), vmhwm_kb (this process's peak RSS: run one
measurement per process).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "scripts"))
from llama_reference import (Config, KVCache, LlamaForCausalLM, add_lora,  # noqa: E402
                             causal_lm_loss, lora_modules)
from vs_pytorch import vmhwm_kb  # noqa: E402

SHAPES = {
    "15m": dict(hidden_size=288, num_hidden_layers=6, num_attention_heads=6,
                intermediate_size=768, max_position_embeddings=256),
    "110m": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=2048, max_position_embeddings=1024),
}


def build(name):
    shape = SHAPES[name]
    cfg = {"architectures": ["LlamaForCausalLM"], "vocab_size": 32000, "rms_norm_eps": 1e-5,
           "rope_theta": 10000.0, "tie_word_embeddings": False,
           "num_key_value_heads": shape["num_attention_heads"], **shape}
    model = LlamaForCausalLM(Config(cfg))
    with torch.no_grad():  # HF's initializer_range; the rates do not depend on the values
        for n, p in model.named_parameters():
            if "norm" not in n:
                p.normal_(0.0, 0.02)
    return model


def counts(model, seq, lora):
    cfg = model.config
    params = sum(p.numel() for p in model.parameters())
    adapter = sum(p.numel() for p in model.parameters() if p.requires_grad) if lora else 0
    non_embedding = params - model.model.embed_tokens.weight.numel() - adapter
    attention = 12 * cfg.num_hidden_layers * seq * cfg.num_attention_heads * cfg.head_dim
    flops = (4 * non_embedding + 6 * adapter if lora else 6 * non_embedding) + attention
    return {"params": params, "non_embedding_params": non_embedding,
            "trainable_params": sum(p.numel() for p in model.parameters() if p.requires_grad),
            "flops_per_token": flops, "weight_bytes_per_token": 4 * non_embedding}


def timed(fn, warmup, steps):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def bench_train(model, args):
    if args.lora_targets:
        for p in model.parameters():
            p.requires_grad_(False)
        add_lora(model, args.lora_targets.split(","), args.lora_r, args.lora_alpha)
        for _, m in lora_modules(model):  # PEFT's init: A kaiming-uniform, B zero
            torch.nn.init.kaiming_uniform_(m.lora_A.weight, a=5 ** 0.5)
            torch.nn.init.zeros_(m.lora_B.weight)
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-4,
                            weight_decay=0.1)
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, model.config.vocab_size, (args.batch, args.seq), generator=g)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = causal_lm_loss(model(x), x)
        loss.backward()
        opt.step()

    times = timed(step, args.warmup, args.steps)
    median = statistics.median(times)
    return {"batch": args.batch, "seq": args.seq, "tokens_s": args.batch * args.seq / median,
            "median_ms": median * 1e3, "steps_ms": [t * 1e3 for t in times],
            **counts(model, args.seq, bool(args.lora_targets))}


@torch.inference_mode()
def bench_generate(model, args):
    model.eval()
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, model.config.vocab_size, (1, args.prompt_len), generator=g)
    runs = []
    for _ in range(args.warmup + args.steps):
        cache = KVCache(model.config.num_hidden_layers)
        t0 = time.perf_counter()
        token = model(prompt, cache=cache)[:, -1].argmax(-1, keepdim=True)
        t1 = time.perf_counter()
        for _ in range(args.gen_tokens):
            token = model(token, cache=cache)[:, -1].argmax(-1, keepdim=True)
        runs.append((t1 - t0, time.perf_counter() - t1))
    runs = runs[args.warmup:]
    decode = statistics.median(r[1] for r in runs)
    return {"batch": 1, "prompt_len": args.prompt_len, "gen_tokens": args.gen_tokens,
            "tokens_s": args.gen_tokens / decode, "decode_ms": decode * 1e3,
            "prefill_ms": statistics.median(r[0] for r in runs) * 1e3,
            "runs_decode_ms": [r[1] * 1e3 for r in runs],
            **counts(model, args.prompt_len + args.gen_tokens, False)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", choices=sorted(SHAPES), default="15m")
    ap.add_argument("--mode", choices=["train", "generate"], default="train")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10, help="timed steps (generate: timed runs)")
    ap.add_argument("--prompt-len", type=int, default=16)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--lora-targets", default="", help="e.g. q_proj,v_proj (train only)")
    ap.add_argument("--lora-r", type=int, default=8)
    ap.add_argument("--lora-alpha", type=int, default=16)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = build(args.config)
    result = bench_train(model, args) if args.mode == "train" else bench_generate(model, args)
    result = {"config": args.config, "mode": args.mode, "lora_targets": args.lora_targets,
              **result, "vmhwm_kb": vmhwm_kb(), "threads": torch.get_num_threads(),
              "torch": torch.__version__}
    if args.json:
        print(json.dumps(result))
    else:
        lora = f" lora {args.lora_targets}" if args.lora_targets else ""
        print(f"{args.config} {args.mode}{lora}: {result['tokens_s']:.1f} tokens/s, "
              f"peak RSS {result['vmhwm_kb'] / 1024:.0f} MiB, "
              f"{result['flops_per_token'] / 1e6:.1f} MFLOP/token, {result['threads']} threads")


if __name__ == "__main__":
    main()
