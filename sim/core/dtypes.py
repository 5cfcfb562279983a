"""Storage dtypes and their sizes: the one place that says how many bytes an element takes."""

import ml_dtypes
import numpy as np

DTYPES = {"fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16), "fp32": np.dtype(np.float32)}
ACCUMULATOR = np.dtype(np.float32)  # on-chip arithmetic and the softmax statistics are float32
F = ACCUMULATOR.itemsize  # bytes of a float32 statistic (ℓ, m, L, D) or accumulator element: 4


def itemsize(dtype: str) -> int:
    """Bytes per element of a storage dtype named "fp16", "bf16" or "fp32" (the paper's s)."""
    return DTYPES[dtype].itemsize


def dtype_name(dtype) -> str:
    """ "fp16", "bf16" or "fp32" for a NumPy storage dtype."""
    for name, dt in DTYPES.items():
        if np.dtype(dtype) == dt:
            return name
    raise KeyError(dtype)
