#!/ usr / bin / python3
"""Writes examples/llm/demo-llama: a tiny LLaMA model directory with a tokenizer, so the README's
`zenith generate / perplexity / merge-adapter` commands run on something in the repository.

    /usr/bin/python3 scripts/make_demo_llm.py [--zenith build/release/zenith] [--out DIR]

The weights are random (seeded), so the text it generates is word salad: the tests use it for the
file formats and commands. The trained example, which writes readable text, is
examples/llm/fortunes-llama (scripts/make_fortunes_llm.py). It is
made the way a user would bring a llama2.c model in: this script writes a llama2.c version-1
checkpoint (dim 64, hidden 176, 2 layers, 4 heads, 2 kv heads, vocab 2000, seq_len 256, shared
classifier), `zenith convert --dtype bf16` turns it into an HF directory, and the tokenizer files
of tests/fixtures/text/llama2_hf (a SentencePiece BPE of 2000 pieces trained on Debian's
fortunes, with its tokenizer.json and a LLaMA-2 chat template) are copied beside it. Plain Python,
no numpy.
"""
import argparse
import os
import random
import shutil
import struct
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
DIM, HIDDEN, LAYERS, HEADS, KV_HEADS, VOCAB, SEQ_LEN = 64, 176, 2, 4, 2, 2000, 256
SEED = 1414
TOKENIZER_FILES = ["tokenizer.model", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json"]


def write_llama2c(path):
    rng = random.Random(SEED)
    head = DIM // HEADS
    kv_dim = KV_HEADS * head

    def normal(n, std):
        return struct.pack(f"<{n}f", *(rng.gauss(0.0, std) for _ in range(n)))

    def ones(n):
        return struct.pack(f"<{n}f", *([1.0] * n))

    header = struct.pack("<Ii7iB", 0x616B3432, 1, DIM, HIDDEN, LAYERS, HEADS, KV_HEADS, VOCAB,
                         SEQ_LEN, 1)
    parts = [header + b"\0" * (256 - len(header)),
             ones(LAYERS * DIM), ones(LAYERS * DIM), ones(DIM),  # rms_att, rms_ffn, rms_final
             normal(VOCAB * DIM, 0.05),                            # token embeddings
             normal(LAYERS * DIM * DIM, DIM ** -0.5),              # wq
             normal(LAYERS * kv_dim * DIM, DIM ** -0.5),           # wk
             normal(LAYERS * kv_dim * DIM, DIM ** -0.5),           # wv
             normal(LAYERS * DIM * DIM, DIM ** -0.5),              # wo
             normal(LAYERS * HIDDEN * DIM, DIM ** -0.5),           # w1 (gate)
             normal(LAYERS * DIM * HIDDEN, HIDDEN ** -0.5),        # w2 (down)
             normal(LAYERS * HIDDEN * DIM, DIM ** -0.5)]           # w3 (up)
    with open(path, "wb") as f:
        for p in parts:
            f.write(p)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zenith", default=os.path.join(ROOT, "build", "release", "zenith"))
    ap.add_argument("--out", default=os.path.join(ROOT, "examples", "llm", "demo-llama"))
    args = ap.parse_args()
    tokenizer_dir = os.path.join(ROOT, "tests", "fixtures", "text", "llama2_hf")
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = os.path.join(tmp, "demo.bin")
        write_llama2c(checkpoint)
        subprocess.run([args.zenith, "convert", "--from", "llama2c", "--checkpoint", checkpoint,
                        "--out", args.out, "--dtype", "bf16"], check=True)
    for name in TOKENIZER_FILES:
        shutil.copyfile(os.path.join(tokenizer_dir, name), os.path.join(args.out, name))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
