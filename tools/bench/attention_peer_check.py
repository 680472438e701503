#!/usr/bin/env python3
"""Accuracy of octet's attention against PyTorch's on the same inputs: the file octet_bench_attention
--save writes (q, k, v, r, octet's output y and the gradients dq, dk, dv of sum(y * r)) is run
through torch.nn.functional.scaled_dot_product_attention in the inputs' dtype and in float64; each
result's distance to the float64 one is printed as the largest error over the largest |value|,
and the mean error over the mean |value|, for octet and PyTorch side by side.
  build/tools/bench/octet_bench_attention --dtype bf16 --lengths 256 --batch 2 --heads 6 --save /tmp/a.safetensors
  python3 tools/bench/attention_peer_check.py /tmp/a.safetensors
"""
import argparse

import torch
import torch.nn.functional as F
from safetensors.torch import load_file


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    t = load_file(a.file)

    def run(dtype):
        q, k, v = (t[n].to(dtype).clone().requires_grad_(True) for n in "qkv")
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        (y * t["r"].to(dtype)).sum().backward()
        return y, q.grad, k.grad, v.grad

    ref = run(torch.float64)
    peer = run(t["q"].dtype)
    ours = (t["y"], t["dq"], t["dk"], t["dv"])
    print(f"pytorch {torch.__version__}, inputs {t['q'].dtype} {tuple(t['q'].shape)}, causal")
    print("| tensor | PyTorch max err / max | octet max err / max | PyTorch mean err / mean | octet mean err / mean |")
    print("|---|---:|---:|---:|---:|")
    for name, r, p, o in zip(["out", "dq", "dk", "dv"], ref, peer, ours):
        scale, mean = r.abs().max().item(), r.abs().mean().item()
        err = [((x.double() - r).abs().max().item() / scale, (x.double() - r).abs().mean().item() / mean) for x in (p, o)]
        print(f"| {name} | {err[0][0]:.2e} | {err[1][0]:.2e} | {err[0][1]:.2e} | {err[1][1]:.2e} |")


if __name__ == "__main__":
    main()
