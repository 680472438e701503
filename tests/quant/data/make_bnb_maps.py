#!/usr/bin/env python3
"""Writes bnb_dynamic_maps.txt: the quantization maps of the 8-bit optimizers' reference
implementation, bitsandbytes' create_dynamic_map(signed=True) and (signed=False), 256 float32
values each, ascending, one per line as the float's bits in hex and its value. tests/quant/
test_maps.cpp compares octet's dynamic_signed and dynamic_unsigned with them bit for bit.
  python3 -m pip install torch bitsandbytes && python3 tests/quant/data/make_bnb_maps.py
"""
import os
import struct

import bitsandbytes
from bitsandbytes.functional import create_dynamic_map

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "bnb_dynamic_maps.txt"), "w") as out:
    out.write(f"# bitsandbytes {bitsandbytes.__version__} create_dynamic_map: signed (256), then unsigned (256)\n")
    for signed in (True, False):
        for v in create_dynamic_map(signed=signed).tolist():
            bits = struct.unpack("<I", struct.pack("<f", v))[0]
            out.write(f"{bits:08x} {v:.9g}\n")
