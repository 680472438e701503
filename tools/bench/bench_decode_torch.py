#!/usr/bin/env python3
"""PyTorch's batch-1 decoding of the GPT that octet_bench_decode times (models/gpt.h's layout, as
nanoGPT: pre-LayerNorm blocks of SDPA attention and a GELU MLP, a tied lm_head), f32, random
weights, with a key/value cache grown by concatenation (as Hugging Face's DynamicCache): a prompt
of `context` tokens in one pass, then `tokens` tokens one at a time under torch.inference_mode.
Prints, for each context,
  RESULT,context,median_ms_per_token
  python3 tools/bench/bench_decode_torch.py --width 1024 --layers 12 --heads 16 --contexts 128,1024
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.ln_1, self.ln_2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.c_attn, self.c_proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.c_fc, self.c_proj2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(self, x, cache):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if cache:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        cache[:] = [k, v]
        y = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1).transpose(1, 2).reshape(b, t, c)
        x = x + self.c_proj(y)
        return x + self.c_proj2(F.gelu(self.c_fc(self.ln_2(x))))


class Gpt(nn.Module):
    def __init__(self, vocab, context, layers, width, heads):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.h = nn.ModuleList([Block(width, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)

    def forward(self, ids, caches, start):
        pos = torch.arange(start, start + ids.shape[1])
        x = self.wte(ids) + self.wpe(pos)
        for block, cache in zip(self.h, caches):
            x = block(x, cache)
        return self.ln_f(x) @ self.wte.weight.t()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--contexts", default="128,1024")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    contexts = [int(c) for c in a.contexts.split(",")]
    model = Gpt(a.vocab, max(contexts) + a.tokens, a.layers, a.width, a.heads).eval()
    print(f"pytorch {torch.__version__}, {torch.get_num_threads()} threads")
    with torch.inference_mode():
        for context in contexts:
            caches = [[] for _ in range(a.layers)]
            model(torch.randint(0, a.vocab, (1, context)), caches, 0)
            times = []
            for t in range(a.tokens):
                tok = torch.randint(0, a.vocab, (1, 1))
                t0 = time.perf_counter()
                logits = model(tok, caches, context + t)
                float(logits[0, 0, 0])
                times.append(time.perf_counter() - t0)
            times.sort()
            print(f"RESULT,{context},{times[len(times) // 2] * 1e3:.3f}", flush=True)


if __name__ == "__main__":
    main()
