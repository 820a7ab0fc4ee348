#!/usr/bin/python3
"""Writes zenith's test tokenizers into tests/fixtures/text/, trained on real text Debian ships:
the fortune cookie databases of the `fortunes` (English), `fortunes-de` (German) and
`fortunes-zh` (Chinese Tang and Song poems) packages.

  sp_bpe/        tokenizer.model: SentencePiece BPE (spm_train, LLaMA's settings: identity
                 normalization, byte_fallback, split_digits, no whitespace squeezing)
  sp_unigram/    tokenizer.model: SentencePiece unigram (byte_fallback, spm_train's whitespace
                 squeezing), no tokenizer_config.json (the defaults)
  llama2_hf/     tokenizer.json: sp_bpe converted as transformers' LlamaConverter does (legacy:
                 Prepend + Replace normalizer, Replace/ByteFallback/Fuse/Strip decoder); with the
                 tokenizer.model too, as Hub LLaMA-2 directories have both
  metaspace_hf/  tokenizer.json: the same model, Metaspace pre-tokenizer and decoder (legacy=False)
  llama3_bpe/    tokenizer.json: a byte-level BPE trained here (train_byte_bpe below), LLaMA-3's
                 split regex, merges as [a, b] pairs, ignore_merges, <|begin_of_text|> template
  qwen2_bpe/     the same merges, Qwen2's NFC normalizer and regex, merges as "a b" strings
  gpt2_bpe/      the same merges, GPT-2's ByteLevel pre-tokenizer (its own regex, prefix space)

Run by regenerate.sh (then make_sp_fixtures.py and make_hf_fixtures.mjs write the expected ids).
Needs the Debian packages sentencepiece, python3-sentencepiece, fortunes, fortunes-de, fortunes-zh.
"""
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "tests", "fixtures", "text")
FORTUNES = "/usr/share/games/fortunes"
ENGLISH = ["computers", "linux", "science", "wisdom", "literature", "people", "humorists",
           "work", "education", "law", "politics", "platitudes", "miscellaneous", "riddles"]
GERMAN = ["de/zitate", "de/witze", "de/sprichworte"]
CHINESE = ["tang300", "song100"]
SPM_VOCAB = 2000
BYTE_BPE_MERGES = 700

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# The well-known Jinja chat templates, as model repositories ship them (zenith recognises them by
# their markers and renders its built-in equivalent).
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}")
LLAMA2_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}"
    "{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}"
    "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}"
    "{% endif %}{% endfor %}")
CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}")
ALPACA_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'system' %}"
    "{{ message['content'] + '\n\n' }}{% elif message['role'] == 'user' %}"
    "{{ '### Instruction:\n' + message['content'] + '\n\n' }}"
    "{% elif message['role'] == 'assistant' %}{{ '### Response:\n' + message['content'] + "
    "eos_token + '\n\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '### Response:\n' }}{% endif %}")


def read_corpus():
    """The fortune databases as one text: cookies separated by blank lines, colours removed."""
    parts = []
    for names, limit in ((ENGLISH, 1_500_000), (GERMAN, 400_000), (CHINESE, 100_000)):
        size = 0
        for name in names:
            path = os.path.join(FORTUNES, name)
            if not os.path.exists(path):
                sys.exit(f"missing {path}: install fortunes, fortunes-de and fortunes-zh")
            with open(path, encoding="utf-8", errors="replace") as f:
                text = re.sub(r"\x1b\[[0-9;]*m", "", f.read())
            for cookie in text.split("\n%\n"):
                if size >= limit:
                    break
                parts.append(cookie.strip("\n"))
                size += len(cookie.encode())
    return "\n\n".join(parts) + "\n"


def train_sentencepiece(tmp, out_dir, model_type, extra):
    """spm_train in tmp (holding corpus.txt; relative paths, so the model records no temporary
    path and is the same on every run), the model moved to out_dir/tokenizer.model."""
    args = ["spm_train", "--input=corpus.txt", "--model_prefix=tokenizer",
            f"--model_type={model_type}", f"--vocab_size={SPM_VOCAB}", "--byte_fallback=true",
            "--character_coverage=0.99", "--normalization_rule_name=identity",
            "--unk_id=0", "--bos_id=1", "--eos_id=2", "--pad_id=-1", "--num_threads=1",
            "--random_seed=17", "--minloglevel=2"] + extra
    subprocess.run(args, check=True, cwd=tmp, stderr=subprocess.DEVNULL)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "tokenizer.model")
    shutil.move(os.path.join(tmp, "tokenizer.model"), path)
    return path


def bytes_to_unicode():
    """GPT-2's map of the 256 bytes onto printable characters (byte-level BPE's alphabet)."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
          list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def train_byte_bpe(corpus, num_merges):
    """Byte-level BPE: words split by (an approximation of) LLaMA-3's regex, bytes mapped to
    GPT-2's alphabet, then the most frequent adjacent pair merged num_merges times (ties: the
    pair first seen). Returns (alphabet in id order, merges)."""
    # Python's re has no \p{L}: [^\W\d_] stands for letters, \d for numbers.
    word_re = re.compile(r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\w]?[^\W\d_]+|\d{1,3}|"
                         r" ?[^\s\w]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
    byte_map = bytes_to_unicode()
    counts = collections.Counter(word_re.findall(corpus))
    words = []  # [symbols, frequency]
    for word, freq in counts.items():
        words.append([[byte_map[b] for b in word.encode()], freq])
    pair_freq = collections.Counter()
    pair_words = collections.defaultdict(set)
    for i, (symbols, freq) in enumerate(words):
        for a, b in zip(symbols, symbols[1:]):
            pair_freq[(a, b)] += freq
            pair_words[(a, b)].add(i)
    merges = []
    for _ in range(num_merges):
        best = max(pair_freq.items(), key=lambda kv: (kv[1], -len(kv[0][0] + kv[0][1]), kv[0]),
                   default=None)
        if best is None or best[1] < 2:
            break
        (a, b), _ = best
        merges.append((a, b))
        for i in list(pair_words[(a, b)]):
            symbols, freq = words[i]
            for x, y in zip(symbols, symbols[1:]):
                pair_freq[(x, y)] -= freq
            merged, j = [], 0
            while j < len(symbols):
                if j + 1 < len(symbols) and symbols[j] == a and symbols[j + 1] == b:
                    merged.append(a + b)
                    j += 2
                else:
                    merged.append(symbols[j])
                    j += 1
            words[i][0] = merged
            for x, y in zip(merged, merged[1:]):
                pair_freq[(x, y)] += freq
                pair_words[(x, y)].add(i)
        del pair_freq[(a, b)]
        for pair in [p for p, f in pair_freq.items() if f <= 0]:
            del pair_freq[pair]
    return list(byte_map.values()), merges


def added(id_, content, special=True, **flags):
    token = {"id": id_, "content": content, "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": not special, "special": special}
    token.update(flags)
    return token


def template(bos):
    return {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos[0], "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos[0], "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": bos[0], "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos[0]: {"id": bos[0], "ids": [bos[1]], "tokens": [bos[0]]}}}


def tokenizer_json(model, added_tokens, normalizer=None, pre_tokenizer=None, post_processor=None,
                   decoder=None):
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added_tokens,
            "normalizer": normalizer, "pre_tokenizer": pre_tokenizer,
            "post_processor": post_processor, "decoder": decoder, "model": model}


def write_json(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


def write_byte_level(alphabet, merges):
    vocab = {c: i for i, c in enumerate(alphabet)}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    n = len(vocab)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": False}
    decoder = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
               "use_regex": True}

    def bpe(merge_format, **flags):
        model = {"type": "BPE", "dropout": None, "unk_token": None,
                 "continuing_subword_prefix": None, "end_of_word_suffix": None,
                 "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                 "merges": [merge_format(a, b) for a, b in merges]}
        model.update(flags)
        return model

    # LLaMA-3: <|begin_of_text|> added by the post-processor; a non-special added word and an
    # lstrip/rstrip token exercise added-token matching on normal text.
    names = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
             "<|eot_id|>"]
    tokens = [added(n + i, name) for i, name in enumerate(names)]
    tokens.append(added(n + 5, "<mask>", lstrip=True, rstrip=True))
    tokens.append(added(n + 6, "zenith", special=False))
    split = {"type": "Split", "pattern": {"Regex": LLAMA3_REGEX}, "behavior": "Isolated",
             "invert": False}
    d = os.path.join(OUT, "llama3_bpe")
    write_json(os.path.join(d, "tokenizer.json"), tokenizer_json(
        bpe(lambda a, b: [a, b], ignore_merges=True), tokens,
        pre_tokenizer={"type": "Sequence", "pretokenizers": [split, byte_level]},
        post_processor={"type": "Sequence", "processors": [
            dict(byte_level, trim_offsets=False, use_regex=True),
            template(("<|begin_of_text|>", n))]},
        decoder=decoder))
    write_json(os.path.join(d, "tokenizer_config.json"), {
        "bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
        "chat_template": LLAMA3_TEMPLATE, "clean_up_tokenization_spaces": True,
        "model_max_length": 131072, "tokenizer_class": "PreTrainedTokenizerFast"})
    write_json(os.path.join(d, "generation_config.json"), {
        "bos_token_id": n, "eos_token_id": [n + 1, n + 4], "do_sample": True})

    # Qwen2: NFC, single digits, merges as "a b" strings, ChatML.
    names = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokens = [added(n + i, name) for i, name in enumerate(names)]
    split = dict(split, pattern={"Regex": QWEN2_REGEX})
    d = os.path.join(OUT, "qwen2_bpe")
    write_json(os.path.join(d, "tokenizer.json"), tokenizer_json(
        bpe(lambda a, b: f"{a} {b}"), tokens, normalizer={"type": "NFC"},
        pre_tokenizer={"type": "Sequence", "pretokenizers": [split, byte_level]},
        post_processor=dict(byte_level, trim_offsets=False), decoder=decoder))
    write_json(os.path.join(d, "tokenizer_config.json"), {
        "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
        "chat_template": CHATML_TEMPLATE, "errors": "replace", "model_max_length": 32768,
        "tokenizer_class": "Qwen2Tokenizer"})

    # GPT-2: the ByteLevel pre-tokenizer's own regex and a prefix space.
    d = os.path.join(OUT, "gpt2_bpe")
    write_json(os.path.join(d, "tokenizer.json"), tokenizer_json(
        bpe(lambda a, b: f"{a} {b}"), [added(n, "<|endoftext|>")],
        pre_tokenizer=dict(byte_level, add_prefix_space=True, use_regex=True),
        post_processor=dict(byte_level, trim_offsets=True), decoder=decoder))
    return n


def sentencepiece_merges(sp, vocab):
    """transformers' SentencePieceExtractor: every split of a piece into two pieces is a merge,
    ranked by the piece's score (best first), ties in vocabulary order."""
    merges = []
    for piece, piece_id in vocab.items():
        local = []
        for i in range(1, len(piece)):
            left, right = piece[:i], piece[i:]
            if left in vocab and right in vocab:
                local.append((left, right, sp.get_score(piece_id)))
        local.sort(key=lambda x: (vocab[x[0]], vocab[x[1]]))
        merges.extend(local)
    merges.sort(key=lambda x: x[2], reverse=True)
    return [f"{a} {b}" for a, b, _ in merges]


def write_llama2_hf(model_path):
    sp = spm.SentencePieceProcessor(model_file=model_path)
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    model = {"type": "BPE", "dropout": None, "unk_token": "<unk>",
             "continuing_subword_prefix": None, "end_of_word_suffix": None, "fuse_unk": True,
             "byte_fallback": True, "vocab": vocab, "merges": sentencepiece_merges(sp, vocab)}
    tokens = [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")]
    replace = {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}
    config = {
        "add_bos_token": True, "add_eos_token": False, "legacy": True,
        "bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": False,
                      "normalized": False, "rstrip": False, "single_word": False},
        "eos_token": "</s>", "unk_token": "<unk>", "pad_token": None,
        "chat_template": LLAMA2_TEMPLATE, "clean_up_tokenization_spaces": False,
        "tokenizer_class": "LlamaTokenizer"}
    d = os.path.join(OUT, "llama2_hf")
    write_json(os.path.join(d, "tokenizer.json"), tokenizer_json(
        model, tokens,
        normalizer={"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
        post_processor=template(("<s>", 1)),
        decoder={"type": "Sequence", "decoders": [
            replace, {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}))
    write_json(os.path.join(d, "tokenizer_config.json"), config)
    write_json(os.path.join(d, "special_tokens_map.json"), {
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"})
    shutil.copy(model_path, os.path.join(d, "tokenizer.model"))

    metaspace = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                 "split": False}
    d = os.path.join(OUT, "metaspace_hf")
    write_json(os.path.join(d, "tokenizer.json"), tokenizer_json(
        model, tokens, pre_tokenizer=metaspace, post_processor=template(("<s>", 1)),
        decoder={"type": "Sequence", "decoders": [{"type": "ByteFallback"}, metaspace]}))
    write_json(os.path.join(d, "tokenizer_config.json"), dict(config, legacy=False))


def main():
    corpus = read_corpus()
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "corpus.txt"), "w", encoding="utf-8") as f:
            f.write(corpus)
        sp_bpe = train_sentencepiece(tmp, os.path.join(OUT, "sp_bpe"), "bpe", [
            "--remove_extra_whitespaces=false", "--split_digits=true",
            "--allow_whitespace_only_pieces=true"])
        train_sentencepiece(tmp, os.path.join(OUT, "sp_unigram"), "unigram", [])
    write_json(os.path.join(OUT, "sp_bpe", "tokenizer_config.json"), {
        "add_bos_token": True, "add_eos_token": True, "bos_token": "<s>", "eos_token": "</s>",
        "unk_token": "<unk>", "chat_template": ALPACA_TEMPLATE})
    write_llama2_hf(sp_bpe)
    alphabet, merges = train_byte_bpe(corpus, BYTE_BPE_MERGES)
    n = write_byte_level(alphabet, merges)
    print(f"corpus: {len(corpus.encode())} bytes; byte-level BPE: {n} tokens "
          f"({len(merges)} merges); SentencePiece: {SPM_VOCAB} pieces")


if __name__ == "__main__":
    main()
