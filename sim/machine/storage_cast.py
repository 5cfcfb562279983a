"""Rounding float32 to the storage dtype, bit for bit as NumPy's `astype` does, without NumPy's slow path: NumPy
converts a float32 that lands among fp16's subnormals (|x| < 2⁻¹⁴, e.g. most of a softmax row's probabilities) some
20× slower than any other, so those are rounded here, vectorized: an fp16 subnormal is m·2⁻²⁴ with m = rint(|x|·2²⁴)
(round half to even, as IEEE and NumPy round) and its bits are m, with the sign on top (m = 1024 is 2⁻¹⁴, the
smallest normal, whose bits are 1024 too)."""

import numpy as np

TINY = np.float32(2.0**-14)  # fp16's smallest normal
SLOW_SHARE = 0.05  # NumPy's cast: ~12 ns an element, ~300 ns a subnormal one; the detour here ~40 ns an element


def to_storage(value: np.ndarray, dtype) -> np.ndarray:
    """`value.astype(dtype)`: the same bits, faster for fp16 from float32."""
    if np.dtype(dtype) != np.float16 or value.dtype != np.float32:
        return value.astype(dtype)
    magnitude = np.abs(value)
    tiny = magnitude < TINY  # NaN is not tiny: it takes NumPy's path
    if np.count_nonzero(tiny) < SLOW_SHARE * value.size:  # a few: NumPy's path is faster than the detour
        return value.astype(np.float16)
    normal = np.where(tiny, np.float32(0), value).astype(np.float16).view(np.uint16)  # no subnormal for NumPy
    m = np.rint(np.minimum(magnitude, TINY) * np.float32(2.0**24)).astype(np.uint16)  # ≤ 1024
    subnormal = m | (np.signbit(value).astype(np.uint16) << np.uint16(15))
    return np.where(tiny, subnormal, normal).view(np.float16)
