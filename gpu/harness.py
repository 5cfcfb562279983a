"""The shared harness: random inputs, the napkin FLOP count, the correctness criterion, and check-then-time.

`python -m gpu.harness [--tune]` checks every kernel against the float64 reference, then times it (and, with
--tune, the v2 tilings in TUNE_VARIANTS) at N = 4096 beside PyTorch SDPA's flash backend, and prints a table.
`python -m gpu.harness --smoke` only checks every kernel once at small ragged sizes (for compute-sanitizer).
"""

import argparse
import functools
import math
from dataclasses import dataclass

from gpu import device, dtypes, sdpa, tiling, timing
from gpu.flash import flash_attention
from gpu.reference import attention_ref
from gpu.standard import standard_attention

LSE_ATOL, LSE_RTOL = 1e-3, 1e-4
FP32_ATOL = 1e-4


def random_qkv(batch, heads, n, nk, d, dtype: str, seed: int = 0):
    """q, k, v of standard-normal values rounded to `dtype` (never zeros: they hide unwritten outputs)."""
    cupy = device.require()
    rng = cupy.random.default_rng(seed)
    shapes = ((batch, heads, n, d), (batch, heads, nk, d), (batch, heads, nk, d))
    return tuple(dtypes.from_float32(rng.standard_normal(s, dtype=cupy.float32), dtype) for s in shapes)


def visible_pairs(n: int, nk: int, causal: bool) -> int:
    """(query, key) pairs the mask lets through: N·Nk, or causal Σ_r max(0, min(Nk, r + Nk − N + 1))."""
    if not causal:
        return n * nk
    first = max(0, n - nk)  # rows before it see no key
    return sum(min(nk, r + nk - n + 1) for r in range(first, n))


def flops(n, nk, d, batch, heads, causal) -> float:
    """Forward FLOPs, two matmuls of 2·d per visible pair: 4·N·Nk·d per head; causal with N == Nk is half of
    4·N²·d (FlashAttention's convention), causal with N ≠ Nk counts the visible pairs exactly."""
    pairs = n * n / 2 if causal and n == nk else visible_pairs(n, nk, causal)
    return 4.0 * pairs * d * batch * heads


@dataclass(frozen=True)
class Check:
    """One kernel's output against the float64 reference (and the low-precision standard attention's)."""

    err: float  # max |o − ref|
    bound: float  # 2 · max |o_standard − ref| + 1e-3 (fp32: FP32_ATOL)
    lse_err: float  # max |lse − lse_ref| over rows that see a key
    lse_ok: bool  # within LSE_ATOL + LSE_RTOL·|lse_ref|, and −∞ exactly where lse_ref is −∞
    unwritten: int  # output elements still holding the NaN poison

    @property
    def ok(self) -> bool:
        return self.err <= self.bound and self.lse_ok and self.unwritten == 0


def check(q, k, v, *, causal=False, kernel=None, tiles=None) -> Check:
    """Run `kernel` on poisoned outputs and judge it by FlashAttention's criterion against float64."""
    cupy = device.require()
    o, lse = flash_attention(q, k, v, causal=causal, kernel=kernel, tiles=tiles, poison=True)
    o_ref, lse_ref = attention_ref(q, k, v, causal=causal)
    of = dtypes.to_float32(o).astype(cupy.float64)
    unwritten = int(cupy.isnan(of).sum() + cupy.isnan(lse).sum())
    err = float(cupy.nan_to_num(cupy.abs(of - o_ref), nan=cupy.inf).max())
    if dtypes.name(q.dtype) == "float32":
        bound = FP32_ATOL
    else:
        o_std = dtypes.to_float32(standard_attention(q, k, v, causal=causal)).astype(cupy.float64)
        bound = 2 * float(cupy.abs(o_std - o_ref).max()) + 1e-3
    seen = cupy.isfinite(lse_ref)
    diff = cupy.where(seen, cupy.abs(lse.astype(cupy.float64) - lse_ref), 0.0)
    lse_err = float(cupy.nan_to_num(diff, nan=cupy.inf).max())
    lse_ok = bool((diff <= LSE_ATOL + LSE_RTOL * cupy.abs(cupy.where(seen, lse_ref, 0.0))).all()) and bool(
        (cupy.isneginf(lse) == ~seen).all()
    )
    return Check(err, bound, lse_err, lse_ok, unwritten)


TUNE_VARIANTS = {  # the first of each list is the default; gpu/NOTES.md has every tiling tried and its TFLOP/s
    64: [
        tiling.v2_tiles(warps=4, m_tiles=2, block_cols=64, min_blocks=2),
        tiling.v2_tiles(warps=4, m_tiles=2, block_cols=64, min_blocks=2, swizzle=True),
    ],
    128: [
        tiling.v2_tiles(warps=4, m_tiles=2, block_cols=32, q_in_regs=False, min_blocks=2),
        tiling.v2_tiles(warps=4, m_tiles=2, block_cols=32, q_in_regs=False, min_blocks=2, swizzle=True),
    ],
}


def describe(t: tiling.Tiles) -> str:
    """A tiling in one short string: Br×Bc, warps × rows per warp, where Q_i's fragments live."""
    return f"{t.block_rows}x{t.block_cols} w{t.warps}x{16 * t.m_tiles} {'qreg' if t.q_in_regs else 'qsmem'} mb{t.min_blocks} {'swz' if t.swizzle else 'pad'}"


SMOKE = [  # (kernel, dtype, (batch, heads, N, Nk, d), causal): ragged everywhere, rows that see no key
    ("v2", "float16", (1, 2, 77, 45, 40), True),
    ("v2", "bfloat16", (1, 1, 33, 130, 64), False),
    ("v2", "float16", (1, 1, 130, 33, 128), True),
    ("v2", "bfloat16", (1, 1, 70, 70, 59), True),
    ("v2-swizzled", "float16", (1, 2, 77, 45, 40), True),
    ("v1", "float32", (1, 2, 77, 45, 40), True),
    ("v1", "bfloat16", (1, 1, 33, 70, 64), False),
]


def smoke() -> bool:
    """Check each kernel (and standard attention, inside `check`) once at small ragged sizes; True if all pass."""
    ok = True
    for kernel, dtype, shape, causal in SMOKE:
        tiles = tiling.with_defaults("v2", shape[-1], swizzle=True) if kernel == "v2-swizzled" else None
        c = check(
            *random_qkv(*shape, dtype, seed=1), causal=causal, kernel=kernel.removesuffix("-swizzled"), tiles=tiles
        )
        print(f"{kernel} {dtype} {shape} causal={causal}: {'ok' if c.ok else 'FAIL'} {c}", flush=True)
        ok &= c.ok
    return ok


def main(argv=None) -> None:
    """Check, then time, each kernel (and the v2 tilings with --tune); print one table."""
    parser = argparse.ArgumentParser(prog="python -m gpu.harness", description=__doc__.splitlines()[0])
    parser.add_argument("--tune", action="store_true", help="also time the v2 tilings in TUNE_VARIANTS")
    parser.add_argument("--smoke", action="store_true", help="only check each kernel once at small ragged sizes")
    parser.add_argument("--n", type=int, default=4096)
    args = parser.parse_args(argv)
    device.require()
    print(f"device: {device.properties()['name']}")
    if args.smoke:
        raise SystemExit(0 if smoke() else 1)
    rows = []
    for d in (64, 128):
        batch, heads = max(1, 16384 // args.n), 2048 // d
        for dtype in ("float16", "bfloat16"):
            q_small = random_qkv(2, 3, 300, 333, d, dtype, seed=d)
            big = random_qkv(batch, heads, args.n, args.n, d, dtype, seed=1)
            variants = [("v2", t) for t in TUNE_VARIANTS[d]] if args.tune and dtype == "float16" else [("v2", None)]
            variants.append(("v1", None))
            for causal in (False, True):
                f = flops(args.n, args.n, d, batch, heads, causal)
                call = sdpa.flash_sdpa(*big, causal=causal, scale=1 / math.sqrt(d))
                if call is not None:
                    rows.append((d, dtype, causal, "sdpa-flash", "", "", f / timing.median_ms(call) / 1e9))
                ms_std = timing.median_ms(functools.partial(standard_attention, *big, causal=causal))
                rows.append((d, dtype, causal, "standard", "", "", f / ms_std / 1e9))
                for kernel, tiles in variants:
                    c = check(*q_small, causal=causal, kernel=kernel, tiles=tiles)
                    verdict = (
                        "ok"
                        if c.ok
                        else f"FAIL err={c.err:.2e} bound={c.bound:.2e} lse={c.lse_err:.2e} unwritten={c.unwritten}"
                    )
                    if kernel == "v1" and args.n > 2048:
                        tflops = float("nan")
                    else:
                        ms = timing.median_ms(
                            functools.partial(flash_attention, *big, causal=causal, kernel=kernel, tiles=tiles)
                        )
                        tflops = f / ms / 1e9
                    name = describe(tiles or tiling.default_tiles(kernel, d))
                    rows.append((d, dtype, causal, kernel, name, verdict, tflops))
                print(*rows[-1], flush=True)
    print(f"\n{'d':>4} {'dtype':>9} {'causal':>6} {'kernel':>10} {'tiling':>28} {'TFLOP/s':>8}  check")
    for d, dtype, causal, kernel, name, verdict, tflops in rows:
        print(f"{d:>4} {dtype:>9} {causal!s:>6} {kernel:>10} {name:>28} {tflops:8.1f}  {verdict}")


if __name__ == "__main__":
    main()
