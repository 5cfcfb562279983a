"""Check, then time: `python -m gpu.lab.harness --kernel N` checks rung N of the ladder against float64 (gpu.lab.checks),
then times it at FlashAttention-2's benchmark size beside PyTorch SDPA's flash backend, and prints a table.

`--tune` times the tilings in TUNE instead (each checked first); `--smoke` only checks every rung and the
standard baseline once at small ragged sizes (what compute-sanitizer runs).
"""

import argparse
import functools
import math

from gpu import device, registry
from gpu.backward import flash_attention_backward
from gpu.flash import flash_attention
from gpu.lab import sdpa, timing
from gpu.lab.checks import check, check_backward, random_like, random_qkv
from gpu.tiling import Tiles, backward_tiles, backward_warpgroup_tiles, forward_tiles, warpgroup_tiles

READABLE_N = 1024  # the readable rungs run at a few TFLOP/s: they are timed at this N
TOKENS, HIDDEN = 16384, 2048  # FlashAttention-2's benchmark: batch = TOKENS / N, heads = HIDDEN / d


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


BACKWARD_FLOPS = 2.5  # the backward's five products against the forward's two: FLOPs = 2.5 × forward
TRAINING_FLOPS = 1 + BACKWARD_FLOPS  # forward + backward = 3.5 × forward (FlashAttention-2's convention)

TUNE: dict[tuple[str, int], list[tuple[int, Tiles | None]]] = {  # None: the kernel's default tiling
    ("forward", 64): [
        (2, None),
        (3, None),
        (3, forward_tiles(warps=4, m_tiles=2, block_cols=64, min_blocks=2, swizzle=True)),
        (6, None),
        (6, warpgroup_tiles(consumers=2, block_cols=128, stages=3)),
        (6, warpgroup_tiles(consumers=2, block_cols=128, stages=3, pingpong=True)),
        (6, warpgroup_tiles(consumers=3, block_cols=128, stages=3)),
        (6, warpgroup_tiles(consumers=3, block_cols=128, stages=4, pingpong=True)),
    ],
    ("forward", 128): [
        (2, None),
        (3, None),
        (3, forward_tiles(warps=4, m_tiles=2, block_cols=48, q_in_regs=False, min_blocks=2)),
        (3, forward_tiles(warps=4, m_tiles=2, block_cols=64, q_in_regs=False, min_blocks=2)),
        (3, forward_tiles(warps=4, m_tiles=2, block_cols=32, q_in_regs=False, min_blocks=2, swizzle=True)),
        (3, forward_tiles(warps=8, m_tiles=1, block_cols=64, q_in_regs=True, min_blocks=1)),
        (6, None),
        (6, warpgroup_tiles(consumers=2, block_cols=128, stages=3, pingpong=True)),
        (6, warpgroup_tiles(consumers=2, block_cols=128, stages=2)),
        (6, warpgroup_tiles(consumers=2, block_cols=64, stages=6)),
    ],
    ("backward", 64): [
        (5, None),
        (5, backward_tiles(warps=4, block_rows=64, min_blocks=2)),
        (5, backward_tiles(warps=8, block_rows=32)),
        (5, backward_tiles(warps=4, block_rows=128)),
        (5, backward_tiles(warps=8, block_rows=128)),
        (7, None),
        (7, backward_warpgroup_tiles(stages=3)),
    ],
    ("backward", 128): [
        (5, None),
        (5, backward_tiles(warps=4, block_rows=64)),
        (5, backward_tiles(warps=8, block_rows=32)),
        (5, backward_tiles(warps=4, block_rows=32, min_blocks=2)),
        (7, None),
        (7, backward_warpgroup_tiles(stages=2)),
        (7, backward_warpgroup_tiles(stages=3, split_dq=True)),
    ],
}

SMOKE = [  # (rung, dtype, (batch, heads, N, Nk, d), causal, swizzle): ragged everywhere, rows that see no key
    (2, "float16", (1, 2, 77, 45, 40), True, False),
    (2, "bfloat16", (1, 1, 33, 130, 64), False, False),
    (2, "float16", (1, 1, 130, 33, 128), True, False),
    (2, "bfloat16", (1, 1, 70, 70, 59), True, True),
    (3, "float16", (1, 2, 77, 45, 40), True, False),
    (3, "bfloat16", (1, 1, 130, 33, 128), True, True),
    (6, "float16", (1, 2, 77, 300, 64), True, False),
    (6, "bfloat16", (1, 1, 300, 33, 128), True, False),
    (6, "float16", (1, 1, 333, 333, 128), False, False),
    (1, "float32", (1, 2, 77, 45, 40), True, False),
    (1, "bfloat16", (1, 1, 33, 70, 64), False, False),
    (5, "float16", (1, 2, 77, 45, 40), True, False),
    (5, "bfloat16", (1, 1, 33, 130, 64), False, False),
    (5, "float16", (1, 1, 130, 33, 128), True, False),
    (5, "bfloat16", (1, 1, 200, 200, 111), True, False),
    (7, "float16", (1, 2, 77, 300, 64), True, False),
    (7, "bfloat16", (1, 1, 300, 33, 128), True, False),
    (7, "float16", (1, 1, 333, 333, 128), False, False),
    (4, "float32", (1, 2, 77, 45, 40), True, False),
    (4, "bfloat16", (1, 1, 33, 70, 64), False, False),
]


def check_rung(spec: registry.KernelSpec, q, k, v, *, causal: bool, tiles: Tiles | None = None):
    """The forward or backward check of one kernel (gpu.lab.checks), whichever its direction."""
    run = check if spec.direction == "forward" else check_backward
    return run(q, k, v, causal=causal, kernel=spec.rung, tiles=tiles)


def smoke(rungs: set[int] | None = None) -> bool:
    """Check each rung (or those in `rungs`; the standard baseline inside the checks) at small ragged sizes; True if all pass."""
    ok = True
    for number, dtype, shape, causal, swizzle in SMOKE:
        if rungs and number not in rungs:
            continue
        spec = registry.rung(number)
        if spec.fits(shape[-1], device.capability()):
            print(f"rung {number}: skipped, {spec.fits(shape[-1], device.capability())}", flush=True)
            continue
        tiles = (
            forward_tiles(warps=4, m_tiles=2, block_cols=32, q_in_regs=False, min_blocks=2, swizzle=True)
            if swizzle
            else None
        )
        c = check_rung(spec, *random_qkv(*shape, dtype, seed=1), causal=causal, tiles=tiles)
        print(
            f"rung {number} {dtype} {shape} causal={causal} swizzle={swizzle}: {'ok' if c.ok else 'FAIL'} {c}",
            flush=True,
        )
        ok &= c.ok
    return ok


def time_rung(spec: registry.KernelSpec, n: int, d: int, dtype: str, causal: bool, tiles: Tiles | None = None) -> dict:
    """TFLOP/s of one kernel through its public call (forward; backward: forward + backward) and of SDPA's flash."""
    batch, heads = max(1, TOKENS // n), HIDDEN // d
    q, k, v = random_qkv(batch, heads, n, n, d, dtype, seed=1)
    f = flops(n, n, d, batch, heads, causal)
    call_sdpa = sdpa.flash_sdpa(q, k, v, causal=causal, scale=1 / math.sqrt(d))
    if spec.direction == "forward":
        call = functools.partial(flash_attention, q, k, v, causal=causal, kernel=spec.rung, tiles=tiles)
    else:
        f *= TRAINING_FLOPS
        do = random_like(q, seed=2)
        call_sdpa = sdpa.flash_sdpa(q, k, v, causal=causal, scale=1 / math.sqrt(d), do=do)

        def call():
            o, lse = flash_attention(q, k, v, causal=causal, return_lse=True)
            return flash_attention_backward(q, k, v, o, lse, do, causal=causal, kernel=spec.rung, tiles=tiles)

    readable = not spec.tensor_cores
    row = {"tflops": f / timing.median_ms(call, warmup=1 if readable else 2, repeats=3 if readable else 10) / 1e9}
    if call_sdpa is not None:
        row["sdpa_tflops"] = f / timing.median_ms(call_sdpa) / 1e9
    return row


def main(argv=None) -> None:
    """Check, then time, one rung (or the tilings in TUNE); print one table."""
    parser = argparse.ArgumentParser(prog="python -m gpu.lab.harness", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--kernel", type=int, help=f"the rung to check and time: {', '.join(map(str, sorted(registry.LADDER)))}"
    )
    parser.add_argument("--tune", choices=("forward", "backward"), help="time the tilings in TUNE for that direction")
    parser.add_argument("--smoke", action="store_true", help="only check each rung once at small ragged sizes")
    parser.add_argument("--rungs", help="with --smoke: only these rungs (comma-separated)")
    parser.add_argument("--n", type=int, default=4096, help="sequence length of the timed runs")
    parser.add_argument("--dtypes", default="float16,bfloat16")
    parser.add_argument("--only", help="with --tune: only the variants of this rung (1 … 6)")
    args = parser.parse_args(argv)
    device.require()
    print(f"device: {device.properties()['name']}")
    if args.smoke:
        raise SystemExit(0 if smoke({int(r) for r in args.rungs.split(",")} if args.rungs else None) else 1)
    if args.kernel is None and args.tune is None:
        parser.error("give --kernel N, --tune DIRECTION or --smoke")
    if args.kernel is not None:
        spec = registry.rung(args.kernel)
        variants = {d: [(spec.rung, None)] for d in (64, 128)}
    else:
        spec = None
        only = None if args.only is None else registry.number(args.tune, args.only)
        variants = {d: [r for r in TUNE[(args.tune, d)] if only in (None, r[0])] for d in (64, 128)}
    rows = []
    for d, runs in variants.items():
        for dtype in args.dtypes.split(","):
            if spec is not None and dtype not in spec.dtypes:
                continue
            q_small = random_qkv(2, 3, 300, 333, d, dtype, seed=d)
            for causal in (False, True):
                for name, tiles in runs:
                    kernel = spec or (registry.forward(name) if args.tune == "forward" else registry.backward(name))
                    if kernel.fits(d, device.capability()):
                        continue
                    c = check_rung(kernel, *q_small, causal=causal, tiles=tiles)
                    n = args.n if kernel.tensor_cores else READABLE_N
                    timed = time_rung(kernel, n, d, dtype, causal, tiles) if c.ok else {}
                    label = f"rung {kernel.rung} {(tiles or kernel.default_tiles(d)).describe()}"
                    rows.append((d, dtype, causal, n, label, "ok" if c.ok else f"FAIL {c}", timed))
                    print(*rows[-1], flush=True)
    print(
        f"\n{'d':>4} {'dtype':>9} {'causal':>6} {'N':>6} {'kernel':>40} {'TFLOP/s':>8} {'SDPA':>8} {'ratio':>6}  check"
    )
    for d, dtype, causal, n, label, verdict, t in rows:
        ours, theirs = t.get("tflops", math.nan), t.get("sdpa_tflops", math.nan)
        print(
            f"{d:>4} {dtype:>9} {causal!s:>6} {n:>6} {label:>40} {ours:8.1f} {theirs:8.1f} {ours / theirs:6.2f}  {verdict}"
        )


if __name__ == "__main__":
    main()
