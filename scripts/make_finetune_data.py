#!/usr/bin/python3
"""Fine-tuning data from real English text that every Debian system ships: the GNU GPL v3
(/usr/share/common-licenses/GPL-3, package base-files, 5644 words).

Writes examples/llm/finetune/{train,eval}.jsonl: the text split into sentences; each sentence of
8 words or more becomes one record, in the formats `zenith finetune` reads, in turn:
  Alpaca  {"instruction": "Continue this sentence of the GNU GPL.", "input": first half,
           "output": second half}
  chat    {"messages": [{"role": "user", "content": "Finish: " + first half},
                        {"role": "assistant", "content": second half}]}
  text    {"text": the sentence}
Every tenth sentence is held out for eval.jsonl (the same formats).

  /usr/bin/python3 scripts/make_finetune_data.py [--source FILE] [--out DIR]
"""
import argparse
import json
import os
import re


def sentences(text):
    text = re.sub(r"\s+", " ", text)
    for s in re.split(r"(?<=[.;:])\s+", text):
        words = s.split()
        if len(words) >= 8 and len(words) <= 60:
            yield words


def record(i, words):
    half = len(words) // 2
    first, second = " ".join(words[:half]), " ".join(words[half:])
    kind = i % 3
    if kind == 0:
        return {"instruction": "Continue this sentence of the GNU GPL.", "input": first,
                "output": second}
    if kind == 1:
        return {"messages": [{"role": "user", "content": "Finish: " + first},
                             {"role": "assistant", "content": second}]}
    return {"text": " ".join(words)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", default="/usr/share/common-licenses/GPL-3")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..",
                                                      "examples", "llm", "finetune"))
    args = parser.parse_args()
    with open(args.source, encoding="utf-8") as f:
        all_sentences = list(sentences(f.read()))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "train.jsonl"), "w") as train, \
            open(os.path.join(args.out, "eval.jsonl"), "w") as held_out:
        for i, words in enumerate(all_sentences):
            out = held_out if i % 10 == 9 else train
            out.write(json.dumps(record(i, words)) + "\n")


if __name__ == "__main__":
    main()
