#!/usr/bin/env python3
"""Per-op profile of one word-level LM training step in PyTorch (torch.profiler, self CPU time):
the PyTorch column of RESULTS.md's "Word-level LM step, vocabulary 31k" table. The model and step
are bench_lstm_torch.py's (embedding, LSTM, dropout, decoder, cross-entropy, SGD).
  python3 tools/bench/profile_lm_torch.py [--threads 2] [--vocab 31000] [--hidden 256]
"""
import argparse
import os
import sys

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_lstm_torch import LstmLm  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--vocab", type=int, default=31000)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--batch", type=int, default=20)
    p.add_argument("--bptt", type=int, default=35)
    p.add_argument("--steps", type=int, default=3)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    lm = LstmLm(a.vocab, a.hidden, 1, 0.5)
    lm.train()
    opt = torch.optim.SGD(lm.parameters(), lr=1.0)
    g = torch.Generator().manual_seed(1)
    state = (torch.zeros(1, a.batch, a.hidden), torch.zeros(1, a.batch, a.hidden))

    def step():
        nonlocal state
        ids = torch.randint(0, a.vocab, (a.batch, a.bptt), generator=g)
        targets = torch.randint(0, a.vocab, (a.batch * a.bptt,), generator=g)
        logits, state = lm(ids, state)
        state = tuple(s.detach() for s in state)
        loss = nn.functional.cross_entropy(logits.reshape(-1, a.vocab), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(2):  # warm-up
        step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(a.steps):
            step()
    print(f"{a.steps} steps, vocab {a.vocab}, hidden {a.hidden}, {a.threads} thread(s)")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18))


if __name__ == "__main__":
    main()
