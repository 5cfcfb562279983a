"""Rung 6 at short rows (issue 23, N = 1024): candidate builds of the forward, each checked against float64 and timed
beside SDPA's cuDNN and flash backends in interleaved rounds (16k tokens, hidden 2048: batch 16384/N, heads 2048/d).

A candidate is a tiling (gpu.tiling.Tiles) and the extra #defines of 06_flash2_wgmma_tma.cu it sets (Q_STAGES: Q_i
buffers; EDGE_TURNS: a tile's first S and last O += P̃V take the ping-pong turns too; Q_PREFETCH: the next Q_i
asked of L2 early; MIN_CTAS: thread blocks an SM holds, the persistent grid that many per SM), which this script adds to the
launcher's own for the candidate's calls only.

`python -m gpu.lab.short_rows [--json PATH] [--dtype float16] [--profile]`: one line a candidate; --profile adds the
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

import numpy as np

from gpu import flash, geometry
from gpu.lab import checks, sdpa, timing
from gpu.tiling import warpgroup_tiles

TOKENS, HIDDEN = 16384, 2048


def _pp(cols=128, stages=3, consumers=2):
    return warpgroup_tiles(consumers, cols, stages, pingpong=True, persistent=True)


def _one(stages=3, cols=128):
    """One consumer warpgroup (Br = 64), two thread blocks an SM (MIN_CTAS = 2, twice the persistent grid)."""
    return warpgroup_tiles(1, cols, stages, persistent=True)


OT = {"O_TMA": 1}
PF = {"Q_PREFETCH": 1}
# (d, N, causal) → name → (tiles, extra #defines)
CANDIDATES = {
    (128, 1024, False): {"default": (None, {}), "o tma": (None, OT), "o tma pf": (None, OT | PF)},
    (64, 1024, True): {"default": (None, {}), "o tma": (None, OT), "o tma pf": (None, OT | PF)},
    (128, 1024, True): {"default": (None, {}), "o tma": (None, OT), "o tma pf": (None, OT | PF)},
    (64, 1024, False): {"default": (None, {}), "128 pp o tma": (_pp(), OT), "128 pp o tma pf": (_pp(), OT | PF)},
    (128, 4096, False): {"default": (None, {}), "o tma": (None, OT)},
    (64, 4096, True): {"default": (None, {}), "128 pp o tma": (_pp(), OT)},
    (128, 16384, True): {"default": (None, {}), "o tma": (None, OT)},
}
CHECK_SHAPES = ((2, 40, 1024, 1024), (1, 140, 1000, 1000), (1, 140, 700, 1000))  # (batch, heads, N, Nk)


def with_extra(spec, extra: dict[str, int]):
    """Rung 6's spec with `extra` #defines added (and shared memory for Q_STAGES Q_i buffers); others unchanged."""
    if not extra or spec.rung != 6:
        return spec

    def smem(d, tiles):
        return geometry.forward_wg_smem(d, tiles) + (extra.get("Q_STAGES", 1) - 1) * (
            geometry.HALF_SIZE * d * tiles.block_rows + 16
        )

    return dataclasses.replace(
        spec, defines_of=lambda d, dtype, tiles: geometry.forward_wg_defines(d, dtype, tiles) | extra, smem_of=smem
    )


@contextlib.contextmanager
def extra_defines(extra: dict[str, int]):
    """Rung 6's launches inside the block get `extra` #defines, MIN_CTAS thread blocks an SM (not thread-safe: it
    swaps gpu.flash.resolve and _sm_count)."""
    resolve, sm_count = flash.resolve, flash._sm_count
    flash.resolve = lambda kernel, d: with_extra(resolve(kernel, d), extra)
    flash._sm_count = lambda device_id: extra.get("MIN_CTAS", 1) * sm_count(device_id)
    try:
        yield
    finally:
        flash.resolve, flash._sm_count = resolve, sm_count


def candidate_call(q, k, v, causal, tiles, extra):
    def call():
        with extra_defines(extra):
            return flash.flash_attention(q, k, v, causal=causal, tiles=tiles)

    return call


def precompile(dtype: str) -> None:
    """Every candidate's build compiled at once (NVRTC in threads), before any is checked or timed."""
    from concurrent.futures import ThreadPoolExecutor

    from gpu import source

    def build(d, n, causal, tiles, extra):
        spec = with_extra(flash.resolve(None, d), extra)
        tiles = spec.tiles_for(d, n, causal, tiles)
        source.function(spec, spec.defines(d, dtype, tiles), spec.smem(d, tiles))

    jobs = [(d, n, c, t, e) for (d, n, c), cands in CANDIDATES.items() for t, e in cands.values()]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda job: build(*job), jobs))


def run(dtype: str, progress=print) -> list[dict]:
    t0 = time.perf_counter()
    precompile(dtype)
    progress(f"compiled every candidate in {time.perf_counter() - t0:.1f} s")
    rows = []
    for (d, n, causal), cands in CANDIDATES.items():
        batch, heads = TOKENS // n, HIDDEN // d
        q, k, v = checks.random_qkv(batch, heads, n, n, d, dtype, seed=n + d)
        f = 4.0 * n * n * d * batch * heads / (2 if causal else 1)
        verdicts = {}
        for name, (tiles, extra) in cands.items():
            bad = []
            for b, h, nq, nk in CHECK_SHAPES:
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
                     f"{'ok' if not verdicts[name] else 'FAILED ' + '; '.join(verdicts[name])}")  # fmt: skip
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


PHASES = ("wait Q", "wait K0", "S0 + softmax", "loop", "last PV", "epilogue")


def timeline(dtype: str, progress=print) -> None:
    """SM clocks at the steps of thread block 0's tiles (a TIMELINE build, the default tiling with each extra;
    TIMELINE 2 leaves O unstored), and each build timed beside the default (its output unchecked)."""
    import cupy

    from gpu import source

    for (d, n, causal), extra in (((128, 1024, False), {"TIMELINE": 1}), ((128, 1024, False), {"TIMELINE": 2}),
                                  ((64, 1024, True), {"TIMELINE": 1}), ((64, 1024, True), {"TIMELINE": 2})):  # fmt: skip
        batch, heads = TOKENS // n, HIDDEN // d
        q, k, v = checks.random_qkv(batch, heads, n, n, d, dtype, seed=n + d)
        spec = with_extra(flash.resolve(None, d), extra)
        tiles = spec.tiles_for(d, n, causal, None)
        mod = source._module(spec.file, tuple(sorted(spec.defines(d, dtype, tiles).items())), spec.arch)
        candidate_call(q, k, v, causal, None, extra)()  # compiles the build
        roles = tiles.warps // 4
        marks = cupy.ndarray((roles, 32, 8), cupy.uint64, mod.get_global("timeline"))
        marks.fill(0)
        candidate_call(q, k, v, causal, None, extra)()
        cupy.cuda.Device().synchronize()
        t = marks.get().astype(float)
        walked = int((t[1, :, 6] > 0).sum())
        t0 = t[1, 0, 0]
        progress(f"d={d} N={n} causal={int(causal)} {tiles.describe()} {extra}: {walked} tiles on block 0 (clocks)")
        for c in range(1, roles):
            for name, (a, b) in zip(PHASES, zip(range(6), range(1, 7), strict=True), strict=True):
                per = t[c, 1 : walked - 1, b] - t[c, 1 : walked - 1, a]
                progress(
                    f"  wg{c - 1} {name:>13}: median {np.median(per):8.0f}  tiles {' '.join(f'{x:.0f}' for x in per[:8])}"
                )
            gap = t[c, 1:walked, 0] - t[c, : walked - 1, 6]
            progress(f"  wg{c - 1} {'to next tile':>13}: median {np.median(gap):8.0f}")
        q_issue = t[0, 1:walked, 1] - t[1:, : walked - 1, 4].max(axis=0)
        k0 = t[0, 1:walked, 2] - t[0, 1:walked, 1]
        progress(
            f"  producer: Q_i issued {np.median(q_issue):.0f} after the last consumer's q_empty, K_0 {np.median(k0):.0f} later"
        )
        for n_ in range(min(walked, 4)):
            row = " | ".join(" ".join(f"{(x - t0):.0f}" for x in t[r, n_, : 7 if r else 4]) for r in range(roles))
            progress(f"  tile {n_}: {row}")
        ms = timing.interleaved_ms({"default": candidate_call(q, k, v, causal, None, {}),
                                    "build": candidate_call(q, k, v, causal, None, extra)})  # fmt: skip
        progress(f"  time: default {ms['default'] * 1e3:.1f} µs, this build {ms['build'] * 1e3:.1f} µs")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--timeline", action="store_true", help="only the clocks of thread block 0's tiles")
    a = ap.parse_args(argv)
    if a.timeline:
        timeline(a.dtype)
        return
    rows = run(a.dtype)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    if a.profile:
        print(host_profile(a.dtype))


if __name__ == "__main__":
    main()
