"""A decode step replayed from a CUDA graph, as a serving loop replays it: rung 8 (gpu.decode, contiguous and paged)
captured by CuPy's stream capture beside PyTorch's SDPA (its default choice, cuDNN and its flash backend,
enable_gqa=True) captured by torch.cuda.graph, each graph timing.STEPS decode steps over the cold copies of the cache
(gpu.lab.bench_decode's), replayed and timed with CUDA events, the implementations interleaved: what a step costs the
GPU once the host's Python is out of the loop (its kernels and the gaps between them), beside the eager calls.

`variants`: rung 8's launch alone (the checks done once) at other split counts, Bc × stages and warps, and with the
combine merged by a cluster of the group's blocks, by all the group's blocks of a cooperative grid (spread), by the
last block to finish (the ticket), by its own kernel, or not at all (the split kernel alone), each captured and timed
the same way beside SDPA's default and cuDNN: changes at short caches measured without the host's ~20 µs a call in
front of them (gpu/NOTES.md run 39-dec4). `merges`: the merges alone at the points of issue 25's misses and the
long splits, contiguous and paged (gpu/NOTES.md run 41-dec6).

    python -m gpu.lab.decode_graphs [steps | variants | merges]   (a JSON line per point on stdout)
"""

import dataclasses
import json
import sys

import numpy as np

from gpu import decode_launch, decoding, device, geometry, pages
from gpu.lab import bench_decode, sdpa, timing
from gpu.lab.checks import max_error
from gpu.tiling import Tiles

POINTS = [(1, 4096), (1, 32768), (1, 131072), (4, 16384), (16, 4096), (16, 32768)]
SHORT = [(1, 4096), (1, 32768), (1, 131072), (4, 16384)]


def steps_row(cupy, batch: int, nk: int) -> dict:
    """One point: each implementation's eager call (as `flashsim bench decode` times them) and its step replayed from
    a graph, in µs and % of the device's DRAM bandwidth (bench_decode.dram_peak); ours' captured output against its
    eager call's."""
    caches = bench_decode._cold_caches(cupy, batch, nk, "float16")
    torch_ok = sdpa.torch_available()[0]
    moved = 2 * batch * bench_decode.KV_HEADS * nk * bench_decode.D * 2
    moved += 2 * batch * bench_decode.HEADS * bench_decode.NQ * bench_decode.D * 2
    plans = [None] * len(caches)
    eager = {
        "ours": bench_decode._cycle(caches, plans, lambda c, p: decoding.decode(c["q"], c["k"], c["v"])),
        "paged": bench_decode._cycle(
            caches, plans,
            lambda c, p: decoding.decode(c["q"], c["kp"], c["vp"], block_table=c["table"], cache_seqlens=c["seqlens"]),
        ),
    }  # fmt: skip
    row = {"batch": batch, "nk": nk, "copies": len(caches), "bytes": moved, "steps": timing.STEPS}
    graphs, kept = {}, []
    for name, fn in eager.items():
        graphs[f"{name}_graph"], held = timing.capture_cupy(fn, len(caches))
        kept.append(held)
    # the warm-up's calls went round the copies once: the first captured call decoded copy 1 (mod copies)
    graph, stream, outs = kept[0]
    graph.launch(stream)
    stream.synchronize()
    first = caches[1 % len(caches)]
    row["graph_vs_eager_max_diff"] = max_error(
        outs[0], decoding.decode(first["q"], first["k"], first["v"]).astype(cupy.float64)
    )
    if torch_ok:
        for backend in bench_decode.BASELINES:
            eager[backend] = bench_decode._cycle(caches, plans, bench_decode._sdpa(backend))
            try:
                graphs[f"{backend}_graph"], held = timing.capture_torch(eager[backend], len(caches))
                kept.append(held)
            except RuntimeError as e:  # a backend that refuses capture: said, not timed
                row[f"{backend}_graph"] = {"status": "error", "why": str(e).strip().splitlines()[0][:200]}
    timed = {name: 1e3 * ms for name, ms in timing.interleaved_ms(eager).items()}
    timed |= timing.replay_us(graphs, torch_stream=torch_ok)
    peak = bench_decode.dram_peak()
    for name, us in timed.items():
        row[name] = {"us": us, "dram_pct": bench_decode.share(moved / (us * 1e-6), peak)}
    for ours, base in (("ours", "default"), ("ours_graph", "default_graph")):
        if base in timed:
            row[f"{ours}_vs_{base}"] = timed[base] / timed[ours]
    del kept, caches
    cupy.get_default_memory_pool().free_all_blocks()
    return row


def split_alone(cupy, p, tiles):
    """The split kernel alone (no ticket, no cluster, no combine): a step before its partials are merged."""
    rows = p.batch * p.hkv * p.g * p.nq
    o = cupy.empty(p.q.shape, p.q.dtype)
    parts, lse_parts, _, scratch = decode_launch.workspace(cupy, p.splits, rows, p.d, p.batch * p.hkv)
    if p.splits == 1:
        parts, lse_parts = o, scratch
    split, _, tiles, smem = decode_launch.kernels(p.d, "float16", p.g * p.nq, tiles, page_size=p.page_size)
    _, errors, claim = pages.errors(p.q.device.id)
    table, seqlens = (decode_launch.NULL if x is None else x for x in (p.table, p.seqlens))
    max_pages = 0 if p.table is None else p.table.shape[1]
    arrays = (p.q, p.k, p.v, table, seqlens, o, scratch, parts, lse_parts, decode_launch.NULL, errors, claim)
    values = (*(int(x) if type(x) is np.uintp else x.data.ptr for x in arrays),
              *decode_launch.scalars(p.nq, p.g, p.nk, p.page_size, max_pages, p.num_pages, p.splits, p.scale,
                                 p.causal))  # fmt: skip
    decode_launch.launch_kernel(cupy, split, (p.splits, p.hkv, p.batch), tiles.threads, smem, values)
    return o


def variants_row(cupy, batch: int, nk: int, variants: dict, cache: str = "contiguous") -> dict:
    """rung 8's launch alone under each of `variants` ({name: (splits or None, Tiles or None, combine)}, combine one
    of "cluster", "spread", "ticket", "separate", "none"), on the contiguous or the paged cache, each a graph of
    timing.STEPS steps, beside SDPA's default and cuDNN graphs and the plain read of K and V (read_ceiling.cu): µs per
    step; and the largest difference between each fused variant's output and the separate combine's."""
    caches = bench_decode._cold_caches(cupy, batch, nk, "float16")
    torch_ok = sdpa.torch_available()[0]
    paged = cache == "paged"
    plans = [decoding.prepare(c["q"], *((c["kp"], c["vp"], c["table"], c["seqlens"]) if paged else
                                        (c["k"], c["v"], None, None)), False, None, None) for c in caches]  # fmt: skip
    row = {"batch": batch, "nk": nk, "cache": cache, "model_splits": plans[0].splits, "max_diff_vs_separate": {}}
    graphs, kept = {}, []
    for name, (splits, tiles, combine) in variants.items():
        forced = [dataclasses.replace(p, splits=splits or p.splits) for p in plans]
        if combine == "none":
            fn = bench_decode._cycle(caches, forced, lambda c, p, t=tiles: split_alone(cupy, p, t))
        else:
            kw = {"fused": combine != "separate", "lse": False}
            kw |= {"merge": combine} if combine != "separate" else {}
            try:
                o = decoding.launch(cupy, forced[0], tiles, **kw)[0].astype(cupy.float64)
            except ValueError as e:  # a merge this point cannot take (a cluster of more than 16 splits, say): said
                row[name] = str(e)
                continue
            fn = bench_decode._cycle(caches, forced, lambda c, p, t=tiles, kw=kw: decoding.launch(cupy, p, t, **kw)[0])
            separate = decoding.launch(cupy, forced[0], tiles, fused=False)[0].astype(cupy.float64)
            row["max_diff_vs_separate"][name] = float(abs(o - separate).max())
        graphs[name], held = timing.capture_cupy(fn, len(caches))
        kept.append(held)
    graphs["read"], held = timing.capture_cupy(bench_decode.read_call(cupy, caches), len(caches))
    kept.append(held)
    if torch_ok:
        for backend in ("default", "cudnn"):
            fn = bench_decode._cycle(caches, plans, bench_decode._sdpa(backend))
            graphs[backend], held = timing.capture_torch(fn, len(caches))
            kept.append(held)
    row |= timing.replay_us(graphs, torch_stream=torch_ok)
    del kept, caches, plans
    cupy.get_default_memory_pool().free_all_blocks()
    return row


MERGE_POINTS = [(1, 4096), (1, 32768), (1, 131072), (4, 16384), (4, 131072)]


def merges() -> dict:
    """The fused combine's merges at the model's splits (a cluster only where its rule takes it), the separate
    combine and none (the split kernel alone: the floor under any merge)."""
    return {combine: (None, None, combine) for combine in (*decode_launch.MERGES, "separate", "none")}


def short_variants() -> dict:
    """The variants of run 39-dec4: the combine four ways at the model's splits, other split counts, other tilings."""
    m = geometry.decoding_tiles(bench_decode.D, bench_decode.HEADS // bench_decode.KV_HEADS * bench_decode.NQ).m_tiles
    found = {combine: (None, None, combine) for combine in ("cluster", "ticket", "separate", "none")}
    found |= {f"P{P} cluster": (P, None, "cluster") for P in (8, 12)}
    found |= {f"P{P} ticket": (P, None, "ticket") for P in (24, 32)}
    found |= {f"{bc}x{st}w{w} cluster": (None, Tiles(16 * m, bc, w, m, stages=st), "cluster")
              for bc, st, w in ((64, 4, 4), (128, 3, 8))}  # fmt: skip
    return found


if __name__ == "__main__":
    cupy = device.require()
    if (sys.argv[1:] or ["steps"])[0] == "steps":
        for b, n in POINTS:
            print(json.dumps(steps_row(cupy, b, n)), flush=True)
    elif sys.argv[1] == "merges":
        for cache, points in (("contiguous", MERGE_POINTS), ("paged", MERGE_POINTS[:4])):
            for b, n in points:
                print(json.dumps(variants_row(cupy, b, n, merges(), cache)), flush=True)
    else:
        for b, n in SHORT:
            print(json.dumps(variants_row(cupy, b, n, short_variants())), flush=True)
