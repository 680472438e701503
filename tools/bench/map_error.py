#!/usr/bin/env python3
"""Block-wise quantization error of the 8-bit optimizers' maps: the reference's dynamic maps
(bitsandbytes create_dynamic_map, octet's dynamic_signed / dynamic_unsigned, read from the golden
dump in tests/quant/data) against octet's earlier maps (the upper ends of each step, built here;
octet no longer has them), on data shaped like optimizer state: normal and Student-t first
moments, their squares as second moments. Blocks of 256, nearest code (ties to the lower), in
float32.
  python3 tools/bench/map_error.py          # needs numpy
"""
import os
import struct

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
golden = os.path.join(here, "..", "..", "tests", "quant", "data", "bnb_dynamic_maps.txt")
ref = [struct.unpack("<f", struct.pack("<I", int(l.split()[0], 16)))[0] for l in open(golden) if not l.startswith("#")]
ref_signed = np.array(ref[:256], dtype=np.float32)
ref_unsigned = np.array(ref[256:], dtype=np.float32)


def upper_decades(top_bits, max_k):
    out = []
    for k in range(max_k + 1):
        steps = 2 ** (top_bits - k)
        out += [10.0 ** -k * (0.1 + 0.9 * (f + 1) / steps) for f in range(steps)]
    return out


m = upper_decades(6, 6)
upper_signed = np.sort(np.array(m + [-x for x in m] + [0.0, 0.0], dtype=np.float32))
upper_unsigned = np.sort(np.array(upper_decades(7, 6) + [0.0, 1e-7], dtype=np.float32))


def roundtrip(x, table, block=256):
    x = x.astype(np.float32)
    out = np.empty_like(x)
    for b in range(0, len(x), block):
        blk = x[b:b + block]
        a = np.abs(blk).max()
        v = blk / a
        hi = np.clip(np.searchsorted(table, v), 1, 255)
        lo = hi - 1
        pick = np.where(np.abs(v - table[lo]) <= np.abs(v - table[hi]), lo, hi)
        out[b:b + block] = table[pick] * a
    return out


rng = np.random.default_rng(0)
n = 1 << 20
cases = [("normal (a first moment)", rng.standard_normal(n), ref_signed, upper_signed),
         ("Student-t, 3 dof", rng.standard_t(3, n), ref_signed, upper_signed),
         ("normal squared (a second moment)", rng.standard_normal(n) ** 2, ref_unsigned, upper_unsigned),
         ("Student-t squared", rng.standard_t(3, n) ** 2, ref_unsigned, upper_unsigned)]
print("| data | map | mean abs error / mean abs | mean relative error | median relative error |")
print("|---|---|---|---|---|")
for name, x, new, old in cases:
    for label, table in (("reference (midpoints)", new), ("upper ends (earlier octet)", old)):
        e = np.abs(roundtrip(x, table) - x)
        rel = e / np.maximum(np.abs(x), 1e-30)
        print(f"| {name} | {label} | {e.mean() / np.abs(x).mean():.5f} | {rel.mean():.5f} | {np.median(rel):.5f} |")
