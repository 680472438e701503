"""Writes golden.safetensors with the reference Python implementation (pip install safetensors numpy).
tests/core/test_serialization.cpp reads it back and checks every value."""
import numpy as np
from safetensors.numpy import save_file

tensors = {
    "f32": np.arange(6, dtype=np.float32).reshape(2, 3) / 4,
    "f64": np.array([1.5, -2.25], dtype=np.float64),
    "i64": np.array([[-3], [7]], dtype=np.int64),
    "u8": np.array([0, 255, 17], dtype=np.uint8),
    "scalar": np.array(3.0, dtype=np.float32),
    "empty": np.zeros((0, 4), dtype=np.int32),
}
save_file(tensors, "golden.safetensors", metadata={"format": "pt", "note": "octet golden"})
