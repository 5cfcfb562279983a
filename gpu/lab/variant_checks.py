"""The forward's variants (GQA, window, ALiBi, softcap, packed batches) judged as every forward rung is (gpu.lab.checks):
max|o − o_ref| ≤ 2·max|o_standard − o_ref| + 1e-3 against float64 from the definition (sim.api.reference_variants,
NumPy on the host: it shares no code with the kernels or gpu/variants.py), o_standard being standard attention in
the storage dtype with the same variant (S and P rounded to fp16/bf16, as FlashAttention's tests build it); lse
within gpu.lab.checks' tolerance and −∞ exactly where the reference's is; no output element left unwritten."""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from gpu import device, dtypes
from gpu.flash import flash_attention
from gpu.lab.checks import LSE_ATOL, LSE_RTOL, Check, max_error
from sim.api import reference_variants

VARIANT_ARGS = ("window", "alibi_slopes", "softcap")


def host(x) -> np.ndarray:
    """A CuPy fp16/bf16 array as float64 on the host, exactly."""
    return dtypes.to_float32(x).get().astype(np.float64)


def reference(q, k, v, *, causal=False, cu_seqlens_q=None, cu_seqlens_k=None, **variant):
    """(o, lse) in float64 on the host: (B, Hq, N, d) and (B, Hq, N), or packed (total_q, Hq, d) and (total_q, Hq)."""
    q, k, v = (host(x) for x in (q, k, v))
    if cu_seqlens_q is None:
        return reference_variants.attention(q, k, v, causal=causal, **variant)
    cq, ck = np.asarray(cu_seqlens_q), np.asarray(cu_seqlens_k)
    slopes = variant.pop("alibi_slopes", None)
    if slopes is None or np.ndim(slopes) == 1:
        return reference_variants.varlen(q, k, v, cq, ck, causal=causal, alibi_slopes=slopes, **variant)
    o, lse = np.empty(q.shape), np.empty(q.shape[:-1])  # one slope row per sequence
    for b in range(len(cq) - 1):
        rows, keys = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])
        o[rows], lse[rows] = reference_variants.varlen(
            q[rows], k[keys], v[keys], [0, cq[b + 1] - cq[b]], [0, ck[b + 1] - ck[b]], causal=causal,
            alibi_slopes=slopes[b], **variant,
        )  # fmt: skip
    return o, lse


class Scores(NamedTuple):
    """Standard attention's rounded P with what its backward needs: `rnd` rounds float32 through the storage dtype;
    q, k, v in float32 (k, v repeated over the group); t = tanh(S/c) with a softcap, else None; tau the scale."""

    p: object
    t: object
    tau: np.float32
    q: object
    k: object
    v: object
    rnd: Callable


def probabilities(q, k, v, *, causal=False, window=None, alibi_slopes=None, softcap=None, scale=None) -> Scores:
    """P of standard attention in the storage dtype on the device, (B, Hq, N, Nk): S = τ q kᵀ rounded, the variant's
    lines in float32 (softcap, ALiBi, mask), S and P rounded to the storage dtype."""
    cupy = device.require()
    name = dtypes.name(q.dtype)
    rnd = lambda x: dtypes.to_float32(dtypes.from_float32(x, name))  # noqa: E731
    qf, kf, vf = (dtypes.to_float32(x) for x in (q, k, v))
    g = q.shape[1] // k.shape[1]
    kf, vf = (cupy.repeat(x, g, axis=1) for x in (kf, vf))
    n, nk, d = q.shape[2], k.shape[2], q.shape[3]
    tau = np.float32(scale or 1 / np.sqrt(d))
    s, t = rnd(qf @ kf.swapaxes(-1, -2)) * tau, None
    if softcap is not None:
        t = cupy.tanh(s / np.float32(softcap))
        s = np.float32(softcap) * t
    diagonal = cupy.arange(n)[:, None] + nk - n
    c = cupy.arange(nk)[None, :]
    if alibi_slopes is not None:
        slopes = cupy.asarray(np.broadcast_to(alibi_slopes, q.shape[:2]), dtype=cupy.float32)[..., None, None]
        s = s - slopes * cupy.abs(diagonal - c).astype(cupy.float32)
    left, right = (-1, -1) if window is None else (-1 if w is None else w for w in window)
    if causal:
        right = 0 if right == -1 else min(right, 0)
    seen = ((c <= diagonal + right) | (right == -1)) & ((c >= diagonal - left) | (left == -1))
    s = cupy.where(seen, rnd(s), -cupy.inf)
    m = s.max(axis=-1, keepdims=True)
    e = cupy.exp(s - cupy.where(cupy.isinf(m), 0, m))
    ell = e.sum(axis=-1, keepdims=True)
    p = rnd(cupy.where(ell > 0, e / cupy.where(ell > 0, ell, 1), 0))
    return Scores(p, t, tau, qf, kf, vf, rnd)


def standard(q, k, v, **variant):
    """Standard attention in the storage dtype on the device, (B, Hq, N, d): `probabilities`' P, O = P V rounded."""
    sc = probabilities(q, k, v, **variant)
    return sc.rnd(sc.p @ sc.v)


def standard_packed(q, k, v, cu_seqlens_q, cu_seqlens_k, *, alibi_slopes=None, **variant):
    """`standard` sequence by sequence of a packed batch, as (total_q, Hq, d) float32."""
    cupy = device.require()
    out = cupy.empty(q.shape, cupy.float32)
    for b, (a0, a1, b0, b1) in enumerate(
        zip(cu_seqlens_q[:-1], cu_seqlens_q[1:], cu_seqlens_k[:-1], cu_seqlens_k[1:], strict=True)
    ):
        qb, kb, vb = (x[s0:s1].swapaxes(0, 1)[None] for x, s0, s1 in ((q, a0, a1), (k, b0, b1), (v, b0, b1)))
        slopes = (
            None
            if alibi_slopes is None
            else np.asarray(alibi_slopes)[b]
            if np.ndim(alibi_slopes) == 2
            else alibi_slopes
        )
        out[a0:a1] = standard(*(cupy.ascontiguousarray(x) for x in (qb, kb, vb)), alibi_slopes=slopes, **variant)[
            0
        ].swapaxes(0, 1)
    return out


def check(q, k, v, *, causal=False, kernel=None, cu_seqlens_q=None, cu_seqlens_k=None, **variant) -> Check:
    """A variant forward on poisoned outputs, by FlashAttention's criterion against float64 (gpu.lab.checks.Check)."""
    cupy = device.require()
    packed = {} if cu_seqlens_q is None else {"cu_seqlens_q": cu_seqlens_q, "cu_seqlens_k": cu_seqlens_k}
    o, lse = flash_attention(q, k, v, causal=causal, kernel=kernel, return_lse=True, poison=True, **packed, **variant)
    variant = {name: x.get() if hasattr(x, "get") else x for name, x in variant.items()}  # slopes on the host
    o_ref, lse_ref = reference(q, k, v, causal=causal, **packed, **variant)
    if packed:
        o_std = standard_packed(q, k, v, np.asarray(cu_seqlens_q), np.asarray(cu_seqlens_k), causal=causal, **variant)
    else:
        o_std = standard(q, k, v, causal=causal, **variant)
    o_ref_d, lse_ref_d = cupy.asarray(o_ref), cupy.asarray(lse_ref)
    bound = 2 * max_error(o_std, o_ref_d) + 1e-3
    seen = cupy.isfinite(lse_ref_d)
    diff = cupy.where(seen, cupy.abs(lse.astype(cupy.float64) - lse_ref_d), 0.0)
    lse_err = float(cupy.nan_to_num(diff, nan=cupy.inf).max())
    lse_ok = bool((diff <= LSE_ATOL + LSE_RTOL * cupy.abs(cupy.where(seen, lse_ref_d, 0.0))).all()) and bool(
        (cupy.isneginf(lse) == ~seen).all()
    )
    unwritten = int(cupy.isnan(dtypes.to_float32(o)).sum()) + int(cupy.isnan(lse).sum())
    return Check(max_error(o, o_ref_d), bound, lse_err, lse_ok, unwritten)


def make_inputs(batch, heads, n, nk, d, dtype: str, variant: dict, seed: int = 0):
    """(q, k, v, keyword arguments of flash_attention) for a variant described by a JSON-able dict: "kv_heads",
    "window" [left, right], "softcap" c, "alibi" (slopes 2^(−8(h+1)/Hq), ALiBi's own), "seqlens_q" and "seqlens_k"
    (a packed batch of those lengths: batch, n and nk are then ignored)."""
    cupy = device.require()
    rng = cupy.random.default_rng(seed)
    draw = lambda *shape: dtypes.from_float32(rng.standard_normal(shape, dtype=cupy.float32), dtype)  # noqa: E731
    kv_heads = variant.get("kv_heads", heads)
    kw = {name: variant[name] for name in ("window", "softcap") if variant.get(name) is not None}
    if variant.get("alibi"):
        kw["alibi_slopes"] = 2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)
    if "seqlens_q" in variant:
        cq, ck = (np.concatenate([[0], np.cumsum(variant[f"seqlens_{x}"])]).astype(np.int32) for x in "qk")
        kw |= {"cu_seqlens_q": cq, "cu_seqlens_k": ck}
        return draw(int(cq[-1]), heads, d), draw(int(ck[-1]), kv_heads, d), draw(int(ck[-1]), kv_heads, d), kw
    return draw(batch, heads, n, d), draw(batch, kv_heads, nk, d), draw(batch, kv_heads, nk, d), kw


# the tests' cases (tests/test_gpu_variants.py, test_gpu_backward_variants.py): name → variant for make_inputs, heads = 4
CASES = {
    "mqa": {"kv_heads": 1},
    "gqa": {"kv_heads": 2},
    "window": {"window": [37, 0]},
    "window both sides": {"window": [100, 50]},
    "window diagonal only": {"window": [0, 0]},
    "window right only": {"window": [-1, 30]},
    "alibi": {"alibi": True},
    "softcap": {"softcap": 2.0},
    "all": {"kv_heads": 2, "window": [90, 10], "alibi": True, "softcap": 5.0},
}
PACKED = {  # ragged lengths (one of 1), N ≠ Nk within a sequence
    "varlen": {"seqlens_q": [1, 130, 77, 200], "seqlens_k": [50, 129, 300, 200]},
    "varlen all": {"kv_heads": 2, "window": [60, -1], "alibi": True, "softcap": 4.0, "seqlens_q": [1, 130, 77, 200],
                   "seqlens_k": [50, 129, 300, 200]},
}  # fmt: skip

SMOKE = {  # one small ragged case per variant, for compute-sanitizer (memcheck, racecheck)
    "gqa": {"kv_heads": 1},
    "window": {"window": [70, 20]},
    "alibi": {"alibi": True},
    "softcap": {"softcap": 3.0},
    "varlen": {"kv_heads": 2, "seqlens_q": [1, 130, 77], "seqlens_k": [50, 129, 300], "window": [100, -1]},
}


def smoke(kernels=(3, 6)) -> list[str]:
    """Each SMOKE variant, causal and not, on each rung this GPU runs, at d = 64 (ragged N = 200, Nk = 333)."""
    lines = []
    for rung in kernels:
        if rung == 6 and device.capability() != "9.0":
            continue
        for name, variant in SMOKE.items():
            for causal in (False, True):
                q, k, v, kw = make_inputs(1, 4, 200, 333, 64, "bfloat16", variant, seed=len(lines))
                c = check(q, k, v, causal=causal, kernel=rung, **kw)
                lines.append(f"rung {rung} {name} causal={causal}: {'ok' if c.ok else 'FAILED'} {c.describe()}")
    return lines


if __name__ == "__main__":  # python -m gpu.lab.variant_checks: the smoke cases, one line each
    import sys

    out = smoke()
    print("\n".join(out))
    sys.exit(int(any("FAILED" in line for line in out)))
