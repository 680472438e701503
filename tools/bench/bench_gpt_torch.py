#!/usr/bin/env python3
"""PyTorch's step of the GPT that octet_bench_gpt times (models/gpt.h's layout, as nanoGPT: token
and position embeddings, pre-LayerNorm blocks of causal SDPA attention and a GELU MLP, a tied
lm_head; --dropout P as nanoGPT places it: after the embeddings, on the attention probabilities and
after each block's two projections): forward, cross-entropy, backward and an AdamW step, f32, on
random tokens. Prints
  RESULT,tokens_per_s,step_ms,peak_mib
(peak_mib: the GPU's max_memory_allocated, or the process's peak resident size on the CPU).
  python3 tools/bench/bench_gpt_torch.py --device cpu --layers 6 --width 384 --heads 6 --context 256 --batch 16
"""
import argparse
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, heads, dropout=0.0):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.ln_1, self.ln_2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.c_attn, self.c_proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.c_fc, self.c_proj2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(self, x, cache=None):
        """cache: None (training), or a list holding this block's keys and values so far (decoding,
        bench_decode_torch.py): the new ones are appended by concatenation."""
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if cache is not None:
            if cache:
                k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
            cache[:] = [k, v]
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1, dropout_p=p).transpose(1, 2).reshape(b, t, c)
        x = x + F.dropout(self.c_proj(y), p)
        return x + F.dropout(self.c_proj2(F.gelu(self.c_fc(self.ln_2(x)))), p)


class Gpt(nn.Module):
    def __init__(self, vocab, context, layers, width, heads, dropout=0.0):
        super().__init__()
        self.dropout = dropout
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.h = nn.ModuleList([Block(width, heads, dropout) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)

    def forward(self, ids, caches=None, start=0):
        """caches: None, or one list per block (see Block); start: the position of ids' first token."""
        x = self.wte(ids) + self.wpe(torch.arange(start, start + ids.shape[1], device=ids.device))
        x = F.dropout(x, self.dropout if self.training else 0.0)
        for i, b in enumerate(self.h):
            x = b(x, None if caches is None else caches[i])
        return self.ln_f(x) @ self.wte.weight.t()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--width", type=int, default=384)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                    help="bf16: forward and loss under torch.autocast(bfloat16)")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    torch.manual_seed(0)
    model = Gpt(a.vocab, a.context, a.layers, a.width, a.heads, a.dropout).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    ids = torch.randint(0, a.vocab, (a.batch, a.context + 1), device=dev)
    x, y = ids[:, :-1], ids[:, 1:]

    def step():
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            loss = F.cross_entropy(model(x).reshape(-1, a.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    print(f"pytorch {torch.__version__}, {torch.get_num_threads()} threads"
          + (", bf16 autocast" if a.precision == "bf16" else ""))
    step()
    sync()
    best = float("inf")
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        sync()
        best = min(best, time.perf_counter() - t0)
    peak = (torch.cuda.max_memory_allocated() / 2**20 if dev.type == "cuda"
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(f"RESULT,{a.batch * a.context / best:.1f},{best * 1e3:.2f},{peak:.0f}")


if __name__ == "__main__":
    main()
