#!/usr/bin/env python3
"""A word-level corpus from the King James Bible of Debian's bible-kjv package (`bible` on PATH), in the
layout `data.dataset: text` reads ({train,valid,test}.txt). Lowercased; words (letters, an inner
apostrophe kept: "father's") and each punctuation mark are tokens, separated by spaces; one verse per
line. Verses 18 and 19 of every 20 go to valid and test; of the rest, the first --train-verses train
(0: all of them, 27,961 verses). With --raw, each verse is its text as printed (case, punctuation and
spacing kept), for a tokenizer that learns its own units (`data.tokenizer: bpe`).

    python3 tools/bench/kjv_corpus.py data/kjv [--train-verses 7400]
    python3 tools/bench/kjv_corpus.py data/kjv_raw --raw --train-verses 0    # recipes/gpt_kjv_bpe.yaml
"""
import argparse
import os
import re
import subprocess

TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)*|[^\sa-z]")
VERSE = re.compile(r"^\s+(\d+) (.*)$")


def verses(text):
    """The verses of `bible`'s output: a numbered line and its continuation lines, up to the next
    numbered line or a blank line (which comes before each "Book N" chapter heading)."""
    current = None
    for line in text.splitlines():
        m = VERSE.match(line)
        if m:
            if current is not None:
                yield current
            current = m.group(2)
        elif line.strip() and current is not None:
            current += " " + line.strip()
        else:
            if current is not None:
                yield current
            current = None
    if current is not None:
        yield current


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--train-verses", type=int, default=7400)
    p.add_argument("--raw", action="store_true", help="the verses as printed, not lowercased word tokens")
    a = p.parse_args()
    text = subprocess.run(["bible", "gen1:1-rev22:21"], capture_output=True, text=True, check=True).stdout
    split = {"train": [], "valid": [], "test": []}
    for i, v in enumerate(verses(text)):
        line = " ".join(v.split()) if a.raw else " ".join(TOKEN.findall(v.lower()))
        split["valid" if i % 20 == 18 else "test" if i % 20 == 19 else "train"].append(line)
    if a.train_verses > 0:
        split["train"] = split["train"][: a.train_verses]
    os.makedirs(a.out, exist_ok=True)
    for name, lines in split.items():
        with open(os.path.join(a.out, name + ".txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
        print(f"{name}: {len(lines)} verses, {sum(len(l.split()) for l in lines)} tokens")


if __name__ == "__main__":
    main()
