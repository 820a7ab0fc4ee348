#!/bin/bash
# GGUF files zenith writes, checked by llama.cpp itself (tests/e2e/gguf_llama_cpp.mjs through
# node-llama-cpp 3.21.1, installed by the CTest fixture npm.install) and by @huggingface/gguf:
# `zenith export --format gguf` writes the fortunes-trained model at f32, f16, bf16, q8_0, q4_0
# and q4_k; llama.cpp loads each, tokenizes a held-out line as zenith does and decodes zenith's
# greedy tokens (`zenith generate --model X.gguf`, 32 tokens or up to eos): all of them at f32
# and q8_0, at least 8 at the others (other rounding of f16/bf16 products, 4-bit dot products);
# llama.cpp's perplexity of held-out tokens (tests/e2e/gguf_perplexity.mjs, zenith's windows)
# is within 1% of `zenith perplexity`'s on the same file at f32, q8_0 and q4_k; zenith reads its
# own files back (at f32 the directory's tokens and perplexity; at q8_0 those of `--dtype q8_0`
# on the directory) and refuses a GGUF of another architecture by name. A LoRA adapter (10 steps
# of `zenith finetune`) exported as a GGUF adapter file makes llama.cpp decode what zenith
# decodes with the PEFT adapter. A `zenith quantize` directory exports to the same file as
# `--dtype q8_0`. A byte-level BPE vocabulary (tests/fixtures/text/llama3_bpe on a random
# model) is written as gguf's gpt2/llama-bpe and llama.cpp tokenizes text as zenith does. The
# bench probe gguf_decode_speed.mjs runs.
# A few seconds. $1 is the zenith binary.
set -u
ZENITH=$(realpath "$1")
here=$(realpath "$(dirname "${BASH_SOURCE[0]}")")
model=$(realpath "$here/../../examples/llm/fortunes-llama")
heldout=$(realpath "$here/../../examples/llm/fortunes-heldout.txt")
[ -f "$here/../npm/node_modules/node-llama-cpp/package.json" ] ||
  { echo "FAIL: tests/npm/node_modules is missing: run tests/npm/install.sh (CTest fixture npm.install)"; exit 1; }
source "$here/../support/e2e_work.bash"
e2e_work gguf_llama_cpp
fail() { echo "FAIL: $*"; exit 1; }
cd "$work"

dtypes="f32 f16 bf16 q8_0 q4_0 q4_k"
for dtype in $dtypes; do
  "$ZENITH" export --format gguf --model "$model" --dtype $dtype --out fortunes-$dtype.gguf \
    > export-$dtype.out 2>&1 || fail "export --dtype $dtype: $(cat export-$dtype.out)"
  grep -q "GGUF v3, llama architecture, $dtype, 38 tensors" export-$dtype.out ||
    fail "export --dtype $dtype said: $(cat export-$dtype.out)"
done

# A `zenith quantize` directory exports at its own blocks: the same file as --dtype q8_0.
"$ZENITH" quantize --model "$model" --dtype q8_0 --out quantized > quantize.out 2>&1 ||
  fail "quantize: $(cat quantize.out)"
"$ZENITH" export --format gguf --model quantized --out quantized.gguf > qexport.out 2>&1 ||
  fail "export of the quantized directory: $(cat qexport.out)"
cmp -s quantized.gguf fortunes-q8_0.gguf || fail "the quantized directory's GGUF differs from --dtype q8_0's"

# zenith's greedy tokens from the directory, and from its own GGUF file.
prompt=$("$ZENITH" tokenize --model "$model" --text "The" --json | python3 -c \
  'import json,sys; print(",".join(map(str, json.load(sys.stdin)["ids"])))')
gen() { "$ZENITH" generate --model "$@" --prompt-ids "$prompt" --max-new-tokens 32 --temperature 0 \
  --threads 1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens"])'; }
expect=$(gen "$model") || fail "generate on the directory"
[ "$(gen fortunes-f32.gguf)" = "$expect" ] || fail "generate --model fortunes-f32.gguf differs: $(gen fortunes-f32.gguf) vs $expect"
[ "$(gen fortunes-q8_0.gguf)" = "$(gen "$model" --dtype q8_0)" ] ||
  fail "generate --model fortunes-q8_0.gguf differs from --dtype q8_0 on the directory"
[ "$(echo "$expect" | tr ',' '\n' | wc -l)" = 32 ] || fail "expected 32 tokens without eos: $expect"
ppl() { "$ZENITH" perplexity --model "$1" --text-file "$heldout" --json; }
[ "$(ppl fortunes-f32.gguf)" = "$(ppl "$model")" ] || fail "perplexity of the f32 GGUF differs"
# The text prompt through the vocabulary the GGUF file carries.
"$ZENITH" generate --model fortunes-f32.gguf --prompt "The" --max-new-tokens 32 --temperature 0 \
  --threads 1 --json > text.json || fail "generate --prompt on the GGUF file"
[ "$(python3 -c 'import json; print(json.load(open("text.json"))["tokens"])')" = "$expect" ] ||
  fail "generate --prompt The on the GGUF file: $(cat text.json)"

# A LoRA adapter on q, k, v and o (k and q rows of lora_b reordered like the base's).
"$ZENITH" finetune --model "$model" --data "$here/../../examples/llm/finetune/train.jsonl" \
  --out adapter --max-steps 10 --lr 0.02 --lora-r 4 --lora-targets q_proj,k_proj,v_proj,o_proj \
  --lora-dropout 0 --threads 2 --progress none > finetune.out 2>&1 || fail "finetune: $(tail finetune.out)"
"$ZENITH" export --format gguf --model "$model" --adapter adapter --out adapter.gguf > adapter.out 2>&1 ||
  fail "export --adapter: $(cat adapter.out)"
grep -q "GGUF v3 LoRA adapter of .*, 32 tensors" adapter.out || fail "export --adapter said: $(cat adapter.out)"
lora_expect=$(gen "$model" --adapter adapter)
[ "$lora_expect" != "$expect" ] || fail "the adapter does not change the greedy tokens: no check"

# A byte-level BPE (LLaMA 3) vocabulary on a random 2-layer model.
mkdir bpe && cp "$here/../fixtures/text/llama3_bpe/"* bpe/ && cat > bpe/config.json <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
 "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "max_position_embeddings": 128, "vocab_size": 1024,
 "bos_token_id": 956, "eos_token_id": 957, "torch_dtype": "float32"}
JSON
"$ZENITH" finetune --init random --method full --model bpe --data "$here/../../examples/llm/finetune/train.jsonl" \
  --out bpe-model --max-steps 1 --max-seq-len 64 --progress none > bpe.out 2>&1 || fail "random BPE model: $(tail bpe.out)"
"$ZENITH" export --format gguf --model bpe-model --out bpe.gguf > bpe-export.out 2>&1 ||
  fail "export of the BPE model: $(cat bpe-export.out)"
grep -q "vocabulary gpt2 (byte-level BPE), 1024 tokens" bpe-export.out || fail "BPE export said: $(cat bpe-export.out)"
bpe_text=$(printf "Hello world! 12345 don't caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd\n  spaced  out")
bpe_ids=$("$ZENITH" tokenize --model bpe-model --text "$bpe_text" --no-special --json | python3 -c \
  'import json,sys; print(json.load(sys.stdin)["ids"])')

line=$(sed -n 3p "$heldout")
text_ids=$("$ZENITH" tokenize --model "$model" --text "$line" --no-special --json | python3 -c \
  'import json,sys; print(json.load(sys.stdin)["ids"])')
files=
for dtype in $dtypes; do
  case $dtype in f32|q8_0) agree=32 ;; *) agree=8 ;; esac
  files="$files${files:+,}{\"path\": \"$work/fortunes-$dtype.gguf\", \"dtype\": \"$dtype\", \"tensors\": 38,
    \"expect_tokens\": $(gen fortunes-$dtype.gguf), \"min_agree\": $agree}"
done
cat > spec.json <<JSON
{"files": [$files],
 "config": {"block_count": 4, "embedding_length": 128, "feed_forward_length": 384,
            "attention.head_count": 4, "attention.head_count_kv": 4, "context_length": 256,
            "vocab_size": 2048},
 "text": $(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$line"),
 "text_ids": $text_ids, "prompt_ids": [$prompt],
 "lora": {"base": "$work/fortunes-f32.gguf", "adapter": "$work/adapter.gguf", "expect_tokens": $lora_expect},
 "vocab_checks": [{"path": "$work/bpe.gguf", "tokenizer": "gpt2",
   "text": $(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$bpe_text"), "text_ids": $bpe_ids}]}
JSON
node "$here/gguf_llama_cpp.mjs" spec.json || fail "llama.cpp disagrees (above)"

# Perplexity, llama.cpp against zenith, on the first 700 tokens of the held-out text.
"$ZENITH" tokenize --model "$model" --text "$(head -n 60 "$heldout")" --json | python3 -c \
  'import json,sys; print(json.dumps(json.load(sys.stdin)["ids"][:700]))' > ids.json
ids=$(python3 -c 'import json; print(",".join(map(str, json.load(open("ids.json")))))')
for dtype in f32 q8_0 q4_k; do
  z=$("$ZENITH" perplexity --model fortunes-$dtype.gguf --ids "$ids" --max-seq-len 256 --json) ||
    fail "zenith perplexity on fortunes-$dtype.gguf"
  l=$(node "$here/gguf_perplexity.mjs" fortunes-$dtype.gguf ids.json 256) ||
    fail "llama.cpp perplexity on fortunes-$dtype.gguf"
  python3 - "$dtype" "$z" "$l" <<'PY' || fail "perplexity differs (above)"
import json, sys
dtype, z, l = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
gap = abs(l["perplexity"] - z["perplexity"]) / z["perplexity"]
print(f"{dtype}: perplexity zenith {z['perplexity']:.4f}, llama.cpp {l['perplexity']:.4f} "
      f"({gap:.2%} apart, {z['tokens']} tokens)")
sys.exit(0 if gap < 0.01 and z["tokens"] == l["tokens"] else 1)
PY
done

# The decode-speed probe the benches use (tests/e2e/gguf_decode_speed.mjs) runs.
node "$here/gguf_decode_speed.mjs" fortunes-q8_0.gguf 1 8 "$prompt" > speed.json ||
  fail "gguf_decode_speed.mjs: $(cat speed.json)"
python3 -c 'import json,sys; d=json.load(open("speed.json")); sys.exit(0 if d["new_tokens"] == 8 and d["tokens_per_second"] > 0 else 1)' ||
  fail "gguf_decode_speed.mjs printed $(cat speed.json)"

# Another architecture is refused by name.
python3 - <<'PY'
import struct
def s(x): return struct.pack("<Q", len(x)) + x
open("falcon.gguf", "wb").write(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) +
    s(b"general.architecture") + struct.pack("<I", 8) + s(b"falcon"))
PY
"$ZENITH" generate --model falcon.gguf --prompt-ids 1 > falcon.out 2>&1 && fail "falcon loaded"
grep -q "general.architecture is 'falcon'; zenith reads the llama architecture" falcon.out ||
  fail "falcon error: $(cat falcon.out)"
echo "PASS: llama.cpp and @huggingface/gguf read zenith's GGUF files"
