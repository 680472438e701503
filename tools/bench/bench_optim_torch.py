#!/usr/bin/env python3
"""PyTorch's Adam update on one device, as octet_bench_optim measures octet's: 2^LOG2N f32
parameters in one tensor, ms per update and per 1B parameters, and the bytes the update must move
over its time, counted as octet_bench_optim counts them (32-bit Adam: p, g, m, v read and p, m, v
written, 28 B per parameter; 8-bit: 16 B), against the copy bandwidth of the same device in the
same run. Rows: torch.optim.Adam with fused=True and with
foreach=True, and bitsandbytes' Adam8bit (blocks of 256) where bitsandbytes is installed.
  python3 tools/bench/bench_optim_torch.py --device cuda [--log2n 26] [--reps 5]
The GPU check (tools/scripts/gpu_check.sh) runs it beside octet_bench_optim --device cuda.
"""
import argparse
import time

import torch


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
    ap.add_argument("--device", default="cuda", help="cuda or cpu")
    ap.add_argument("--log2n", type=int, default=26)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    n = 1 << a.log2n
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    src, dst = torch.zeros(n, device=dev), torch.zeros(n, device=dev)
    copy_ms = best_ms(lambda: dst.copy_(src), a.reps, sync)
    copy_gbs = 2 * 4 * n / (copy_ms * 1e-3) / 1e9
    print(f"PyTorch {torch.__version__} optimizer update: 2^{a.log2n} = {n} f32 parameters on {name}, "
          f"best of {a.reps}")
    print(f"copy bandwidth (read+write, same run): {copy_gbs:.1f} GB/s\n")
    print("| optimizer | ms/update | ms per 1B params | state B/param | GB/s | % copy |")
    print("|---|---:|---:|---:|---:|---:|")

    def row(label, make, state_bytes, moved_bytes):
        p = torch.nn.Parameter(torch.randn(n, device=dev) * 0.01)
        p.grad = torch.randn(n, device=dev) * 1e-3
        opt = make([p])
        ms = best_ms(opt.step, a.reps, sync)
        gbs = moved_bytes * n / (ms * 1e-3) / 1e9
        print(f"| {label} | {ms:.2f} | {ms * (1e9 / n):.1f} | {state_bytes:.3f} | {gbs:.1f} | "
              f"{100 * gbs / copy_gbs:.1f}% |")
        del opt, p

    for kind in ("fused", "foreach"):
        row(f"torch Adam 32-bit ({kind})", lambda ps, k=kind: torch.optim.Adam(ps, lr=1e-3, **{k: True}), 8, 28)
    try:
        import bitsandbytes as bnb
    except ImportError:
        print("\nbitsandbytes is not installed here: no 8-bit row.")
        return
    row("bitsandbytes Adam8bit", lambda ps: bnb.optim.Adam8bit(ps, lr=1e-3), 2 + 8 / 256, 4 * 3 + 2 * 2)


if __name__ == "__main__":
    main()
