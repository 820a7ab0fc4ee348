#!/usr/bin/python3
"""Writes tests/fixtures/text/expected_sp.json: what SentencePiece itself (Debian's
python3-sentencepiece) makes of test_strings.json with the tokenizer.model fixtures.

  ids_raw   sp.encode(text): the model alone, special-token text not parsed
  pieces    the same as piece strings
  ids       what zenith's encode(text) must give: the text split at the control/unknown pieces'
            strings (<unk>, <s>, </s>) written in it (as transformers' LlamaTokenizer does), each
            other part encoded by sp.encode, bos/eos added as tokenizer_config.json says
            (add_bos_token, default true; add_eos_token, default false)
  decoded   sp.decode(ids)
Plus random_decode: sp.decode of random id sequences (byte, control and unknown pieces included).
Run by regenerate.sh; the C++ tests only read the output.
"""
import json
import os
import random

import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "tests", "fixtures", "text")
NAMES = ["sp_bpe", "sp_unigram"]


def split_special(text, specials):
    """Splits text at the leftmost, then longest, occurrence of any special string."""
    parts, start, i = [], 0, 0
    while i < len(text):
        match = max((s for s in specials if text.startswith(s, i)), key=len, default=None)
        if match is None:
            i += 1
            continue
        parts.append((text[start:i], False))
        parts.append((match, True))
        i += len(match)
        start = i
    parts.append((text[start:], False))
    return [(p, special) for p, special in parts if p]


def main():
    with open(os.path.join(HERE, "test_strings.json"), encoding="utf-8") as f:
        strings = json.load(f)
    out = {"generator": f"python3-sentencepiece {spm.__version__} (scripts/tokenizer_fixtures)"}
    for name in NAMES:
        d = os.path.join(FIXTURES, name)
        sp = spm.SentencePieceProcessor(model_file=os.path.join(d, "tokenizer.model"))
        config_path = os.path.join(d, "tokenizer_config.json")
        config = {}
        if os.path.exists(config_path):
            with open(config_path, encoding="utf-8") as f:
                config = json.load(f)
        add_bos = config.get("add_bos_token", True)
        add_eos = config.get("add_eos_token", False)
        specials = [sp.id_to_piece(i) for i in range(sp.get_piece_size())
                    if sp.is_control(i) or sp.is_unknown(i)]
        cases = []
        for text in strings:
            ids = [sp.bos_id()] if add_bos else []
            for part, special in split_special(text, specials):
                ids += [sp.piece_to_id(part)] if special else sp.encode(part)
            ids += [sp.eos_id()] if add_eos else []
            cases.append({"text": text, "ids": ids, "ids_raw": sp.encode(text),
                          "pieces": sp.encode(text, out_type=str), "decoded": sp.decode(ids)})
        rng = random.Random(1234)
        random_decode = []
        for _ in range(30):
            ids = [rng.randrange(sp.get_piece_size()) for _ in range(rng.randint(1, 12))]
            # Some sequences start with control pieces and spaces: the first-piece space rule.
            if rng.random() < 0.3:
                ids = [sp.bos_id(), sp.piece_to_id("▁")] + ids
            random_decode.append({"ids": ids, "text": sp.decode(ids)})
        out[name] = {"vocab_size": sp.get_piece_size(), "bos_id": sp.bos_id(),
                     "eos_id": sp.eos_id(), "unk_id": sp.unk_id(), "cases": cases,
                     "random_decode": random_decode}
    path = os.path.join(FIXTURES, "expected_sp.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
