"""Argument checks for the GPU entry points: one-line errors that name the argument and what is allowed."""

import math
from dataclasses import dataclass, field

from gpu import device, dtypes, tiling
from sim.core.errors import InputError

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


def check(q, k, v, *, causal, scale, dtypes_allowed, finite=False, gqa=False) -> Problem:
    """Validate q, k, v (CuPy, (batch, heads, N, d), C-contiguous, one dtype; and finite, if `finite`); with `gqa`,
    k and v may have fewer heads than q (gpu.variants checks that they divide q's)."""
    for arg, x in (("q", q), ("k", k), ("v", v)):
        check_array(arg, x, q, dtypes_allowed)
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise InputError(f"k, v: dtypes must equal q's ({q.dtype}), got k {k.dtype}, v {v.dtype}")
    batch, heads, n, d = q.shape
    if k.shape != v.shape:
        raise InputError(f"k, v: shapes must be equal, got k {tuple(k.shape)}, v {tuple(v.shape)}")
    if k.shape[0] != batch or k.shape[3] != d or not (k.shape[1] == heads or (gqa and k.shape[1] <= heads)):
        kv_heads = "Hkv ≤ " + str(heads) if gqa else heads
        raise InputError(
            f"k: expected shape ({batch}, {kv_heads}, Nk, {d}) to match q {tuple(q.shape)}, got {tuple(k.shape)}"
        )
    if not 1 <= d <= tiling.MAX_HEAD_DIM:
        raise InputError(f"d (head dim, q.shape[3]): must be between 1 and {tiling.MAX_HEAD_DIM}, got {d}")
    if batch * heads > MAX_BATCH_HEADS:
        raise InputError(f"batch · heads: at most {MAX_BATCH_HEADS}, got {batch * heads}")
    check_flag("causal", causal)
    problem = Problem(batch, heads, n, k.shape[2], d, dtypes.name(q.dtype), causal, check_scale(scale, d))
    if finite:
        check_finite(problem.dtype, q=q, k=k, v=v)
    return problem


def check_scale(scale, d: int) -> float:
    """τ: a positive finite number, 1/sqrt(d) by default."""
    if scale is None:
        return 1.0 / math.sqrt(d)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
        raise InputError(f"scale: expected a positive finite number (default 1/sqrt(d)), got {scale!r}")
    return float(scale)


def check_backward(p: Problem, q, o, lse, do, *, finite=False) -> None:
    """Validate the backward pass's o and do (shaped and typed like q) and lse (float32, (batch, heads, N))."""
    check_like_q(p, q, finite=finite, o=o, do=do)
    check_array("lse", lse, q, ("float32",), ndim=3)
    if lse.shape != q.shape[:3]:
        raise InputError(f"lse: expected shape {tuple(q.shape[:3])} (batch, heads, N), got {tuple(lse.shape)}")


def check_like_q(p: Problem, q, *, finite=False, **arrays) -> None:
    """Validate arrays that share q's shape and dtype (o, do); finite too, if `finite`."""
    for arg, x in arrays.items():
        check_array(arg, x, q, (p.dtype,))
        if x.shape != q.shape:
            raise InputError(f"{arg}: expected q's shape {tuple(q.shape)}, got {tuple(x.shape)}")
    if finite:
        check_finite(p.dtype, **arrays)


def check_array(arg: str, x, q, dtypes_allowed, ndim: int = 4, shape: str | None = None) -> None:
    """x a C-contiguous CuPy array of `ndim` dimensions (laid out as `shape` says), none empty, of an allowed dtype,
    on q's GPU; else InputError naming `arg`."""
    cupy = device.require()
    shape = shape or ("(batch, heads, N, d)" if ndim == 4 else "(batch, heads, N)")
    if not isinstance(x, cupy.ndarray):
        raise InputError(f"{arg}: expected a CuPy array shaped {shape}, got {type(x).__module__}.{type(x).__name__}")
    if x.ndim != ndim:
        raise InputError(f"{arg}: expected {ndim} dimensions {shape}, got shape {tuple(x.shape)}")
    if dtypes.name(x.dtype) not in dtypes_allowed:
        raise InputError(f"{arg}: dtype {x.dtype} is not supported here; allowed: {', '.join(dtypes_allowed)}")
    if not x.flags.c_contiguous:
        raise InputError(f"{arg}: must be C-contiguous (call cupy.ascontiguousarray first)")
    if 0 in x.shape:
        raise InputError(f"{arg}: every dimension must be at least 1, got shape {tuple(x.shape)}")
    if x.device != q.device:
        raise InputError(f"{arg}: is on device {x.device.id}, q on device {q.device.id}; all must be on one GPU")


def signature(*arrays) -> tuple | None:
    """What the checks of an array read, as a key to remember a call by: (shape, strides, dtype, device) of each
    array, or None where one is not exactly a CuPy array (the checks then run and say what is wrong). Two arrays of
    one signature pass or fail every check here alike: the number of dimensions and the empty ones follow from the
    shape, C-contiguity from the shape, strides and dtype. Their addresses are not in it (rows_of and the tensor
    maps read those per call)."""
    ndarray = device.require().ndarray
    if any(type(x) is not ndarray for x in arrays):
        return None
    return tuple((x.shape, x.strides, x.dtype, x.device.id) for x in arrays)


def plain_options(causal, scale, kernel, tiles) -> tuple | None:
    """(causal, scale, kernel, tiles) as part of a key to remember a call by, or None where one of them is not of
    the exact type a valid call passes (a bool; None or an int or float; None or a rung's number; None or Tiles):
    such a call is checked in full. A NaN scale never equals itself, so never finds a remembered call."""
    if type(causal) is not bool or (scale is not None and type(scale) not in (int, float)):
        return None
    if (kernel is not None and type(kernel) is not int) or (tiles is not None and type(tiles) is not tiling.Tiles):
        return None
    return causal, scale, kernel, tiles


CALLS_LIMIT = 256  # calls remembered, by their arguments' signatures and options; then forgotten all at once


@dataclass(frozen=True)
class Call:
    """A checked call of flash_attention or flash_attention_backward: what every call with its key shares (Problem,
    Variant, kernel), and its plans by what they depend on beyond the key (the forward's stream, whose copy of the
    walk it holds; the backward's FUSED_PLANES, which tests lower)."""

    p: Problem
    variant: object  # gpu.variants.Variant
    spec: object  # gpu.registry.KernelSpec
    plans: dict = field(default_factory=dict)

    def plan(self, at, make, *args):
        """The plan at `at` (a stream, or FUSED_PLANES): make(*args), made once for each."""
        found = self.plans.get(at)
        if found is None:
            found = make(*args)
            remember(self.plans, at, found, 16)
        return found


def remember(memo: dict, key, value, limit: int = CALLS_LIMIT) -> None:
    """memo[key] = value, all of memo forgotten first once it holds `limit` keys."""
    if len(memo) >= limit:
        memo.clear()
    memo[key] = value


def check_flag(arg: str, value) -> bool:
    """`value` if it is True or False, else InputError."""
    if not isinstance(value, bool):
        raise InputError(f"{arg}: expected True or False, got {value!r}")
    return value


def check_finite(dtype: str, **arrays) -> None:
    """Refuse NaN and ±Inf (an all-ones exponent) in the arrays: one pass over them and one synchronization.

    Opt-in (check_finite=True) for debugging: without it, NaN flows through the kernels as through attention."""
    cupy = device.require()
    bits, exponent = EXPONENT_BITS[dtype]
    bad = cupy.stack([cupy.any((x.view(bits) & exponent) == exponent) for x in arrays.values()]).get()
    for arg, nonfinite in zip(arrays, bad, strict=True):
        if nonfinite:
            raise InputError(
                f"{arg}: contains NaN or Inf; inputs must be finite (check_finite=True asked for this check)"
            )
