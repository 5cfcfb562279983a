"""The forward's LLM variants on the GPU (issue 25), with the simulator's names and conventions (DESIGN.md): GQA (k, v
with Hkv heads dividing Hq; query head h reads K/V head h // (Hq/Hkv), never a copy), `window=(left, right)` aligned
bottom-right like causal (−1 or None: unbounded), `alibi_slopes` (Hq,) or (B, Hq) with S ← S − slope·|p + Nk − N − c|,
`softcap` c with S ← c·tanh(S/c) before ALiBi and the mask, and packed variable-length batches (q (total_q, Hq, d),
k, v (total_k, Hkv, d), `cu_seqlens_q/k` (B + 1), as sim.api.varlen). Each argument is checked here (a one-line
InputError naming it); `Variant` gives the #defines of the variant build (gpu/kernels/variants.cuh) and its extra
kernel arguments. A call with none of them compiles and launches the plain kernel, unchanged."""

import math
from dataclasses import dataclass

import numpy as np

from gpu import device, dtypes, inputs, tiling
from sim.core.errors import InputError
from sim.machine.mask import rule

LOG2E = math.log2(math.e)
UNBOUNDED = 1 << 30  # variants.cuh's window side without a bound
NULL = np.uint64(0)  # a null device pointer, for an array the build does not read


@dataclass(frozen=True)
class Variant:
    """One call's variants, checked: GQA's group, the window, ALiBi slopes (device, (B, Hq) · log2 e), softcap c,
    and for a packed batch its cumulative lengths (device int32, B + 1 each) and its lengths (host)."""

    group: int = 1
    window: tuple[int, int] | None = None  # (left, right), −1: unbounded
    slopes: object = None
    softcap: float | None = None
    cu_seqlens_q: object = None
    cu_seqlens_k: object = None
    seqlens: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())  # a packed batch's lengths (q, k), on the host

    @property
    def plain(self) -> bool:
        """Whether the call uses no variant: the plain kernel runs."""
        return (
            self.group == 1 and self.window is None and self.slopes is None and self.softcap is None and not self.packed
        )

    @property
    def kinds(self) -> tuple[str, ...]:
        """The variants this call uses, by gpu.registry.VARIANTS' names (what a kernel must take to run it)."""
        used = {"gqa": self.group > 1, "window": self.window is not None, "alibi": self.slopes is not None,
                "softcap": self.softcap is not None, "packed": self.packed}  # fmt: skip
        return tuple(name for name, on in used.items() if on)

    @property
    def packed(self) -> bool:
        return self.cu_seqlens_q is not None

    def defines(self) -> dict[str, int]:
        """What the launcher adds to the kernel's #defines (none for a plain call)."""
        if self.plain:
            return {}
        return {"VARIANTS": 1, "VARLEN": int(self.packed), "SOFTCAP": int(self.softcap is not None),
                "ALIBI": int(self.slopes is not None)}  # fmt: skip

    def args(self, p: inputs.Problem) -> tuple:
        """The kernel's arguments after `causal` (VARIANT_PARAMS): slopes, cu_q, cu_k, left, right, c·log2 e, group,
        Hq; causal folded into the window (right ≤ 0), as sim.machine.mask.rule does."""
        if self.plain:
            return ()
        band = rule(p.n, p.nk, p.causal, self.window)
        left, right = (UNBOUNDED if side is None else side for side in (band.left, band.right))
        cap = np.float32(self.softcap * LOG2E if self.softcap is not None else 1.0)
        ptr = lambda x: NULL if x is None else x  # noqa: E731
        return (ptr(self.slopes), ptr(self.cu_seqlens_q), ptr(self.cu_seqlens_k), np.int32(left), np.int32(right),
                cap, np.int32(self.group), np.int32(p.heads))  # fmt: skip


def check(p: inputs.Problem, kv_heads: int, *, window=None, alibi_slopes=None, softcap=None, packed=None) -> Variant:
    """The variant arguments of a call whose q has p.heads heads and k, v kv_heads; `packed` = (cu_q, cu_k) on the
    device and the lengths (q, k) on the host, already checked (`check_packed`)."""
    if p.heads % kv_heads:
        raise InputError(f"k, v: {kv_heads} heads must divide q's {p.heads} (GQA: query head h reads K/V head h // g)")
    cupy = device.require()
    slopes = check_alibi(alibi_slopes, p.batch, p.heads)
    cu_q, cu_k, lengths = packed or (None, None, ((), ()))
    return Variant(
        group=p.heads // kv_heads, window=check_window(window), softcap=check_softcap(softcap),
        slopes=None if slopes is None else cupy.asarray(slopes * LOG2E, dtype=cupy.float32),
        cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, seqlens=lengths,
    )  # fmt: skip


def check_window(window) -> tuple[int, int] | None:
    """(left, right), each an integer ≥ −1 or None (−1 and None: unbounded on that side)."""
    if window is None:
        return None
    if isinstance(window, (str, bytes)) or not hasattr(window, "__len__") or len(window) != 2:
        raise InputError(f"window: must be a pair (left, right), got {window!r}")
    sides = [-1 if w is None else w for w in window]
    if any(isinstance(w, bool) or not isinstance(w, (int, np.integer)) or not -1 <= w < UNBOUNDED for w in sides):
        raise InputError(
            f"window: each side must be an integer from −1 (−1 or None: unbounded) to 2^30, got {window!r}"
        )
    return int(sides[0]), int(sides[1])


def check_softcap(softcap) -> float | None:
    """A finite c > 0, or None."""
    if softcap is None:
        return None
    if isinstance(softcap, bool) or not isinstance(softcap, (int, float, np.integer, np.floating)):
        raise InputError(f"softcap: must be a number c > 0, got {softcap!r}")
    if not math.isfinite(softcap) or softcap <= 0 or softcap * LOG2E > 3e38:
        raise InputError(f"softcap: must be finite and > 0 (S ← c·tanh(S/c)), got {softcap!r}")
    return float(softcap)


def check_alibi(alibi_slopes, batch: int, heads: int) -> np.ndarray | None:
    """Slopes (Hq,) or (B, Hq), finite, on the host or the device: a (B, Hq) float64 host array (a copy, tiny)."""
    if alibi_slopes is None:
        return None
    try:
        host = alibi_slopes.get() if hasattr(alibi_slopes, "get") else alibi_slopes
        slopes = np.asarray(host, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise InputError(f"alibi_slopes: not an array of numbers ({e})") from None
    if slopes.shape not in ((heads,), (batch, heads)):
        raise InputError(
            f"alibi_slopes: shape {slopes.shape}; expected ({heads},) or ({batch}, {heads}), one per query head"
        )
    if not np.isfinite(slopes).all() or np.abs(slopes).max(initial=0) > 1e30:
        raise InputError("alibi_slopes: must be finite (and within float32)")
    return np.broadcast_to(slopes, (batch, heads))


def check_packed(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *, causal, scale, dtypes_allowed):
    """A packed batch: q (total_q, Hq, d), k, v (total_k, Hkv, d), C-contiguous, one dtype, one device; the
    cumulative lengths on the host (NumPy: copied to the device, the call then remembered by their values) or read
    back from the device (CuPy: B + 1 integers each, one small copy and synchronization every call).
    Returns (Problem with batch B, N and Nk the longest lengths, kv_heads, (cu_q, cu_k) int32 on the device and the
    lengths (q, k), tuples on the host)."""
    cupy = device.require()
    for arg, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, cupy.ndarray) or x.ndim != 3:
            raise InputError(f"{arg}: a packed batch takes a CuPy array shaped (total, heads, d), got {_shape(x)}")
        if dtypes.name(x.dtype) not in dtypes_allowed or x.dtype != q.dtype:
            raise InputError(f"{arg}: dtype {x.dtype}; q, k, v share one of {', '.join(dtypes_allowed)}")
        if not x.flags.c_contiguous or 0 in x.shape or x.device != q.device:
            raise InputError(f"{arg}: must be C-contiguous, non-empty and on q's device, got shape {tuple(x.shape)}")
    if k.shape != v.shape or k.shape[2] != q.shape[2]:
        raise InputError(f"k, v: shapes must be equal and end in q's d = {q.shape[2]}, got k {k.shape}, v {v.shape}")
    if not 1 <= q.shape[2] <= tiling.MAX_HEAD_DIM:
        raise InputError(f"d (head dim, q.shape[2]): must be between 1 and {tiling.MAX_HEAD_DIM}, got {q.shape[2]}")
    cq = _cu_seqlens("cu_seqlens_q", cu_seqlens_q, q.shape[0])
    ck = _cu_seqlens("cu_seqlens_k", cu_seqlens_k, k.shape[0])
    if len(cq) != len(ck):
        raise InputError(f"cu_seqlens_k: {len(ck) - 1} sequences, but cu_seqlens_q has {len(cq) - 1}; they must agree")
    n = _max_seqlen("max_seqlen_q", max_seqlen_q, cq)
    nk = _max_seqlen("max_seqlen_k", max_seqlen_k, ck)
    if (len(cq) - 1) > inputs.MAX_BATCH_HEADS or q.shape[1] > inputs.MAX_BATCH_HEADS:
        raise InputError(f"cu_seqlens_q, q: at most {inputs.MAX_BATCH_HEADS} sequences and heads")
    inputs.check_flag("causal", causal)
    scale = inputs.check_scale(scale, q.shape[2])
    p = inputs.Problem(len(cq) - 1, q.shape[1], n, nk, q.shape[2], dtypes.name(q.dtype), causal, scale)
    lengths = tuple(tuple(int(x) for x in np.diff(cu)) for cu in (cq, ck))
    cu_q, cu_k = cupy.asarray(cq, dtype=cupy.int32), cupy.asarray(ck, dtype=cupy.int32)
    if packed_key(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k):
        cupy.cuda.get_current_stream().synchronize()  # remembered by their values for any stream: copied first
    return p, k.shape[1], (cu_q, cu_k, lengths)


def packed_key(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k) -> tuple | None:
    """A packed batch's lengths as part of a key to remember a call by where they are on the host: (cu_q, cu_k) as
    tuples of ints and the two maxima, for 1-D NumPy integer arrays and maxima None or ints; () for a call without
    them; None for anything else (a CuPy array's values are read back, one copy and synchronization, and checked on
    every call)."""
    if all(x is None for x in (cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)):
        return ()  # not a packed batch
    found = []
    for cu in (cu_seqlens_q, cu_seqlens_k):
        if type(cu) is not np.ndarray or cu.ndim != 1 or cu.dtype.kind not in "iu":
            return None
        found.append(tuple(cu.tolist()))
    if any(m is not None and type(m) is not int for m in (max_seqlen_q, max_seqlen_k)):
        return None
    return (*found, max_seqlen_q, max_seqlen_k)


def _cu_seqlens(name: str, cu, total: int) -> np.ndarray:
    """Cumulative lengths: integers from 0, strictly increasing, ending at the tensor's `total` rows."""
    try:
        cu = np.asarray(cu.get() if hasattr(cu, "get") else cu)
    except (TypeError, ValueError) as e:
        raise InputError(f"{name}: not an array of integers ({e})") from None
    if cu.ndim != 1 or cu.size < 2 or not np.issubdtype(cu.dtype, np.integer):
        raise InputError(
            f"{name}: must be a 1-D array of at least 2 integers (0, then each sequence's end), got {cu!r}"
        )
    if cu[0] != 0 or (np.diff(cu) <= 0).any() or cu[-1] != total:
        raise InputError(
            f"{name}: must start at 0, increase strictly and end at the tensor's {total} rows, got {cu.tolist()}"
        )
    return cu.astype(np.int64)


def _max_seqlen(name: str, given, cu: np.ndarray) -> int:
    longest = int(np.diff(cu).max())
    if given is None:
        return longest
    if isinstance(given, bool) or not isinstance(given, (int, np.integer)) or not longest <= given <= cu[-1]:
        raise InputError(
            f"{name}: must be an integer from the longest sequence ({longest}) to the total ({cu[-1]}), got {given!r}"
        )
    return int(given)


def _shape(x) -> str:
    return f"shape {tuple(x.shape)}" if hasattr(x, "shape") else type(x).__name__
