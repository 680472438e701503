#!/usr/bin/env python3
"""Writes bnb_parity.json and bnb_parity.bin: goldens of bitsandbytes' 8-bit paths on the CPU for
tests/optim/test_bnb_parity.cpp (which never runs Python).
  python3 -m pip install torch bitsandbytes && python3 tests/optim/data/make_bnb_parity.py

bnb_parity.bin holds every array back to back, little-endian (f32 or u8); bnb_parity.json names
them ({"offset": bytes, "count": elements, "dtype": "f32" | "u8"}) with the settings of each case.

quantize: F.quantize_blockwise on the CPU (the native cquantize_blockwise_cpu_fp32) of normal,
  uniform and outlier data with create_dynamic_map(signed=True) at block sizes 256..4096, and of
  |x| with create_dynamic_map(signed=False) at 256 (the optimizers' block size); "ties": one block
  with absmax 1.0 whose other elements are the exact midpoints of neighbouring map entries (those a
  float32 holds exactly), so each side's tie rule shows. bitsandbytes' CPU codes are not exact
  nearest codes: its bin search resolves a normalized value only to about 2^-16, so a value that
  close to a decision midpoint may get a neighbouring code (several codes where the map is denser
  than that, near 0). The script checks that every code it writes is the exact nearest code of
  some value within 2^-16 of the normalized input, and that dequantize_blockwise is
  code[q] * absmax, float for float; "misses" counts the codes that differ from the exact nearest
  code (octet's definition: v = x / absmax in float32, the nearest entry, the lower on a tie).

optimizers: one 8-bit step of Adam8bit, AdamW8bit, SGD8bit (momentum), RMSprop8bit, Lion8bit,
  LAMB8bit and LARS8bit with the settings of bitsandbytes' tests/test_optim.py (p = 0.1 randn,
  g = 0.01 randn; lr/betas as str2optimizers; defaults where the test has no entry), after a few
  warm-up steps: the step's inputs (p, g, state codes and absmax, the state's step count) and
  outputs (p, codes, absmax). All optimizers step from the same p and g (stored once); each one's
  state comes from its own warm-up steps from that p. On the CPU every 8-bit optimizer of
  bitsandbytes 0.50.2 runs the pure-torch fallback backends/cpu/ops.py:_optimizer_update_8bit_blockwise_cpu (block size 256:
  dequantize the whole state, update in float32 with torch ops, quantize back natively). Read
  from that source:
    adam, lamb:   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p *= 1 - lr wd (if wd > 0);
                  p -= lr / (1-b1^t) * m / (sqrt(v) / sqrt(1-b2^t) + eps).  LAMB8bit is this
                  exactly: no trust ratio (max_unorm is not implemented by the 8-bit update;
                  LAMB8bit refuses any value but 1.0). Adam8bit's weight decay is decoupled too.
    momentum, lars: g += wd p;  buf = g at t = 1, else momentum buf + g;  p -= lr buf.  LARS8bit
                  is this exactly: no trust ratio, and dampening / nesterov are ignored.
    rmsprop:      g += wd p;  v = alpha v + (1-alpha) g^2;  p -= lr g / (sqrt(v) + eps); the
                  square average is stored with the SIGNED map (qmap1 = "dynamic", every
                  Optimizer1State's); momentum is ignored; centered is refused.
    lion:         p *= 1 - lr wd;  p -= lr sign(b1 m + (1-b1) g);  m = b2 m + (1-b2) g.
"""
import json
import os

import numpy as np
import torch

import bitsandbytes
import bitsandbytes.functional as F

here = os.path.dirname(os.path.abspath(__file__))
SIGNED = F.create_dynamic_map(signed=True)
UNSIGNED = F.create_dynamic_map(signed=False)
SEARCH_RESOLUTION = 2.0**-16  # how close to a decision midpoint bitsandbytes' CPU search may err

blob = bytearray()


def put(t, dtype):
    """Appends t (flattened) to the blob; returns its descriptor."""
    a = t.detach().reshape(-1).contiguous().numpy()
    a = a.astype("<f4" if dtype == "f32" else "u1", copy=False)
    entry = {"offset": len(blob), "count": int(a.size), "dtype": dtype}
    blob.extend(a.tobytes())
    return entry


def decision_intervals(code):
    """For each code, the normalized values whose exact nearest entry it is (ties to the lower)."""
    c = code.double().numpy()
    mids = (c[1:] + c[:-1]) / 2  # exact in double for float entries
    lo = np.concatenate([[-np.inf], mids])
    hi = np.concatenate([mids, [np.inf]])
    return c, mids, lo, hi


def check_quantized(x, code, block_size, q, absmax):
    n = x.numel()
    want_absmax = torch.stack([x[i : i + block_size].abs().max() for i in range(0, n, block_size)])
    assert torch.equal(absmax, want_absmax), "absmax is not max |x| of the block"
    v = (x / absmax.repeat_interleave(block_size)[:n]).double().numpy()  # float32 division, as octet
    _, mids, lo, hi = decision_intervals(code)
    qi = q.numpy().astype(np.int64)
    off = np.maximum(0.0, np.maximum(lo[qi] - v, v - hi[qi]))
    assert off.max() <= SEARCH_RESOLUTION, f"a code farther than 2^-16 from its interval: {off.max()}"
    exact = np.searchsorted(mids, v, side="left")  # nearest, lower index on a tie
    back = F.dequantize_blockwise(q, absmax=absmax, code=code, blocksize=block_size)
    assert torch.equal(back, code[q.long()] * absmax.repeat_interleave(block_size)[:n])
    return int((exact != qi).sum())


def quantize_cases():
    torch.manual_seed(0)
    n = 4096 + 257  # a full and a partial block at every block size up to 4096
    normal = torch.randn(n)
    uniform = torch.rand(n) * 2 - 1
    outlier = torch.randn(n)
    outlier[torch.randperm(n)[: n // 200]] *= 100.0  # 0.5% of the elements 100x larger
    data = {"normal": normal, "uniform": uniform, "outlier": outlier}
    inputs = {name: put(x, "f32") for name, x in data.items()}

    # Ties: absmax 1.0, then every midpoint of neighbouring entries that float32 holds exactly.
    ties = {}
    for map_name, code in (("dynamic_signed", SIGNED), ("dynamic_unsigned", UNSIGNED)):
        c = code.double().numpy()
        mids = [(a + b) / 2 for a, b in zip(c[:-1], c[1:])]
        exact = [m for m in mids if float(np.float32(m)) == m]
        x = torch.tensor([1.0] + exact, dtype=torch.float32)
        ties[map_name] = (x, put(x, "f32"))

    cases = []

    def add(data_name, x, x_entry, map_name, code, block_size, absolute):
        x = x.abs() if absolute else x
        q, state = F.quantize_blockwise(x, code=code.clone(), blocksize=block_size)
        misses = check_quantized(x, code, block_size, q, state.absmax)
        cases.append({"data": data_name, "abs": absolute, "map": map_name, "block_size": block_size,
                      "x": x_entry, "codes": put(q, "u8"), "absmax": put(state.absmax, "f32"),
                      "misses": misses})
        print(f"quantize {data_name:8s} {map_name:16s} block {block_size:4d}: {misses} of {x.numel()} codes "
              "differ from the exact nearest code")

    for block_size in (256, 512, 1024, 2048, 4096):
        for name, x in data.items():
            add(name, x, inputs[name], "dynamic_signed", SIGNED, block_size, False)
    for name, x in data.items():
        add(name, x, inputs[name], "dynamic_unsigned", UNSIGNED, 256, True)
    for map_name, code in (("dynamic_signed", SIGNED), ("dynamic_unsigned", UNSIGNED)):
        x, entry = ties[map_name]
        add("ties", x, entry, map_name, code, 256, False)
    return cases


# name, constructor, settings (as test_optim.py's str2optimizers, else the class defaults)
OPTIMIZERS = [
    ("adam", lambda p: bitsandbytes.optim.Adam8bit(p),
     {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0}),
    ("adamw", lambda p: bitsandbytes.optim.AdamW8bit(p),
     {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 1e-2}),
    ("momentum", lambda p: bitsandbytes.optim.SGD8bit(p, 0.01, 0.9),
     {"lr": 0.01, "momentum": 0.9, "weight_decay": 0.0}),
    ("rmsprop", lambda p: bitsandbytes.optim.RMSprop8bit(p, 0.01, 0.9),
     {"lr": 0.01, "alpha": 0.9, "eps": 1e-8, "weight_decay": 0.0}),
    ("lion", lambda p: bitsandbytes.optim.Lion8bit(p),
     {"lr": 1e-4, "beta1": 0.9, "beta2": 0.99, "weight_decay": 0.0}),
    ("lamb", lambda p: bitsandbytes.optim.LAMB8bit(p),
     {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0}),
    ("lars", lambda p: bitsandbytes.optim.LARS8bit(p, 0.01, 0.9),
     {"lr": 0.01, "momentum": 0.9, "weight_decay": 0.0}),
]
STATE_NAMES = {  # octet's buffer names for bitsandbytes' state1 / state2
    "adam": ["exp_avg", "exp_avg_sq"], "adamw": ["exp_avg", "exp_avg_sq"], "lamb": ["exp_avg", "exp_avg_sq"],
    "momentum": ["momentum_buffer"], "lars": ["momentum_buffer"], "rmsprop": ["square_avg"], "lion": ["exp_avg"],
}
N = 16 * 256 + 129  # 16 full blocks of 256 and a partial one; over min_8bit_size (4096)
WARMUP = 5


def map_name_of(code):
    if torch.equal(code, SIGNED):
        return "dynamic_signed"
    assert torch.equal(code, UNSIGNED), "a map that is neither of create_dynamic_map's"
    return "dynamic_unsigned"


def optimizer_cases():
    """Every optimizer steps from the same p and g (stored once): its state comes from WARMUP
    steps along its own trajectory from p, after which p is set back to its start."""
    torch.manual_seed(1)
    p0 = torch.randn(N) * 0.1
    warmup_grads = [torch.randn(N) * 0.01 for _ in range(WARMUP)]
    g = torch.randn(N) * 0.01
    shared = {"p": put(p0, "f32"), "g": put(g, "f32")}
    cases = []
    for name, make, settings in OPTIMIZERS:
        p = torch.nn.Parameter(p0.clone())
        opt = make([p])
        for wg in warmup_grads:
            p.grad = wg.clone()
            opt.step()
        st = opt.state[p]
        keys = [("state1", "absmax1", "qmap1"), ("state2", "absmax2", "qmap2")][: len(STATE_NAMES[name])]
        assert all(st[k].dtype == torch.uint8 for k, _, _ in keys), f"{name}: state is not 8-bit"
        case = {"name": name, "bnb": type(opt).__name__, "settings": settings, "step": int(st["step"]), "states": []}
        for (codes, absmax, qmap), buffer in zip(keys, STATE_NAMES[name]):
            case["states"].append({"buffer": buffer, "map": map_name_of(st[qmap]),
                                   "codes": put(st[codes], "u8"), "absmax": put(st[absmax], "f32")})
        with torch.no_grad():
            p.copy_(p0)
        p.grad = g.clone()
        opt.step()
        case["p_out"] = put(p.data, "f32")
        for (codes, absmax, qmap), s in zip(keys, case["states"]):
            s["codes_out"] = put(st[codes], "u8")
            s["absmax_out"] = put(st[absmax], "f32")
            assert map_name_of(st[qmap]) == s["map"], "the step changed the map"
        cases.append(case)
        print(f"optimizer {name:8s} ({case['bnb']}): step {case['step'] + 1}, states {STATE_NAMES[name]}")
    return shared, cases


def main():
    meta = {"bitsandbytes": bitsandbytes.__version__, "torch": torch.__version__,
            "search_resolution": SEARCH_RESOLUTION}
    quantize = quantize_cases()
    shared, optimizers = optimizer_cases()
    doc = {"meta": meta, "quantize": quantize, "step_inputs": shared, "optimizers": optimizers}
    with open(os.path.join(here, "bnb_parity.bin"), "wb") as out:
        out.write(blob)
    with open(os.path.join(here, "bnb_parity.json"), "w") as out:
        json.dump(doc, out, indent=1)
        out.write("\n")
    print(f"{len(blob)} bytes of arrays")


if __name__ == "__main__":
    main()
