#!/usr/bin/env bash
# A small LLaMA made here, end to end, from real English text Debian ships (the licence texts of
# /usr/share/common-licenses, package base-files):
#   1. a SentencePiece BPE tokenizer trained on it (Debian's spm_train, vocab 2000);
#   2. a model pretrained from random weights on its paragraphs (zenith finetune --init random);
#   3. a LoRA fine-tune on instruction records built from the GNU GPL v3's sentences
#      (scripts/make_finetune_data.py: "Continue this sentence" -> its second half), held-out eval
#      loss before/after, greedy generations before/after.
#
#   scripts/llm_demo.sh [WORKDIR] [PRETRAIN_STEPS] [FINETUNE_STEPS]
# (defaults build/llm-demo, 300, 100: about 30 + 10 minutes on 2 shared cores; ZENITH=path/to/zenith, default build/release/zenith).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-build/llm-demo}"
pretrain_steps="${2:-300}"
finetune_steps="${3:-100}"
zenith="${ZENITH:-$here/build/release/zenith}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"

echo "== corpus: /usr/share/common-licenses"
find /usr/share/common-licenses -maxdepth 1 -type f | sort | xargs cat > "$work/corpus.txt"
wc -c -w "$work/corpus.txt"

echo "== tokenizer: spm_train (BPE, vocab 2000, byte fallback)"
model="$work/base-random"
mkdir -p "$model"
spm_train --input="$work/corpus.txt" --model_prefix="$work/spm" --vocab_size=2000 \
  --model_type=bpe --byte_fallback=true --character_coverage=1.0 --unk_id=0 --bos_id=1 \
  --eos_id=2 --pad_id=-1 --minloglevel=2 > /dev/null
cp "$work/spm.model" "$model/tokenizer.model"
cat > "$model/tokenizer_config.json" << 'EOF'
{"add_bos_token": true, "add_eos_token": false, "bos_token": "<s>", "eos_token": "</s>",
 "unk_token": "<unk>", "pad_token": null,
 "chat_template": "{% for message in messages %}### Instruction:{% endfor %}"}
EOF
cat > "$model/config.json" << 'EOF'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128,
 "intermediate_size": 352, "num_hidden_layers": 4, "num_attention_heads": 4,
 "num_key_value_heads": 4, "max_position_embeddings": 256, "rms_norm_eps": 1e-5,
 "rope_theta": 10000.0, "tie_word_embeddings": true, "vocab_size": 2000, "bos_token_id": 1,
 "eos_token_id": 2, "torch_dtype": "float32"}
EOF

echo "== pretraining data: the corpus's paragraphs, every tenth held out"
/usr/bin/python3 - "$work" << 'EOF'
import json, re, sys
work = sys.argv[1]
text = open(work + "/corpus.txt", encoding="utf-8", errors="replace").read()
paragraphs = [re.sub(r"\s+", " ", p).strip() for p in re.split(r"\n\s*\n", text)]
paragraphs = [p for p in paragraphs if len(p.split()) >= 5]
with open(work + "/pretrain.jsonl", "w") as train, open(work + "/pretrain_eval.jsonl", "w") as ev:
    for i, p in enumerate(paragraphs):
        (ev if i % 10 == 9 else train).write(json.dumps({"text": p}) + "\n")
print(len(paragraphs), "paragraphs")
EOF

echo "== pretraining from random weights: $pretrain_steps steps"
time "$zenith" finetune --model "$model" --init random --method full \
  --data "$work/pretrain.jsonl" --eval-data "$work/pretrain_eval.jsonl" --out "$work/base" \
  --max-steps "$pretrain_steps" --lr 2e-3 --warmup-steps 20 --batch-size 8 --max-seq-len 256 \
  --log-every 50 --eval-every 200

echo "== instruction data from the GNU GPL v3"
/usr/bin/python3 "$here/scripts/make_finetune_data.py" --out "$work/instructions"

prompt="Continue this sentence of the GNU GPL."
generate() {
  "$zenith" generate --model "$work/base" "$@" --chat-template alpaca --chat \
    --prompt "$prompt

### Input:
The licenses for most software and other practical works are designed" \
    --temperature 0 --max-new-tokens 24
}
echo "== before the fine-tune"
generate

echo "== LoRA fine-tune: $finetune_steps steps"
time "$zenith" finetune --model "$work/base" --data "$work/instructions/train.jsonl" \
  --eval-data "$work/instructions/eval.jsonl" --out "$work/lora" --lora-targets all-linear \
  --lr 1e-3 --max-steps "$finetune_steps" --batch-size 8 --log-every 50

echo "== after the fine-tune"
generate --adapter "$work/lora"
echo "== eval loss before/after (held-out GPL sentences)"
cat "$work/lora/eval_log.json"
