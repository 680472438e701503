#!/usr/bin/env python3
"""PyTorch's torch.nn.functional.scaled_dot_product_attention timed as octet_bench_attention times
octet's: q, k, v [B, H, T, D] (requires_grad), causal, forward alone and forward + backward of
sum(out * r) (f32, or --dtype bf16 tensors; --dropout P: attention dropout in training mode), the best of REPS after a warm-up, for each T. Prints one CSV line per T:
  RESULT,T,forward_ms,forward_backward_ms
  python3 tools/bench/bench_attention_torch.py --device cpu --lengths 256,1024 --batch 1 --heads 4 --dim 64
octet_bench_attention runs it once per round, alternating with its own timings.
"""
import argparse
import time

import torch
import torch.nn.functional as F


def best_ms(fn, reps, sync):
    fn()
    sync()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--lengths", default="256,1024,2048")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    print(f"pytorch {torch.__version__} on {torch.cuda.get_device_name(dev) if dev.type == 'cuda' else 'cpu'}, "
          f"{torch.get_num_threads()} threads")
    gen = torch.Generator(device="cpu").manual_seed(0)
    for t in (int(x) for x in a.lengths.split(",")):
        shape = (a.batch, a.heads, t, a.dim)
        dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
        q, k, v, r = (torch.randn(shape, generator=gen).to(dev, dtype) for _ in range(4))
        for x in (q, k, v):
            x.requires_grad_(True)

        def forward():
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=a.dropout)

        def forward_backward():
            (F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=a.dropout) * r).sum().backward()

        print(f"RESULT,{t},{best_ms(forward, a.reps, sync):.4f},{best_ms(forward_backward, a.reps, sync):.4f}",
              flush=True)


if __name__ == "__main__":
    main()
