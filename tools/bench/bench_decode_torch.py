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

from bench_gpt_torch import Gpt  # the same model, its blocks decoding with a cache


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
