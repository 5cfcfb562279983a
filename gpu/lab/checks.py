"""Correctness checks of the kernels against float64, by the FlashAttention project's own criterion:
max|x − x_ref| ≤ 2·max|x_standard − x_ref| + 1e-3, x_standard from the fp16/bf16 standard attention (S, P, dP, dS
rounded to the storage dtype), for the output o and for each of dq, dk, dv; plus the log-sum-exp and no output
element left unwritten (outputs are filled with NaN before each launch).

Tolerances where the criterion has no low-precision baseline, and why:
  LSE_ATOL, LSE_RTOL  lse is float32 statistics (S accumulates in fp32, ex2.approx is good to ~2⁻²², ℓ sums
                      ≤ 4224 terms): |Δlse| stays near 1e-5; 1e-3 + 1e-4·|lse| still catches a wrong scale or a
                      missed block (errors of order 0.1 or more).
  FP32_ATOL           rung 1 on float32 storage: float32 dot products of d ≤ 128 terms and sums of ≤ 1024 terms
                      of size ≤ 1 stay below 1e-5; 1e-4 leaves room.
  FP32_RTOL           rung 4 on float32 storage: gradients grow with N (dv sums N terms), so the bound is relative
                      to max|g_ref|: float32 accumulation of ≤ 1024-term sums, 1e-4 of the largest gradient.
"""

from dataclasses import dataclass

from gpu import device, dtypes
from gpu.backward import flash_attention_backward
from gpu.flash import flash_attention
from gpu.reference import attention_backward_ref, attention_ref
from gpu.standard import standard_attention, standard_attention_backward

LSE_ATOL, LSE_RTOL = 1e-3, 1e-4
FP32_ATOL = 1e-4
FP32_RTOL = 1e-4


def random_qkv(batch, heads, n, nk, d, dtype: str, seed: int = 0):
    """q, k, v of standard-normal values rounded to `dtype` (never zeros: they hide unwritten outputs)."""
    cupy = device.require()
    rng = cupy.random.default_rng(seed)
    shapes = ((batch, heads, n, d), (batch, heads, nk, d), (batch, heads, nk, d))
    return tuple(dtypes.from_float32(rng.standard_normal(s, dtype=cupy.float32), dtype) for s in shapes)


def random_like(x, seed: int):
    """Standard-normal values shaped and typed like `x` (the upstream gradient dO)."""
    cupy = device.require()
    values = cupy.random.default_rng(seed).standard_normal(x.shape, dtype=cupy.float32)
    return dtypes.from_float32(values, dtypes.name(x.dtype))


def max_error(x, ref) -> float:
    """max |x − ref| in float64, ∞ if x holds a NaN."""
    cupy = device.require()
    return float(cupy.nan_to_num(cupy.abs(dtypes.to_float32(x).astype(cupy.float64) - ref), nan=cupy.inf).max())


def _unwritten(*arrays) -> int:
    cupy = device.require()
    return sum(int(cupy.isnan(dtypes.to_float32(x)).sum()) for x in arrays)


@dataclass(frozen=True)
class Check:
    """One forward kernel's output against the float64 reference (and the low-precision standard attention's)."""

    err: float  # max |o − ref|
    bound: float  # 2 · max |o_standard − ref| + 1e-3 (fp32: FP32_ATOL)
    lse_err: float  # max |lse − lse_ref| over rows that see a key
    lse_ok: bool  # within LSE_ATOL + LSE_RTOL·|lse_ref|, and −∞ exactly where lse_ref is −∞
    unwritten: int  # output elements still holding the NaN poison

    @property
    def ok(self) -> bool:
        return self.err <= self.bound and self.lse_ok and self.unwritten == 0

    def describe(self) -> str:
        """'max|o − ref| 1.2e-04/2.6e-03, lse off by 3.1e-06 (within)', and the unwritten elements if any."""
        lse = f"lse off by {self.lse_err:.1e} ({'within' if self.lse_ok else 'beyond'} its tolerance)"
        return f"max|o − ref| {self.err:.2e}/{self.bound:.2e}, {lse}" + (
            f", {self.unwritten} unwritten" if self.unwritten else ""
        )


def check(q, k, v, *, causal=False, kernel=None, tiles=None) -> Check:
    """Run a forward kernel on poisoned outputs and judge it by FlashAttention's criterion against float64."""
    cupy = device.require()
    o, lse = flash_attention(q, k, v, causal=causal, return_lse=True, kernel=kernel, tiles=tiles, poison=True)
    o_ref, lse_ref = attention_ref(q, k, v, causal=causal)
    if dtypes.name(q.dtype) == "float32":
        bound = FP32_ATOL
    else:
        bound = 2 * max_error(standard_attention(q, k, v, causal=causal), o_ref) + 1e-3
    seen = cupy.isfinite(lse_ref)
    diff = cupy.where(seen, cupy.abs(lse.astype(cupy.float64) - lse_ref), 0.0)
    lse_err = float(cupy.nan_to_num(diff, nan=cupy.inf).max())
    lse_ok = bool((diff <= LSE_ATOL + LSE_RTOL * cupy.abs(cupy.where(seen, lse_ref, 0.0))).all()) and bool(
        (cupy.isneginf(lse) == ~seen).all()
    )
    return Check(max_error(o, o_ref), bound, lse_err, lse_ok, _unwritten(o, lse))


@dataclass(frozen=True)
class BackwardCheck:
    """dq, dk, dv of a backward kernel against float64 (each by the same criterion as the forward's o)."""

    errs: tuple[float, float, float]  # max |g − g_ref| for dq, dk, dv
    bounds: tuple[float, float, float]  # 2 · max |g_standard − g_ref| + 1e-3 (fp32: FP32_RTOL · max|g_ref|)
    unwritten: int

    @property
    def ok(self) -> bool:
        return self.unwritten == 0 and all(e <= b for e, b in zip(self.errs, self.bounds, strict=True))

    def describe(self) -> str:
        parts = [f"{g} {e:.2e}/{b:.2e}" for g, e, b in zip(("dq", "dk", "dv"), self.errs, self.bounds, strict=True)]
        return ", ".join(parts) + (f", {self.unwritten} unwritten" if self.unwritten else "")


def check_backward(q, k, v, *, causal=False, kernel=None, tiles=None, seed=0, deterministic=False) -> BackwardCheck:
    """The forward (rung 1 for float32, else the default) then the backward kernel on poisoned outputs, against float64."""
    cupy = device.require()
    fp32 = dtypes.name(q.dtype) == "float32"
    o, lse = flash_attention(q, k, v, causal=causal, return_lse=True, kernel=1 if fp32 else None)
    do = random_like(q, seed)
    grads = flash_attention_backward(
        q, k, v, o, lse, do, causal=causal, kernel=kernel, tiles=tiles, poison=True, deterministic=deterministic
    )
    refs = attention_backward_ref(q, k, v, do, causal=causal)
    if fp32:
        bounds = tuple(FP32_RTOL * max(1.0, float(cupy.abs(r).max())) for r in refs)
    else:
        _, probs = standard_attention(q, k, v, causal=causal, return_probs=True)
        standard = standard_attention_backward(q, k, v, probs, do)
        bounds = tuple(2 * max_error(s, r) + 1e-3 for s, r in zip(standard, refs, strict=True))
    errs = tuple(max_error(g, r) for g, r in zip(grads, refs, strict=True))
    return BackwardCheck(errs, bounds, _unwritten(*grads))
