"""Argument checks for the GPU entry points: one-line errors that name the argument and what is allowed."""

import math
from dataclasses import dataclass

from gpu import device, dtypes, tiling
from sim.errors import InputError

MAX_BATCH_HEADS = 65535  # gridDim.y
EXPONENT_BITS = {"float16": ("uint16", 0x7C00), "bfloat16": ("uint16", 0x7F80), "float32": ("uint32", 0x7F800000)}


@dataclass(frozen=True)
class Problem:
    """The sizes of one attention call: (batch, heads, N, d) queries against (batch, heads, Nk, d) keys."""

    batch: int
    heads: int
    n: int
    nk: int
    d: int
    dtype: str
    causal: bool
    scale: float


def check(q, k, v, *, causal, scale, dtypes_allowed, finite=True) -> Problem:
    """Validate q, k, v (CuPy, (batch, heads, N, d), C-contiguous, one dtype, finite unless `finite` is False)."""
    cupy = device.require()
    for arg, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, cupy.ndarray):
            raise InputError(
                f"{arg}: expected a CuPy array shaped (batch, heads, N, d), got {type(x).__module__}.{type(x).__name__}"
            )
        if x.ndim != 4:
            raise InputError(f"{arg}: expected 4 dimensions (batch, heads, N, d), got shape {tuple(x.shape)}")
        if dtypes.name(x.dtype) not in dtypes_allowed:
            raise InputError(f"{arg}: dtype {x.dtype} is not supported here; allowed: {', '.join(dtypes_allowed)}")
        if not x.flags.c_contiguous:
            raise InputError(f"{arg}: must be C-contiguous (call cupy.ascontiguousarray first)")
        if 0 in x.shape:
            raise InputError(f"{arg}: every dimension must be at least 1, got shape {tuple(x.shape)}")
        if x.device != q.device:
            raise InputError(f"{arg}: is on device {x.device.id}, q on device {q.device.id}; all must be on one GPU")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise InputError(f"k, v: dtypes must equal q's ({q.dtype}), got k {k.dtype}, v {v.dtype}")
    batch, heads, n, d = q.shape
    if k.shape != v.shape:
        raise InputError(f"k, v: shapes must be equal, got k {tuple(k.shape)}, v {tuple(v.shape)}")
    if k.shape[:2] != (batch, heads) or k.shape[3] != d:
        raise InputError(
            f"k: expected shape ({batch}, {heads}, Nk, {d}) to match q {tuple(q.shape)}, got {tuple(k.shape)}"
        )
    if not 1 <= d <= tiling.MAX_HEAD_DIM:
        raise InputError(f"d (head dim, q.shape[3]): must be between 1 and {tiling.MAX_HEAD_DIM}, got {d}")
    if batch * heads > MAX_BATCH_HEADS:
        raise InputError(f"batch · heads: at most {MAX_BATCH_HEADS}, got {batch * heads}")
    if not isinstance(causal, bool):
        raise InputError(f"causal: expected True or False, got {causal!r}")
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    elif isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
        raise InputError(f"scale: expected a positive finite number (default 1/sqrt(d)), got {scale!r}")
    problem = Problem(batch, heads, n, k.shape[2], d, dtypes.name(q.dtype), causal, float(scale))
    if finite:
        check_finite(q, k, v, problem.dtype)
    return problem


def check_finite(q, k, v, dtype: str) -> None:
    """Refuse NaN and ±Inf (an all-ones exponent) in q, k, v: one pass over them and one synchronization."""
    cupy = device.require()
    bits, exponent = EXPONENT_BITS[dtype]
    bad = cupy.stack([cupy.any((x.view(bits) & exponent) == exponent) for x in (q, k, v)]).get()
    for arg, nonfinite in zip(("q", "k", "v"), bad, strict=True):
        if nonfinite:
            raise InputError(f"{arg}: contains NaN or Inf; inputs must be finite (check_finite=False skips this check)")
