"""PyTorch side of tools/bench/bench_lstm.cpp: the same LSTM language model (embedding -> dropout ->
LSTM -> dropout -> linear decoder; 1 layer x 2048 hidden, vocabulary 10000, dropout 0.5) and the
same two measurements on the CPU, f32, with the same thread count:
  - training: batch 20 x bptt 35 of synthetic ids, state carried (detached), cross-entropy,
    backward, SGD step (lr 1, no momentum);
  - batch-1 inference: one token at a time, state carried, eval mode under torch.no_grad().
`--mkldnn off` turns off PyTorch's oneDNN RNN path (torch.backends.mkldnn.enabled = False): on the
CPU it reorders the LSTM weights on every call, which dominates batch-1 inference (PyTorch 2.15:
82 ms per token against 6.4 ms for the native path at 2048 units).
Needs `pip install torch` (an optional dependency of the benchmarks only).
    python3 tools/bench/bench_lstm_torch.py --threads 2 --steps 5 --tokens 200 [--mkldnn off]
`--profile` prints torch.profiler's per-op table of the training steps instead of their times.
"""
import argparse
import time

import torch
from torch import nn


class LstmLm(nn.Module):
    def __init__(self, vocab, hidden, layers, dropout):
        super().__init__()
        self.embedding = nn.Embedding(vocab, hidden)
        self.drop = nn.Dropout(dropout)
        self.lstm = nn.LSTM(hidden, hidden, layers, batch_first=True, dropout=dropout if layers > 1 else 0.0)
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, ids, state):
        y, state = self.lstm(self.drop(self.embedding(ids)), state)
        return self.decoder(self.drop(y)), state


def zero_state(args, batch):
    return (torch.zeros(args.layers, batch, args.hidden), torch.zeros(args.layers, batch, args.hidden))


def train(lm, args):
    lm.train()
    opt = torch.optim.SGD(lm.parameters(), lr=1.0)
    g = torch.Generator().manual_seed(1)
    state = zero_state(args, args.batch)

    def step():
        nonlocal state
        ids = torch.randint(0, args.vocab, (args.batch, args.bptt), generator=g)
        targets = torch.randint(0, args.vocab, (args.batch * args.bptt,), generator=g)
        logits, state = lm(ids, state)
        state = tuple(s.detach() for s in state)
        loss = nn.functional.cross_entropy(logits.reshape(-1, args.vocab), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    step()  # warm-up
    if args.profile:  # self CPU time per op over the steps (RESULTS.md's LM-step profile)
        from torch_profile import print_profile
        print_profile(step, args.steps, f"pytorch lstm_lm train profile, {args.steps} steps, vocab {args.vocab}, "
                      f"hidden {args.hidden}, {args.threads} thread(s)")
        return
    best, total = 1e30, 0.0
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        dt = time.perf_counter() - t0
        best, total = min(best, dt), total + dt
    tokens = args.batch * args.bptt
    print(f"pytorch {torch.__version__} (mkldnn {args.mkldnn}) lstm_lm train, {args.layers} layer(s) x "
          f"{args.hidden} hidden, vocab {args.vocab}, batch {args.batch} x bptt {args.bptt}, {args.threads} "
          f"thread(s): mean {1e3 * total / args.steps:.1f} ms/step, best {1e3 * best:.1f} ms -> "
          f"{tokens * args.steps / total:.0f} tokens/s (mean), {tokens / best:.0f} tokens/s (best)")


def infer(lm, args):
    lm.eval()
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(0, args.vocab, (args.tokens + 10,), generator=g)
    state = zero_state(args, 1)
    checksum = 0.0
    with torch.no_grad():
        for i in range(args.tokens + 10):
            if i == 10:
                t0 = time.perf_counter()
            logits, state = lm(ids[i:i + 1].reshape(1, 1), state)
            checksum += logits[0, 0, 0].item()
        dt = time.perf_counter() - t0
    print(f"pytorch {torch.__version__} (mkldnn {args.mkldnn}) lstm_lm batch-1 inference, {args.layers} layer(s) "
          f"x {args.hidden} hidden, vocab {args.vocab}, {args.threads} thread(s): {args.tokens} tokens in "
          f"{dt:.2f} s -> {args.tokens / dt:.1f} tokens/s ({1e3 * dt / args.tokens:.2f} ms/token; "
          f"checksum {checksum:.3g})")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--tokens", type=int, default=200)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--vocab", type=int, default=10000)
    p.add_argument("--batch", type=int, default=20)
    p.add_argument("--bptt", type=int, default=35)
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--mkldnn", choices=["on", "off"], default="on")
    p.add_argument("--profile", action="store_true", help="print torch.profiler's per-op table of the training steps")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.backends.mkldnn.enabled = args.mkldnn == "on"
    torch.manual_seed(0)
    lm = LstmLm(args.vocab, args.hidden, args.layers, 0.5)
    train(lm, args)
    if not args.profile:
        infer(lm, args)


if __name__ == "__main__":
    main()
