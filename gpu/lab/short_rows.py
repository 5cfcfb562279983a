"""Rung 6 at short rows (issue 23, N = 1024): candidate builds of the forward, each checked against float64 and timed
beside SDPA's cuDNN and flash backends in interleaved rounds (16k tokens, hidden 2048: batch 16384/N, heads 2048/d).

A candidate is a tiling (gpu.tiling.Tiles) and #defines of 06_flash2_wgmma_tma.cu that override the launcher's for
the candidate's calls only (O_TMA 0: O_i stored from registers, as before run 37-fwd3 and, at Br = 192, run 39-fwd4;
WALK 0: the causal walk in pairs to its end, as before run 39-fwd4).

`python -m gpu.lab.short_rows [--json PATH] [--dtypes float16 bfloat16] [--no-checks] [--profile] [--run-38]`: one line a candidate; --profile adds the
host's own work per public call (cProfile of the default call, the GPU left to queue)."""

import argparse
import contextlib
import cProfile
import dataclasses
import io
import json
import math
import pstats
import time

from gpu import flash, geometry
from gpu.lab import checks, sdpa, timing
from gpu.tiling import warpgroup_tiles

TOKENS, HIDDEN = 16384, 2048


PAIRS = {"WALK": 0}  # the plain walk's pairs to the end (before run 39-fwd4)
MAIN_192 = {"WALK": 0, "O_TMA": 0, "O_BUF": 0}  # Br = 192 before run 39-fwd4: O_i from registers, pairs
BR192 = warpgroup_tiles(3, 128, 3, pingpong=True, persistent=True)
# (d, N, causal) → name → (tiles, #defines over the launcher's)
O_BUF = {"O_TMA": 1, "O_BUF": 1}  # O_i through a buffer of its own at Br = 128 too
CANDIDATES = {
    (64, 1024, True): {"default": (None, {}), "O buffer": (None, O_BUF), "pairs": (None, PAIRS)},
    (64, 2048, True): {"default": (None, {}), "O buffer": (None, O_BUF), "pairs": (None, PAIRS)},
}
RUN_38 = {  # run 39-fwd4's call 3: the defaults against run 38's walk and stores
    (64, 1024, True): {"default": (None, {}), "pairs": (None, PAIRS)},
    (64, 2048, True): {"default": (None, {}), "pairs": (None, PAIRS)},
    (64, 4096, True): {"default": (None, {}), "run 38": (None, MAIN_192)},
    (64, 1024, False): {"default": (None, {}), "run 38": (None, MAIN_192)},
    (128, 1024, True): {"default": (None, {}), "pairs": (None, PAIRS)},
    (128, 1024, False): {"default": (None, {})},
}
CHECK_SHAPES = (
    (2, 40, 1024, 1024),
    (1, 140, 1000, 1000),
    (1, 140, 700, 1000),
    (1, 140, 1000, 700),
)  # (batch, heads, N, Nk)


def with_extra(spec, extra: dict[str, int]):
    """Rung 6's spec with `extra` #defines over its own; other specs unchanged."""
    if not extra or spec.rung != 6:
        return spec

    def defines(d, dtype, tiles):
        return geometry.forward_wg_defines(d, dtype, tiles) | extra

    def smem(d, tiles):  # O_i's own buffer (O_BUF) or none
        buffer = defines(d, "float16", tiles)["O_BUF"] * geometry.HALF_SIZE * d * tiles.block_rows
        return (
            geometry.forward_wg_smem(d, tiles)
            - geometry.o_buffer(d, tiles) * geometry.HALF_SIZE * d * tiles.block_rows
            + buffer
        )

    return dataclasses.replace(spec, defines_of=defines, smem_of=smem)


@contextlib.contextmanager
def extra_defines(extra: dict[str, int]):
    """Rung 6's launches inside the block get `extra` #defines (not thread-safe: it swaps gpu.flash.resolve)."""
    resolve = flash.resolve
    flash.resolve = lambda kernel, d: with_extra(resolve(kernel, d), extra)
    try:
        yield
    finally:
        flash.resolve = resolve


def candidate_call(q, k, v, causal, tiles, extra):
    def call():
        with extra_defines(extra):
            return flash.flash_attention(q, k, v, causal=causal, tiles=tiles)

    return call


def precompile(dtype: str, candidates: dict) -> None:
    """Every candidate's build compiled at once (NVRTC in threads), before any is checked or timed."""
    from concurrent.futures import ThreadPoolExecutor

    from gpu import source

    def build(d, n, causal, tiles, extra):
        spec = with_extra(flash.resolve(None, d), extra)
        tiles = spec.tiles_for(d, n, causal, tiles)
        defines = spec.defines(d, dtype, tiles)
        defines["WALK"] = int(bool(defines.get("WALK")) and causal)  # as flash.launch builds it (plain calls)
        source.function(spec, defines, spec.smem(d, tiles))

    jobs = [(d, n, c, t, e) for (d, n, c), cands in candidates.items() for t, e in cands.values()]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda job: build(*job), jobs))


def run(dtype: str, progress=print, check: bool = True, candidates: dict = CANDIDATES) -> list[dict]:
    t0 = time.perf_counter()
    precompile(dtype, candidates)
    progress(f"compiled every candidate in {time.perf_counter() - t0:.1f} s")
    rows = []
    for (d, n, causal), cands in candidates.items():
        batch, heads = TOKENS // n, HIDDEN // d
        q, k, v = checks.random_qkv(batch, heads, n, n, d, dtype, seed=n + d)
        f = 4.0 * n * n * d * batch * heads / (2 if causal else 1)
        verdicts = {}
        for name, (tiles, extra) in cands.items():
            bad = []
            for b, h, nq, nk in CHECK_SHAPES if check else ():
                cq, ck, cv = checks.random_qkv(b, h, nq, nk, d, dtype, seed=nq + h)
                with extra_defines(extra):
                    c = checks.check(cq, ck, cv, causal=causal, tiles=tiles)
                if not c.ok:
                    bad.append(f"{(b, h, nq, nk)}: {c.describe()}")
            verdicts[name] = bad
        calls = {name: candidate_call(q, k, v, causal, tiles, extra) for name, (tiles, extra) in cands.items()}
        calls |= {
            b: sdpa.sdpa_call(q, k, v, causal=causal, scale=1 / math.sqrt(d), backend=b) for b in ("cudnn", "sdpa")
        }
        ms = timing.interleaved_ms(calls, rounds=9)
        for name in cands:
            row = {"d": d, "n": n, "causal": causal, "dtype": dtype, "candidate": name, "ms": ms[name],
                   "tflops": f / ms[name] / 1e9, "x_cudnn": ms["cudnn"] / ms[name], "x_flash": ms["sdpa"] / ms[name],
                   "check_failures": verdicts[name]}  # fmt: skip
            rows.append(row)
            progress(f"d={d} N={n} causal={int(causal)} {dtype} {name:>18}: {row['tflops']:6.1f} TFLOP/s "
                     f"×cuDNN {row['x_cudnn']:.3f} ×flash {row['x_flash']:.2f} "
                     f"{('ok' if check else 'unchecked') if not verdicts[name] else 'FAILED ' + '; '.join(verdicts[name])}")  # fmt: skip
        progress(f"d={d} N={n} causal={int(causal)} cuDNN {f / ms['cudnn'] / 1e9:.1f} flash {f / ms['sdpa'] / 1e9:.1f}")
    return rows


def host_profile(dtype: str, calls: int = 300) -> str:
    """The host's time per default public call at d = 128, N = 1024 and its top functions (cProfile)."""
    q, k, v = checks.random_qkv(16, 16, 1024, 1024, 128, dtype)
    for _ in range(5):
        flash.flash_attention(q, k, v)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for _ in range(calls):
        flash.flash_attention(q, k, v)
    prof.disable()
    per_call = (time.perf_counter() - t0) / calls * 1e6
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(14)
    return f"host per call (under cProfile) {per_call:.1f} µs\n" + text.getvalue()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--dtypes", nargs="+", default=["float16"])
    ap.add_argument("--no-checks", action="store_true", help="time only (the GPU tests judge the defaults)")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--run-38", action="store_true", help="the defaults against run 38's walk and stores (RUN_38)")
    a = ap.parse_args(argv)
    rows = [
        row
        for dtype in a.dtypes
        for row in run(dtype, check=not a.no_checks, candidates=RUN_38 if a.run_38 else CANDIDATES)
    ]
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    if a.profile:
        print(host_profile(a.dtypes[0]))


if __name__ == "__main__":
    main()
