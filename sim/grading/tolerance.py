"""How far a graded output may be from the float64 reference, and why (the storage dtype's rounding).

The bounds are those the simulator's own accuracy tests hold its listings to (README, "How exact
is it?"), with u the storage dtype's unit roundoff: float32 arithmetic gives 1e-5 of the largest
entry; an output rounded once when written adds u·|ref|; Algorithm 1's O_i, rounded each of the Tc
times it goes back to HBM, adds Tc·u·max|V|. The log-sum-exp (m + log ℓ, or L) is float32
arithmetic on float32 logits: 1e-5 of the logits' magnitude. Gradients (fp32 storage) are held to
1e-5 of the largest entry of the float64 gradient.
"""

from math import ceil

import ml_dtypes
import numpy as np

FP32_REL = 1e-5
UNIT_ROUNDOFF = {np.dtype(np.float16): 2.0**-11, np.dtype(ml_dtypes.bfloat16): 2.0**-8, np.dtype(np.float32): 0.0}


def output(algorithm: str, ref: np.ndarray, v: np.ndarray, dtype, Nk: int, Bc: int) -> np.ndarray:
    """The elementwise bound on |O − ref| for `algorithm` ("flash1" or "flash2") in storage `dtype`."""
    floor = FP32_REL * np.abs(ref).max()
    u = UNIT_ROUNDOFF[np.dtype(dtype)]
    if algorithm == "flash1":
        return np.full(ref.shape, ceil(Nk / Bc) * u * np.abs(v.astype(np.float64)).max() + floor)
    return u * np.abs(ref) + floor


def lse(ref_lse: np.ndarray) -> float:
    """The bound on |lse − ref| where a row sees some key."""
    seen = np.isfinite(ref_lse)
    return FP32_REL * max(1.0, np.abs(ref_lse[seen]).max()) if seen.any() else 0.0


def gradient(ref: np.ndarray) -> float:
    """The bound on |g − ref| for a gradient stored in fp32."""
    return FP32_REL * max(np.abs(ref).max(), np.finfo(np.float32).tiny)
