"""Rung 8's tilings and split counts swept (`python -m gpu.lab.tune_decode [paged | batch1 | waves]`, a row a point on
stdout): the launch alone on the cold copies of gpu.lab.bench_decode, each variant timed interleaved with the others
(gpu/NOTES.md runs 30, 35-dec2, 37-dec3); no argument: Bc × stages on the contiguous cache."""

import dataclasses

from gpu import decoding, device, geometry
from gpu.lab import bench_decode, timing
from gpu.tiling import Tiles

WAVES = ((1, 131072), (4, 131072), (16, 32768), (16, 131072))  # `waves`: the split counts occupancy.WAVE_SECONDS fits


def tune_paged(
    points=((4, 16384), (16, 4096)), splits=(1, 2, 4, 8, 16, 33), tilings=((64, 4), (128, 2)), cache="paged"
):  # fmt: skip
    """Paged at few splits (gpu/NOTES.md run 30): the launch alone at each of `splits`, and at the model's splits
    with other Bc × stages, beside contiguous at the model's: rows of {batch, nk, name: ms}. cache="contiguous": the
    same on the contiguous cache."""
    cupy = device.require()
    rows = []
    for batch, nk in points:
        caches = bench_decode._cold_caches(cupy, batch, nk, "float16")
        flat = [decoding.prepare(c["q"], c["k"], c["v"], None, None, False, None, None) for c in caches]
        plans = [
            decoding.prepare(c["q"], c["kp"], c["vp"], c["table"], c["seqlens"], False, None, None) for c in caches
        ] if cache == "paged" else flat  # fmt: skip
        model = plans[0].splits
        m = geometry.decoding_tiles(
            bench_decode.D, bench_decode.HEADS // bench_decode.KV_HEADS * bench_decode.NQ
        ).m_tiles
        calls = {
            f"contiguous P{flat[0].splits}": bench_decode._cycle(caches, flat, lambda c, p: decoding.launch(cupy, p))
        }
        for P in splits:
            forced = [dataclasses.replace(p, splits=P) for p in plans]
            calls[f"{cache} P{P}"] = bench_decode._cycle(caches, forced, lambda c, p: decoding.launch(cupy, p))
        for bc, st in tilings:
            t = Tiles(16 * m, bc, 4, m, stages=st)
            calls[f"{cache} P{model} {bc}x{st}"] = bench_decode._cycle(
                caches, plans, lambda c, p, t=t: decoding.launch(cupy, p, t)
            )
        rows.append({"batch": batch, "nk": nk, "model_splits": model} | timing.interleaved_ms(calls))
        del caches, plans, flat
        cupy.get_default_memory_pool().free_all_blocks()
    return rows


def tune(points=((1, 32768), (4, 131072), (16, 32768)), variants=((64, 2), (64, 3), (64, 4), (128, 2))):
    """Rung 8's split + combine at Bc keys per tile and `stages` cp.async stages: rows of {batch, nk, "Bc×stages": ms}."""
    cupy = device.require()
    rows = []
    for batch, nk in points:
        caches = bench_decode._cold_caches(cupy, batch, nk, "float16")
        plans = [decoding.prepare(c["q"], c["k"], c["v"], None, None, False, None, None) for c in caches]
        m = geometry.decoding_tiles(
            bench_decode.D, bench_decode.HEADS // bench_decode.KV_HEADS * bench_decode.NQ
        ).m_tiles
        tilings = {f"{bc}x{st}": Tiles(16 * m, bc, 4, m, stages=st) for bc, st in variants}
        row = {"batch": batch, "nk": nk, "splits": plans[0].splits}
        row |= {
            name: ms
            for name, ms in timing.interleaved_ms(
                {
                    n: bench_decode._cycle(caches, plans, lambda c, p, t=t: decoding.launch(cupy, p, t))
                    for n, t in tilings.items()
                }
            ).items()
        }
        rows.append(row)
        del caches, plans
        cupy.get_default_memory_pool().free_all_blocks()
    return rows


if __name__ == "__main__":  # python -m gpu.lab.tune_decode [paged | batch1 | waves]: tilings or splits tuned
    import sys

    runs = {
        "paged": tune_paged,
        "batch1": lambda: tune_paged(((1, 4096), (1, 32768)), (8, 16, 33, 64, 128), (), cache="contiguous"),
        "waves": lambda: tune_paged(WAVES, (1, 4, 16, 33), (), cache="contiguous"),
    }
    for tuned in runs[sys.argv[1]]() if sys.argv[1:] else tune():
        print(tuned)
