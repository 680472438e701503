#!/usr/bin/env python3
"""A text corpus from Webster's 1913 dictionary as Debian's dict-gcide package installs it
(/usr/share/dictd/gcide.dict.dz, ~40 MB of English), in the layout `data.dataset: text` reads
({train,valid,test}.txt), for a tokenizer that learns its own units (`data.tokenizer: bpe`).

Each entry (the index's offset and length; entries sharing a definition counted once; the
00-database-* entries left out) becomes its paragraphs, one line each: the wrapped lines joined
with single spaces (runs of spaces too), the source tags ("[1913 Webster]", "[PJC]", ...) dropped. Entries 18 and 19 of
every 20 go to valid and test, the rest to train; --train-mb caps train (0: all, ~33 MB).

    python3 tools/bench/gcide_corpus.py data/gcide [--train-mb 0]      # recipes/gpt_gcide_bpe.yaml
"""
import argparse
import gzip
import os
import re

DICT = "/usr/share/dictd/gcide.dict.dz"
INDEX = "/usr/share/dictd/gcide.index"
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
TAG = re.compile(r"^\[[^\]]*\]$")
SOURCE = re.compile(r"\s*\[(?:1913 Webster|Webster 1913 Suppl\.|PJC|WordNet 1\.5|RP|Century Dict\.|Chambers 1881)\]")


def b64(s):
    n = 0
    for c in s:
        n = n * 64 + B64.index(c)
    return n


def entries(index_path):
    """(offset, length) of each definition, in the dictionary's order, each once."""
    seen = set()
    with open(index_path, encoding="utf-8") as f:
        for line in f:
            head, off, length = line.rstrip("\n").split("\t")[:3]
            if head.startswith("00-database") or off in seen:
                continue
            seen.add(off)
            yield b64(off), b64(length)


def paragraphs(text):
    """The entry's paragraphs, each on one line, without the source tags."""
    out, cur = [], []
    for line in text.splitlines():
        s = line.strip()
        if not s or TAG.match(s):
            if cur:
                out.append(" ".join(cur))
                cur = []
            continue
        s = " ".join(SOURCE.sub("", s).split())
        if s:
            cur.append(s)
    if cur:
        out.append(" ".join(cur))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--train-mb", type=float, default=0.0)
    a = p.parse_args()
    data = gzip.open(DICT).read()
    split = {"train": [], "valid": [], "test": []}
    size = 0
    for i, (off, length) in enumerate(sorted(entries(INDEX))):
        text = data[off : off + length].decode("utf-8", "replace")
        if text.startswith("00-database") or text.startswith("00database"):
            continue
        lines = paragraphs(text)
        name = "valid" if i % 20 == 18 else "test" if i % 20 == 19 else "train"
        if name == "train":
            if a.train_mb > 0 and size > a.train_mb * 1e6:
                continue
            size += sum(len(l) + 1 for l in lines)
        split[name].extend(lines)
    os.makedirs(a.out, exist_ok=True)
    for name, lines in split.items():
        with open(os.path.join(a.out, name + ".txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        print(f"{name}: {len(lines)} paragraphs, {sum(len(l) + 1 for l in lines) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
