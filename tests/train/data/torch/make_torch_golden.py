#!/usr/bin/env python3
"""Goldens for octet's PyTorch weight exchange (tests/train/test_torch_weights.cpp).

  python3 make_torch_golden.py            # writes the two files below, next to this script
  python3 make_torch_golden.py --check F  # loads octet's `export --torch` file F into torchvision
  python3 make_torch_golden.py --check-bf16 F  # the same for `export --torch --dtype bf16`

mobilenet_v2_w025.safetensors: torchvision's MobileNetV2 (width_mult 0.25, 10 classes; 251k
parameters, 314 state_dict entries) after torch.manual_seed(0) and three training-mode batches
(so the BatchNorm running statistics are not 0 and 1), written by safetensors.torch.save_file: the
file a user gets from `save_file(model.state_dict(), F)`.
mobilenet_v2_w025_io.safetensors: an input [2, 3, 32, 32] and the model's output in eval mode.

Made with torch 2.15 (CPU), torchvision 0.29.2, safetensors 0.8.0.
"""
import argparse
import os

import torch
import torchvision
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
WEIGHTS = os.path.join(HERE, "mobilenet_v2_w025.safetensors")
IO = os.path.join(HERE, "mobilenet_v2_w025_io.safetensors")


def model():
    return torchvision.models.mobilenet_v2(width_mult=0.25, num_classes=10)


def make():
    torch.manual_seed(0)
    m = model()
    m.train()
    with torch.no_grad():
        for _ in range(3):
            m(torch.randn(4, 3, 32, 32) * 2 + 0.5)
    m.eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        y = m(x)
    save_file(m.state_dict(), WEIGHTS)
    save_file({"input": x, "output": y}, IO)
    print(f"{WEIGHTS}: {len(m.state_dict())} tensors; output {y.flatten()[:4].tolist()} ...")


def check(path):
    """octet's export loads with strict=True and gives the golden output."""
    m = model()
    m.load_state_dict(load_file(path))  # strict: every key, shape and dtype
    m.eval()
    io = load_file(IO)
    with torch.no_grad():
        y = m(io["input"])
    err = (y - io["output"]).abs().max().item()
    print(f"{path}: loads into torchvision's mobilenet_v2 (strict); max |output - golden| = {err:.3g}")
    assert err < 1e-6, err


def check_bf16(path):
    """octet's bf16 export loads strictly into model.to(torch.bfloat16) and equals, bit for bit,
    the golden weights converted by torch itself."""
    m = model().to(torch.bfloat16)
    got = load_file(path)
    m.load_state_dict(got)  # strict: every key, shape and dtype
    want = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v) for k, v in load_file(WEIGHTS).items()}
    bad = [k for k in want if not torch.equal(got[k].view(torch.int16) if got[k].dtype == torch.bfloat16 else got[k],
                                              want[k].view(torch.int16) if want[k].dtype == torch.bfloat16 else want[k])]
    print(f"{path}: loads into torchvision's mobilenet_v2 in bf16 (strict); {len(want) - len(bad)}/{len(want)} "
          f"tensors equal torch's own bf16 conversion bit for bit")
    assert not bad, bad[:5]


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", metavar="FILE")
    ap.add_argument("--check-bf16", metavar="FILE")
    a = ap.parse_args()
    if a.check_bf16:
        check_bf16(a.check_bf16)
    else:
        check(a.check) if a.check else make()
