#!/usr/bin/python3
"""Trains examples/llm/fortunes-llama: a small LLaMA that writes readable English, made here from
text Debian ships, so `zenith generate`, `perplexity` and the LLM examples show real output.

    nice /usr/bin/python3 scripts/make_fortunes_llm.py [--out DIR] [--steps N] [--bench]

  corpus     the English fortune-cookie files of package `fortunes` (/usr/share/games/fortunes:
             quotations, literature, science, poems, ...), one document per fortune, and WordNet
             3.0's definitions (package `wordnet-base`, scripts/make_definitions_data.py) of every
             single-word lemma its sense-tagged corpus has seen;
  tokenizer  SentencePiece BPE (spm_train, LLaMA's settings: identity normalization, byte
             fallback, split digits), VOCAB pieces, with an HF tokenizer.json converted as
             transformers' LlamaConverter does and LLaMA-2's chat template;
  documents  a fortune is plain text `<s> fortune </s>` or, one time in three, a chat turn
             "Tell me a fortune about TOPIC." -> fortune (TOPIC: the fortune file's name); a
             definition is the chat turn "Define: WORD" -> gloss; every twentieth fortune and
             definition is held out;
  model      LLaMA (HF LlamaForCausalLM, scripts/llama_reference.py), tied embeddings, trained
             from random weights (seed SEED) on packed SEQ_LEN-token windows with AdamW, then
             saved as bf16 safetensors with config.json and generation_config.json.

Writes beside the model examples/llm/fortunes-heldout.txt (held-out fortunes for `zenith
perplexity --text-file`) and prints the held-out loss and perplexity. Deterministic for a given
machine (fixed seeds, one fixed thread count). Needs PyTorch, python3-sentencepiece, fortunes,
wordnet-base. --bench times a few steps and exits.
"""
import argparse
import json
import math
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import sentencepiece as spm
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "tokenizer_fixtures"))
import llama_reference as ref  # noqa: E402
import make_definitions_data as wordnet  # noqa: E402
import make_tokenizers as tok  # noqa: E402

FORTUNES = "/usr/share/games/fortunes"
NOT_ENGLISH = {"chinese", "tang300", "song100", "ascii-art", "art"}
WORDNET = "/usr/share/wordnet"
VOCAB, DIM, HIDDEN, LAYERS, HEADS, KV_HEADS, SEQ_LEN = 2048, 128, 384, 4, 4, 4, 256
BATCH, LR, WARMUP, WEIGHT_DECAY = 16, 4e-3, 100, 0.1
SEED, THREADS = 1414, 2
GENERATION = {"do_sample": True, "temperature": 0.7, "top_k": 40, "top_p": 0.9,
              "max_new_tokens": 64}


def read_fortunes():
    """[(topic, text)] of every English fortune of 4 words or more, files in name order."""
    out = []
    for name in sorted(os.listdir(FORTUNES)):
        path = os.path.join(FORTUNES, name)
        if "." in name or name in NOT_ENGLISH or not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for fortune in re.split(r"^%$", text, flags=re.M):
            lines = [re.sub(r"[ \t]+", " ", line).strip() for line in fortune.split("\n")]
            fortune = "\n".join(line for line in lines if line)
            if len(fortune.split()) >= 4 and "\ufffd" not in fortune:
                out.append((name.replace("-", " "), fortune))
    return out


def read_definitions():
    """[(word, gloss)] of WordNet's tagged single-word lemmas, most tagged first."""
    entries, tagged = {}, {}
    for pos, _ in wordnet.POS:
        for lemma, (offset, count) in wordnet.first_senses(WORDNET, pos).items():
            if lemma in entries or not re.fullmatch(r"[a-z]{3,}", lemma) or count == 0:
                continue
            entries[lemma], tagged[lemma] = (pos, offset), count
    data = {pos: open(os.path.join(WORDNET, "data." + pos), "rb") for pos, _ in wordnet.POS}
    words = sorted(entries, key=lambda w: (-tagged[w], w))
    out = [(w, wordnet.gloss(data[entries[w][0]], entries[w][1])) for w in words]
    for f in data.values():
        f.close()
    return out


def train_tokenizer(texts, out_dir):
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "corpus.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(t.replace("\n", " ") for t in texts) + "\n")
        args = ["spm_train", "--input=corpus.txt", "--model_prefix=tokenizer", "--model_type=bpe",
                f"--vocab_size={VOCAB}", "--byte_fallback=true", "--character_coverage=0.9995",
                "--normalization_rule_name=identity", "--remove_extra_whitespaces=false",
                "--split_digits=true", "--unk_id=0", "--bos_id=1", "--eos_id=2", "--pad_id=-1",
                "--num_threads=1", "--random_seed=17", "--minloglevel=2"]
        subprocess.run(args, check=True, cwd=tmp, stderr=subprocess.DEVNULL)
        shutil.move(os.path.join(tmp, "tokenizer.model"), os.path.join(out_dir, "tokenizer.model"))
    return spm.SentencePieceProcessor(model_file=os.path.join(out_dir, "tokenizer.model"))


def write_tokenizer_files(out_dir):
    """tokenizer.json, tokenizer_config.json (with the chat template), special_tokens_map.json:
    what transformers writes for a LLaMA-2 tokenizer."""
    sp = spm.SentencePieceProcessor(model_file=os.path.join(out_dir, "tokenizer.model"))
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    model = {"type": "BPE", "dropout": None, "unk_token": "<unk>",
             "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": True,
             "byte_fallback": True, "vocab": vocab, "merges": tok.sentencepiece_merges(sp, vocab)}
    tokens = [tok.added(0, "<unk>"), tok.added(1, "<s>"), tok.added(2, "</s>")]
    replace = {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}
    tok.write_json(os.path.join(out_dir, "tokenizer.json"), tok.tokenizer_json(
        model, tokens,
        normalizer={"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        post_processor=tok.template(("<s>", 1)),
        decoder={"type": "Sequence", "decoders": [
            replace, {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}))
    tok.write_json(os.path.join(out_dir, "tokenizer_config.json"), {
        "add_bos_token": True, "add_eos_token": False, "legacy": True, "bos_token": "<s>",
        "eos_token": "</s>", "unk_token": "<unk>", "pad_token": None,
        "chat_template": tok.LLAMA2_TEMPLATE, "clean_up_tokenization_spaces": False,
        "model_max_length": SEQ_LEN, "tokenizer_class": "LlamaTokenizer"})
    tok.write_json(os.path.join(out_dir, "special_tokens_map.json"), {
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"})


def chat_ids(sp, user, assistant):
    """LLaMA-2's template: <s>[INST] user [/INST] assistant </s>, as the tokenizer encodes it."""
    return [1] + sp.encode(f"[INST] {user.strip()} [/INST] {assistant.strip()} ") + [2]


def text_ids(sp, text):
    return [1] + sp.encode(text) + [2]


def documents(sp, fortunes, definitions, rng):
    """One epoch's token ids: every document in a shuffled order, concatenated."""
    docs = [text_ids(sp, f) if rng.random() < 2 / 3 else
            chat_ids(sp, f"Tell me a fortune about {topic}.", f) for topic, f in fortunes]
    docs += [chat_ids(sp, f"Define: {w}", g) for w, g in definitions]
    rng.shuffle(docs)
    return [t for d in docs for t in d]


def config_json():
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": DIM,
            "intermediate_size": HIDDEN, "num_hidden_layers": LAYERS,
            "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
            "max_position_embeddings": SEQ_LEN, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
            "tie_word_embeddings": True, "vocab_size": VOCAB, "bos_token_id": 1,
            "eos_token_id": 2, "hidden_act": "silu", "torch_dtype": "bfloat16"}


def init_weights(model):
    """GPT-2/LLaMA's init: normal(0, 0.02), output projections scaled by 1/sqrt(2 * layers)."""
    for name, p in model.named_parameters():
        if p.dim() == 2:
            std = 0.02 / math.sqrt(2 * LAYERS) if name.endswith(("o_proj.weight",
                                                                   "down_proj.weight")) else 0.02
            torch.nn.init.normal_(p, 0.0, std)


def batches(stream, rng):
    """Random SEQ_LEN + 1 windows of the token stream, BATCH at a time, forever."""
    data = torch.tensor(stream, dtype=torch.long)
    while True:
        starts = [rng.randrange(len(stream) - SEQ_LEN - 1) for _ in range(BATCH)]
        yield torch.stack([data[s:s + SEQ_LEN + 1] for s in starts])


def loss_of(model, x):
    return ref.causal_lm_loss(model(x), x)


@torch.no_grad()
def eval_loss(model, stream):
    """Mean next-token loss over consecutive SEQ_LEN + 1 windows of a held-out stream."""
    model.eval()
    total = count = 0
    for s in range(0, len(stream) - SEQ_LEN - 1, SEQ_LEN):
        x = torch.tensor([stream[s:s + SEQ_LEN + 1]])
        total += loss_of(model, x).item() * SEQ_LEN
        count += SEQ_LEN
    model.train()
    return total / count


def learning_rate(step, steps):
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    progress = (step - WARMUP) / max(1, steps - WARMUP)
    return LR * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def train(model, sp, fortunes, definitions, steps, eval_stream, bench):
    rng = random.Random(SEED)
    stream = []
    while len(stream) < 3 * steps * BATCH * SEQ_LEN // 2 or not stream:
        stream += documents(sp, fortunes, definitions, rng)  # a new mixture each epoch
    decay = [p for p in model.parameters() if p.dim() == 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                             {"params": rest, "weight_decay": 0.0}], lr=LR, betas=(0.9, 0.95))
    start = time.time()
    for step, x in zip(range(steps), batches(stream, rng)):
        for group in opt.param_groups:
            group["lr"] = learning_rate(step, steps)
        opt.zero_grad(set_to_none=True)
        loss = loss_of(model, x)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == steps - 1 or bench:
            print(f"step {step} loss {loss.item():.3f} {time.time() - start:.0f} s", flush=True)
        if step % 500 == 499 and not bench:
            print(f"  held-out loss {eval_loss(model, eval_stream):.3f}", flush=True)
    return time.time() - start


def save_safetensors(path, tensors):
    """bf16 tensors in the safetensors format (8-byte header length, JSON header, data)."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().to(torch.bfloat16).contiguous()
        blob = t.view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": "BF16", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header["__metadata__"] = {"format": "pt"}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for blob in blobs:
            f.write(blob)
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "examples", "llm", "fortunes-llama"))
    ap.add_argument("--heldout-text",
                    default=os.path.join(ROOT, "examples", "llm", "fortunes-heldout.txt"))
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--bench", action="store_true", help="time 5 steps and exit")
    args = ap.parse_args()
    for path, package in [(FORTUNES + "/literature", "fortunes"),
                          (WORDNET + "/data.noun", "wordnet-base")]:
        if not os.path.exists(path):
            sys.exit(f"make_fortunes_llm: no {path} (apt-get install {package})")
    torch.manual_seed(SEED)
    torch.set_num_threads(THREADS)

    fortunes, definitions = read_fortunes(), read_definitions()
    train_f = [f for i, f in enumerate(fortunes) if i % 20 != 19]
    held_f = [f for i, f in enumerate(fortunes) if i % 20 == 19]
    train_d = [d for i, d in enumerate(definitions) if i % 20 != 19]
    held_d = [d for i, d in enumerate(definitions) if i % 20 == 19]
    print(f"{len(fortunes)} fortunes, {len(definitions)} definitions "
          f"({len(held_f)} and {len(held_d)} held out)")
    os.makedirs(args.out, exist_ok=True)
    sp = train_tokenizer([f for _, f in train_f] + [f"{w}: {g}" for w, g in train_d], args.out)
    write_tokenizer_files(args.out)
    held_fortunes = [t for _, f in held_f for t in text_ids(sp, f)]
    held_definitions = [t for w, g in held_d for t in chat_ids(sp, f"Define: {w}", g)]

    cfg = config_json()
    model = ref.LlamaForCausalLM(ref.Config(cfg))
    init_weights(model)
    print(f"{sum(p.numel() for p in model.parameters())} parameters")
    seconds = train(model, sp, train_f, train_d, 5 if args.bench else args.steps,
                    held_fortunes, args.bench)
    if args.bench:
        print(f"{seconds / 5:.2f} s a step")
        return
    save_safetensors(os.path.join(args.out, "model.safetensors"), ref.hf_state_dict(model))
    tok.write_json(os.path.join(args.out, "config.json"), cfg)
    tok.write_json(os.path.join(args.out, "generation_config.json"),
                   dict(GENERATION, bos_token_id=1, eos_token_id=2))
    with open(args.heldout_text, "w", encoding="utf-8") as f:
        f.write("\n\n".join(f for _, f in held_f[:150]) + "\n")
    model = model.to(torch.bfloat16).float()  # the model as saved
    for name, stream in [("fortunes", held_fortunes), ("definitions", held_definitions)]:
        loss = eval_loss(model, stream)
        print(f"held-out {name}: loss {loss:.3f}, perplexity {math.exp(loss):.1f}")
    print(f"trained {args.steps} steps in {seconds:.0f} s; wrote {args.out}")


if __name__ == "__main__":
    main()
