"""The storage dtypes the GPU port accepts, and exact float32 ↔ fp16/bf16 conversion on CuPy arrays."""

import ml_dtypes
import numpy as np

from sim.core.dtypes import DTYPES

NAMES = {DTYPES["fp32"]: "float32", DTYPES["fp16"]: "float16", DTYPES["bf16"]: "bfloat16"}
BY_NAME = {name: dtype for dtype, name in NAMES.items()}
ALIASES = {
    "fp32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
    "float32": "float32",
    "float16": "float16",
    "bfloat16": "bfloat16",
}


def name(dtype) -> str | None:
    """ "float32", "float16" or "bfloat16" for a supported dtype, else None."""
    return NAMES.get(np.dtype(dtype))


def to_float32(x):
    """A float32 copy of a CuPy array of any supported dtype (bfloat16 by its bits, exactly)."""
    if name(x.dtype) == "bfloat16":
        return (x.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return x.astype(np.float32)


def from_float32(x, dtype: str):
    """`x` (float32, CuPy) rounded to nearest even in `dtype` ("float32", "float16" or "bfloat16")."""
    if dtype == "bfloat16":
        u = x.astype(np.float32).view(np.uint32)
        return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16).view(ml_dtypes.bfloat16)
    return x.astype(BY_NAME[dtype])
