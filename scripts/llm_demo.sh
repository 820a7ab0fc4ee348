#!/usr/bin/env bash
# A small LLaMA made here, end to end, from real English text Debian ships:
#   1. corpus: the English fortune-cookie files of package fortunes (/usr/share/games/fortunes:
#      quotations, literature, science, songs and poems, ...; 2.6 MB), one record per fortune;
#   2. a SentencePiece BPE tokenizer trained on it (Debian's spm_train, vocab 4000);
#   3. a 1.3M-parameter model (dim 128, 4 layers) pretrained from random weights on the packed
#      fortunes (zenith finetune --init random --method full), every tenth fortune held out;
#   4. a LoRA fine-tune (all linear layers) on "Define: WORD" -> WordNet 3.0's definition
#      (package wordnet-base; scripts/make_definitions_data.py: the 3000 words of the corpus
#      WordNet's tagged senses know, most frequent first, every tenth word held out);
# with the held-out eval loss before/after each stage and greedy generations before/after the
# LoRA fine-tune (three held-out words). The summary ends the output and is in WORKDIR/summary.txt.
#
#   scripts/llm_demo.sh [--fast] [WORKDIR] [PRETRAIN_STEPS] [FINETUNE_STEPS]
# Defaults: build/llm-demo, 300 + 100 steps (63 minutes on 2 cores shared with other builds).
# --fast is the smoke test: 200 KB of the corpus, vocab 1000, a 0.27M-parameter model, 20 + 10
# steps, 300 definitions (about a minute and a half). ZENITH=path/to/zenith (default
# build/release/zenith).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
fast=0
if [[ "${1:-}" == "--fast" ]]; then
  fast=1
  shift
fi
work="${1:-build/llm-demo}"
if ((fast)); then
  pretrain_steps="${2:-20}" finetune_steps="${3:-10}"
  vocab=1000 dim=64 hidden=176 words=300 corpus_bytes=200000
else
  pretrain_steps="${2:-300}" finetune_steps="${3:-100}"
  vocab=4000 dim=128 hidden=352 words=3000 corpus_bytes=0
fi
zenith="${ZENITH:-$here/build/release/zenith}"
fortunes=/usr/share/games/fortunes
wordnet=/usr/share/wordnet
[[ -f "$fortunes/literature" ]] || { echo "llm_demo: no $fortunes/literature (apt-get install fortunes)" >&2; exit 1; }
[[ -f "$wordnet/data.noun" ]] || { echo "llm_demo: no $wordnet/data.noun (apt-get install wordnet-base)" >&2; exit 1; }
[[ -x "$zenith" ]] || { echo "llm_demo: no zenith binary at $zenith (build it, or set ZENITH)" >&2; exit 1; }
mkdir -p "$work"
work="$(cd "$work" && pwd)"
start=$SECONDS

echo "== corpus: the English fortunes of $fortunes"
# Every fortune file but the Chinese ones (chinese, tang300, song100), the ASCII-art pictures
# and the German de/ directory.
files=$(find "$fortunes" -maxdepth 1 -type f ! -name '*.*' ! -name chinese ! -name tang300 \
  ! -name song100 ! -name ascii-art | sort)
cat $files > "$work/corpus.txt"
if ((corpus_bytes)); then truncate -s "$corpus_bytes" "$work/corpus.txt"; fi
corpus_size=$(wc -c < "$work/corpus.txt")
corpus_words=$(wc -w < "$work/corpus.txt")
echo "$corpus_size bytes, $corpus_words words"

echo "== tokenizer: spm_train (BPE, vocab $vocab, byte fallback)"
model="$work/base-random"
mkdir -p "$model"
spm_train --input="$work/corpus.txt" --model_prefix="$work/spm" --vocab_size="$vocab" \
  --model_type=bpe --byte_fallback=true --character_coverage=1.0 --unk_id=0 --bos_id=1 \
  --eos_id=2 --pad_id=-1 --minloglevel=2 > /dev/null
cp "$work/spm.model" "$model/tokenizer.model"
cat > "$model/tokenizer_config.json" << 'JSON'
{"add_bos_token": true, "add_eos_token": false, "bos_token": "<s>", "eos_token": "</s>",
 "unk_token": "<unk>", "pad_token": null}
JSON
cat > "$model/config.json" << JSON
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": $dim,
 "intermediate_size": $hidden, "num_hidden_layers": 4, "num_attention_heads": 4,
 "num_key_value_heads": 4, "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
 "rope_theta": 10000.0, "tie_word_embeddings": true, "vocab_size": $vocab, "bos_token_id": 1,
 "eos_token_id": 2, "torch_dtype": "float32"}
JSON

echo "== pretraining data: one record per fortune, every tenth held out (at most 400)"
/usr/bin/python3 - "$work" << 'PY'
import json, re, sys
work = sys.argv[1]
text = open(work + "/corpus.txt", encoding="utf-8", errors="replace").read()
fortunes = [f.strip("\n") for f in re.split(r"^%$", text, flags=re.M)]
fortunes = [re.sub(r"[ \t]+", " ", f).strip() for f in fortunes if len(f.split()) >= 4]
with open(work + "/pretrain.jsonl", "w") as train, open(work + "/pretrain_eval.jsonl", "w") as ev:
    for i, f in enumerate(fortunes):
        held_out = i % 10 == 9 and i < 4000  # a bounded eval: 400 fortunes
        (ev if held_out else train).write(json.dumps({"text": f}) + "\n")
print(len(fortunes), "fortunes")
PY

echo "== pretraining from random weights: $pretrain_steps steps"
t0=$SECONDS
"$zenith" finetune --model "$model" --init random --method full --packing \
  --data "$work/pretrain.jsonl" --eval-data "$work/pretrain_eval.jsonl" --out "$work/base" \
  --max-steps "$pretrain_steps" --lr 2e-3 --warmup-steps 20 --batch-size 8 --max-seq-len 256 \
  --log-every 25 --overwrite-output-dir
pretrain_s=$((SECONDS - t0))

echo "== instruction data: WordNet definitions of the corpus's words"
/usr/bin/python3 "$here/scripts/make_definitions_data.py" --out "$work/definitions" \
  --corpus "$work/corpus.txt" --words "$words"

# Greedy answers to "Define: WORD" for the first three held-out words (the most frequent).
mapfile -t held_out < <(/usr/bin/python3 -c '
import json, sys
for line in list(open(sys.argv[1]))[:3]:
    print(json.loads(line)["instruction"])' "$work/definitions/eval.jsonl")
generate() {
  for prompt in "${held_out[@]}"; do
    echo "-- $prompt"
    "$zenith" generate --model "$work/base" "$@" --chat-template alpaca --prompt "$prompt" \
      --temperature 0 --max-new-tokens 32
  done
}
echo "== before the fine-tune"
generate | tee "$work/generations_before.txt"

echo "== LoRA fine-tune: $finetune_steps steps"
t0=$SECONDS
"$zenith" finetune --model "$work/base" --data "$work/definitions/train.jsonl" \
  --eval-data "$work/definitions/eval.jsonl" --out "$work/lora" --lora-targets all-linear \
  --lr 2e-3 --max-steps "$finetune_steps" --batch-size 8 --log-every 25 --overwrite-output-dir
finetune_s=$((SECONDS - t0))

echo "== after the fine-tune"
generate --adapter "$work/lora" | tee "$work/generations_after.txt"

/usr/bin/python3 - "$work" "$corpus_size" "$corpus_words" "$vocab" "$pretrain_steps" \
  "$finetune_steps" "$pretrain_s" "$finetune_s" "$((SECONDS - start))" << 'PY' | tee "$work/summary.txt"
import json, sys
work, size, words, vocab, ps, fs, pt, ft, total = sys.argv[1:]
def first_last(path):
    log = json.load(open(path))  # [{"step", "eval_loss", "perplexity", ...}], before .. after
    return log[0], log[-1]
def fmt(e):
    return f"loss {e['eval_loss']:.3f} (perplexity {e['perplexity']:.1f})"
c = json.load(open(work + "/base/config.json"))
d, h, n = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
params = c["vocab_size"] * d + n * (4 * d * d + 3 * d * h + 2 * d) + d  # tied head
print("== summary")
print(f"corpus: English fortunes (package fortunes), {size} bytes, {words} words; "
      f"tokenizer: SentencePiece BPE, vocab {vocab}")
print(f"model: {params} parameters (dim {d}, {n} layers, hidden {h}, tied embeddings)")
b0, b1 = first_last(work + "/base/eval_log.json")
l0, l1 = first_last(work + "/lora/eval_log.json")
print(f"pretraining, {ps} steps, {pt} s: held-out fortunes {fmt(b0)} -> {fmt(b1)}")
print(f"LoRA, {fs} steps, {ft} s: held-out definitions {fmt(l0)} -> {fmt(l1)}")
print(f"total {total} s")
PY
