#!/usr/bin/python3
"""Instruction data from a real English dictionary that Debian ships: WordNet 3.0's glosses
(/usr/share/wordnet, package wordnet-base).

Each chosen word becomes one Alpaca record {"instruction": "Define: WORD", "output": the gloss
of its most frequent sense (WordNet's first synset), without the quoted usage examples}. Words
are single lower-case lemmas of 3 letters or more that WordNet's sense-tagged corpus has seen;
with --corpus, only words that occur in that text (at least --min-count times), most frequent
first, so the model being fine-tuned has met them. A word's part of speech is the first of
noun, verb, adjective, adverb that has it. The first --words are kept; every tenth is held out
for eval.jsonl.

  /usr/bin/python3 scripts/make_definitions_data.py --out DIR [--corpus FILE] [--words 3000]
      [--min-count 2] [--wordnet /usr/share/wordnet]
"""
import argparse
import collections
import json
import os
import re
import sys

POS = [("noun", "noun"), ("verb", "verb"), ("adj", "adjective"), ("adv", "adverb")]


def first_senses(wordnet, pos):
    """{lemma: (synset offset of its first sense, tagged sense count)} of index.POS."""
    senses = {}
    with open(os.path.join(wordnet, "index." + pos), encoding="utf-8") as f:
        for line in f:
            if line.startswith("  "):  # the licence header
                continue
            fields = line.split()
            lemma, synsets, pointers = fields[0], int(fields[2]), int(fields[3])
            tagged = int(fields[5 + pointers])
            offsets = fields[6 + pointers:6 + pointers + synsets]
            senses[lemma] = (int(offsets[0]), tagged)
    return senses


def gloss(data_file, offset):
    """The definition part of a synset's gloss: before the first quoted example."""
    data_file.seek(offset)
    line = data_file.readline().decode("utf-8")
    text = line.split(" | ", 1)[1].strip()
    text = re.split(r';\s*"', text, maxsplit=1)[0]
    return text.strip().rstrip(";").strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--corpus", help="keep words that occur in this text, most frequent first")
    ap.add_argument("--min-count", type=int, default=2)
    ap.add_argument("--words", type=int, default=3000)
    ap.add_argument("--wordnet", default="/usr/share/wordnet")
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.wordnet, "index.noun")):
        sys.exit(f"make_definitions_data: no WordNet in {args.wordnet} "
                 "(apt-get install wordnet-base)")

    entries = {}  # word -> (pos name, offset), the first part of speech that has it
    tagged = {}
    for pos, name in POS:
        for lemma, (offset, count) in first_senses(args.wordnet, pos).items():
            if lemma in entries or not re.fullmatch(r"[a-z]{3,}", lemma) or count == 0:
                continue
            entries[lemma] = (pos, offset)
            tagged[lemma] = count

    if args.corpus:
        with open(args.corpus, encoding="utf-8", errors="replace") as f:
            counts = collections.Counter(re.findall(r"[a-z]+", f.read().lower()))
        words = [w for w, c in counts.most_common() if c >= args.min_count and w in entries]
    else:
        words = sorted(entries, key=lambda w: (-tagged[w], w))
    words = words[:args.words]

    data = {pos: open(os.path.join(args.wordnet, "data." + pos), "rb") for pos, _ in POS}
    os.makedirs(args.out, exist_ok=True)
    n_train = n_eval = 0
    with open(os.path.join(args.out, "train.jsonl"), "w") as train, \
            open(os.path.join(args.out, "eval.jsonl"), "w") as ev:
        for i, word in enumerate(words):
            pos, offset = entries[word]
            record = {"instruction": "Define: " + word, "output": gloss(data[pos], offset)}
            held_out = i % 10 == 9
            (ev if held_out else train).write(json.dumps(record) + "\n")
            n_eval += held_out
            n_train += not held_out
    for f in data.values():
        f.close()
    print(f"{n_train} train and {n_eval} eval definitions in {args.out}")


if __name__ == "__main__":
    main()
