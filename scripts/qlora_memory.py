#!/usr/bin/python3
"""Peak resident memory of `zenith finetune` LoRA and QLoRA runs at the 110M shape, for
docs/perf/qlora_memory.json (rendered into docs/performance.md by scripts/perf_report.py and
quoted in docs/quantization.md):

    /usr/bin/python3 scripts/qlora_memory.py [--zenith build/release/zenith] [--steps 3]

The model: dim 768, 12 layers, 12 heads, MLP 2048, vocabulary 2048 (the fortunes tokenizer),
untied head, random weights (normal, std 0.02), written once as float32 and as bfloat16
safetensors into a temporary folder. Each run fine-tunes all linear layers (r 8) on
examples/llm/finetune/train.jsonl (sequences up to 256 tokens) for --steps steps with 2 threads;
its peak RSS is /usr/bin/time's maximum resident set (Debian's time). The machine fields (ISA,
sgemm peak) come from a one-token bench/llm_quant run beside it. Needs python3-numpy.
"""
import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TOKENIZER_FROM = os.path.join(ROOT, "examples", "llm", "fortunes-llama")
DATA = os.path.join(ROOT, "examples", "llm", "finetune", "train.jsonl")
SHAPE = dict(hidden_size=768, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=12,
             num_key_value_heads=12, max_position_embeddings=256, tie_word_embeddings=False)
# (name, extra flags): the memory-lean QLoRA recipe (one sequence a micro-batch, 4 accumulated,
# activation checkpointing, as PEFT's prepare_model_for_kbit_training turns it on), batch 4 with
# checkpointing, and batch 4 keeping every activation.
RECIPES = [
    ("batch 1 x accumulate 4, checkpointing",
     ["--batch-size", "1", "--accumulate-steps", "4", "--activation-checkpointing"]),
    ("batch 4, checkpointing", ["--batch-size", "4", "--activation-checkpointing"]),
    ("batch 4, no checkpointing", ["--batch-size", "4"]),
]
RUNS = [  # (name, file dtype, method flags)
    ("LoRA, f32 base", "f32", ["--method", "lora"]),
    ("LoRA, bf16 base", "bf16", ["--method", "lora"]),
    ("QLoRA nf4, f32 file", "f32", ["--method", "qlora", "--quant", "nf4"]),
    ("QLoRA nf4, bf16 file", "bf16", ["--method", "qlora", "--quant", "nf4"]),
    ("QLoRA q4_0, f32 file", "f32", ["--method", "qlora", "--quant", "q4_0"]),
]


def write_model(folder, dtype):
    cfg = json.load(open(os.path.join(TOKENIZER_FROM, "config.json")))
    cfg.update(SHAPE)
    cfg["torch_dtype"] = "float32" if dtype == "f32" else "bfloat16"
    os.makedirs(folder)
    json.dump(cfg, open(os.path.join(folder, "config.json"), "w"))
    for f in os.listdir(TOKENIZER_FROM):
        if f not in ("config.json", "model.safetensors"):
            shutil.copy(os.path.join(TOKENIZER_FROM, f), folder)
    h, inter, v = SHAPE["hidden_size"], SHAPE["intermediate_size"], cfg["vocab_size"]
    names = [("model.embed_tokens.weight", (v, h)), ("model.norm.weight", (h,)),
             ("lm_head.weight", (v, h))]
    for i in range(SHAPE["num_hidden_layers"]):
        p = f"model.layers.{i}."
        names += [(p + "input_layernorm.weight", (h,)), (p + "post_attention_layernorm.weight", (h,))]
        names += [(p + f"self_attn.{m}.weight", (h, h)) for m in ("q_proj", "k_proj", "v_proj",
                                                                   "o_proj")]
        names += [(p + "mlp.gate_proj.weight", (inter, h)), (p + "mlp.up_proj.weight", (inter, h)),
                  (p + "mlp.down_proj.weight", (h, inter))]
    rng = np.random.default_rng(0)
    header, blobs, offset = {}, [], 0
    for name, shape in names:
        a = (np.ones(shape, np.float32) if len(shape) == 1
             else rng.standard_normal(shape, dtype=np.float32) * 0.02)
        if dtype == "bf16":  # round to nearest even
            bits = a.view(np.uint32).astype(np.uint64)
            b = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16).tobytes()
        else:
            b = a.tobytes()
        header[name] = {"dtype": "F32" if dtype == "f32" else "BF16", "shape": list(shape),
                        "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    head = json.dumps(header).encode()
    head += b" " * ((8 - len(head) % 8) % 8)
    with open(os.path.join(folder, "model.safetensors"), "wb") as f:
        f.write(len(head).to_bytes(8, "little"))
        f.write(head)
        for b in blobs:
            f.write(b)


def peak_rss_mib(cmd):
    # /usr/bin/time's %M: the maximum resident set of the process it starts. (os.wait4 from here
    # would not do: a forked child starts with this process's high-water mark.)
    for attempt in range(3):  # a binary being relinked beside the run cannot start: try again
        start = time.time()
        p = subprocess.run(["/usr/bin/time", "-f", "maxrss_kb %M", *cmd],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode != 126:
            break
        time.sleep(30)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
    kb = int(p.stderr.strip().split("\n")[-1].split()[1])
    return kb / 1024, time.time() - start


def machine_fields(zenith):
    # bench_machine.h's fields (ISA, oneDNN's ISA, sgemm peak at 2 threads) from the smallest
    # llm_quant run: one token of the 15M shape.
    bench = os.path.join(os.path.dirname(os.path.abspath(zenith)), "bench", "llm_quant")
    p = subprocess.run([bench, "--only", "15m", "--dtypes", "f32", "--threads", "2", "--vocab",
                        "2048", "--gen-tokens", "1", "--runs", "1", "--json"],
                       capture_output=True, text=True, check=True)
    out = json.loads(p.stdout)
    return {k: out[k] for k in ("isa", "onednn_isa", "avx2_fast_paths", "sgemm_peak_gflops")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--zenith", default=os.path.join(ROOT, "build", "release", "zenith"))
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "perf", "qlora_memory.json"))
    args = parser.parse_args()
    flags = open("/proc/cpuinfo").read().split("flags", 2)[1].split("\n")[0].split()
    isa = "+".join(f for f in ("avx2", "avx512f", "avx512_bf16", "avx512_vnni") if f in flags)
    load_before = os.getloadavg()[0]
    machine = machine_fields(args.zenith)
    results = []
    with tempfile.TemporaryDirectory(prefix="qlora_memory_") as tmp:
        for dtype in ("f32", "bf16"):
            write_model(os.path.join(tmp, dtype), dtype)
        for recipe, recipe_flags in RECIPES:
            for run, dtype, method in RUNS:
                out = os.path.join(tmp, "out")
                cmd = [args.zenith, "finetune", "--model", os.path.join(tmp, dtype), "--data", DATA,
                       "--out", out, "--overwrite-output-dir", "--max-steps", str(args.steps),
                       "--threads", "2", "--progress", "none", "--lora-targets", "all-linear",
                       *method, *recipe_flags]
                mib, wall = peak_rss_mib(cmd)
                print(f"{recipe:40s} {run:24s} {mib:8.1f} MiB {wall:6.1f} s", flush=True)
                results.append({"recipe": recipe, "run": run, "peak_rss_mib": round(mib, 1),
                                "wall_s": round(wall, 1)})
    ratios = []
    for recipe, _ in RECIPES:
        rss = {r["run"]: r["peak_rss_mib"] for r in results if r["recipe"] == recipe}
        for run in ("QLoRA nf4, f32 file", "QLoRA nf4, bf16 file", "QLoRA q4_0, f32 file"):
            ratios.append({"recipe": recipe, "run": run,
                           "of_lora_f32": round(rss[run] / rss["LoRA, f32 base"], 3),
                           "of_lora_bf16": round(rss[run] / rss["LoRA, bf16 base"], 3)})
    doc = {"shape": SHAPE, "vocab_size": 2048, "lora": {"r": 8, "targets": "all-linear"},
           "steps": args.steps, "threads": 2, "cpu_flags": isa, **machine,
           "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
           "targets": {"of_lora_f32": 0.45, "of_lora_bf16": 0.7},
           "results": results, "ratios": ratios}
    with open(args.out + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(args.out + ".tmp", args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
