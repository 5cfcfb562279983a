"""`flashsim bench decode`: rung 8 (gpu.decode) beside SDPA at decode time, in DRAM bandwidth.

One new token per sequence (Nq = 1) of Hq = 64 query heads against a cache of Hkv = 8 K/V heads (g = 8), d = 128,
fp16, batch 1 … 16, Nk 4K … 128K keys. Timed side by side (gpu/lab/timing.interleaved_ms): ours on the contiguous
cache ("contiguous": the public call, the combine fused; "contiguous_kernels": its launch alone; "separate": the
launches alone with the combine as its own kernel), ours on the same keys in pages of 256 under a shuffled block_table ("paged": the public call, whose
block_table and cache_seqlens, CuPy arrays, the kernel checks; "paged_kernels": the launch alone, the arguments
checked once), and PyTorch's scaled_dot_product_attention on the contiguous cache with enable_gqa=True through its
flash backend ("sdpa"), its cuDNN backend ("cudnn") and its own choice ("default", whose GPU kernels one profiled
call names, beside ours: "profile"; its memory-efficient backend refuses enable_gqa with fewer K/V heads). And a decode
step as a serving loop replays it, from a CUDA graph of timing.STEPS steps: the public call captured by CuPy's stream
capture ("ours_graph") beside SDPA's default and cuDNN captured by torch.cuda.graph ("default_graph", "cudnn_graph"),
the GPU's time per step without the host's (gpu/lab/decode_graphs.py times the others so too), and beside them the
floor: a kernel that only reads the same K and V (gpu/kernels/read_ceiling.cu, one launch shape), captured the same
way ("read_graph"; ours_graph's time over it: "graph_over_read"). Bandwidth counts the bytes every
implementation must move: K and V once, q and o; a cache smaller than COLD_L2 times the device's L2 is cycled over copies so that each
call reads it from DRAM.
"""

import math

import numpy as np

from gpu import decoding, device, geometry, registry, source
from gpu.dlpack import as_torch
from gpu.lab import results, sdpa, timing
from gpu.lab.checks import max_error

HEADS, KV_HEADS, D, NQ, PAGE = 64, 8, 128, 1, 256
GRID = [(1, 4096), (1, 32768), (1, 131072), (4, 16384), (4, 131072), (16, 4096), (16, 32768), (16, 131072)]
QUICK = [(1, 4096), (4, 16384), (16, 32768)]
COLD_L2 = 4  # caches under this many times the device's L2 are cycled over copies
BASELINES = tuple(sdpa.BACKENDS)  # sdpa (flash), cudnn, default


def run_bench(*, quick=False, dtype="float16", progress=None, command=None) -> dict:
    """Time every configuration; the report: rows of {name: {ms, gbps, dram_pct}} and the speed-ups."""
    cupy = device.require()
    torch_ok, torch_note = sdpa.torch_available()
    peak, rows = dram_peak(), []
    for batch, nk in QUICK if quick else GRID:
        row = _row(cupy, batch, nk, dtype, torch_ok, peak)
        rows.append(row)
        cupy.get_default_memory_pool().free_all_blocks()
        if progress:
            progress(row)
    return {
        "kind": "bench-decode",
        "env": results.environment(command),
        "device": device.properties(),
        "torch": torch_note,
        "config": {"heads": HEADS, "kv_heads": KV_HEADS, "d": D, "nq": NQ, "page_size": PAGE, "dtype": dtype},
        "dram_peak": peak,
        "rows": rows,
        "notes": [
            "bytes: K and V of every sequence once, q and o; GB/s = bytes / median time; dram_pct: % of dram_peak "
            "(the datasheet's DRAM bandwidth of the simulator's preset for this device; none for a device it lacks)",
            f"caches under {COLD_L2}× the device's L2 are cycled over copies, so no call finds its cache in L2",
            "contiguous: gpu.decode as a user calls it (one launch, the combine fused); contiguous_kernels: that launch "
            "alone (the checks done once); separate: the split and combine kernels launched alone, the combine its "
            "own kernel",
            "paged: gpu.decode as a user calls it (block_table, cache_seqlens as CuPy arrays, checked by the kernel, "
            "no synchronization); paged_kernels: the launch alone",
            "sdpa / cudnn / default: torch.nn.functional.scaled_dot_product_attention(enable_gqa=True), flash / cuDNN "
            "backend / PyTorch's choice, on the contiguous cache",
            "profile: GPU kernels and their µs in one profiled call (torch.profiler) of ours (contiguous) and of "
            "SDPA's default",
            f"ours_graph / default_graph / cudnn_graph: {timing.STEPS} steps of the public call (CuPy stream capture) "
            "/ of SDPA's default / cuDNN backend (torch.cuda.graph) in one CUDA graph, replayed; time per step",
            f"read_graph: read_ceiling.cu reading the same K and V and nothing else ({geometry.READ_BLOCKS_PER_SM} "
            f"blocks an SM of {geometry.READ_THREADS} threads, {geometry.READ_UNROLL} 16-byte loads in flight a "
            "thread), captured and replayed as ours_graph; its gbps and dram_pct count the K/V bytes it reads; "
            "graph_over_read = ours_graph's time / read_graph's",
        ],
    }


def dram_peak() -> dict | None:
    """{bytes_per_s, of}: the DRAM bandwidth of the simulator's preset for this device (H100-SXM: 3.35 TB/s, H200:
    4.8 TB/s), which dram_pct is a share of; None for a device without a preset."""
    preset = device.preset_for(device.properties()["name"])
    return {"bytes_per_s": preset.hbm_bandwidth, "of": preset.name} if preset else None


def share(bytes_per_s: float, peak: dict | None) -> float | None:
    """bytes_per_s as a % of the peak; None without one."""
    return 100 * bytes_per_s / peak["bytes_per_s"] if peak else None


def _row(cupy, batch: int, nk: int, dtype: str, torch_ok: bool, peak: dict | None) -> dict:
    itemsize = 2
    kv_bytes = 2 * batch * KV_HEADS * nk * D * itemsize
    moved = kv_bytes + 2 * batch * HEADS * NQ * D * itemsize
    caches = _cold_caches(cupy, batch, nk, dtype)
    plans = [decoding.prepare(c["q"], c["kp"], c["vp"], c["table"], c["seqlens"], False, None, None) for c in caches]

    def cycled(fn):
        return _cycle(caches, plans, fn)

    contiguous = [decoding.prepare(c["q"], c["k"], c["v"], None, None, False, None, None) for c in caches]
    calls = {
        "contiguous": cycled(lambda c, p: decoding.decode(c["q"], c["k"], c["v"])),
        "contiguous_kernels": _cycle(caches, contiguous, lambda c, p: decoding.launch(cupy, p)),
        "separate": _cycle(caches, contiguous, lambda c, p: decoding.launch(cupy, p, fused=False)),
        "paged": cycled(
            lambda c, p: decoding.decode(c["q"], c["kp"], c["vp"], block_table=c["table"], cache_seqlens=c["seqlens"])
        ),
        "paged_kernels": cycled(lambda c, p: decoding.launch(cupy, p)),
    }
    if torch_ok:
        for backend in BASELINES:
            calls[backend] = cycled(_sdpa(backend))
    first = caches[0]
    o = decoding.decode(first["q"], first["k"], first["v"])
    o_paged = decoding.decode(
        first["q"], first["kp"], first["vp"], block_table=first["table"], cache_seqlens=first["seqlens"]
    )
    row = {"batch": batch, "nk": nk, "copies": len(caches), "bytes": moved, "splits": contiguous[0].splits}
    row["paged_splits"] = plans[0].splits
    row["paged_vs_contiguous_max_diff"] = max_error(o_paged, o.astype(cupy.float64))
    ok = {}
    for name, call in calls.items():
        try:
            call()
            ok[name] = call
        except RuntimeError as e:  # PyTorch refusing a backend, or out of memory
            row[name] = {"status": "error", "why": str(e).strip().splitlines()[0][:200]}
    for name, ms in timing.interleaved_ms(ok).items():
        gbps = moved / ms / 1e6
        row[name] = {"ms": ms, "gbps": gbps, "dram_pct": share(gbps * 1e9, peak)}
    for base in BASELINES:
        if "ms" in row.get(base, {}):
            row[f"speedup_vs_{base}"] = row[base]["ms"] / row["contiguous"]["ms"]
    row |= _graphs(cupy, caches, ok, moved, kv_bytes, peak)
    if "default" in ok:
        row["profile"] = {"ours": _profile(calls["contiguous"]), "default": _profile(calls["default"])}
    row["paged_over_contiguous"] = row["paged"]["ms"] / row["contiguous"]["ms"]
    row["fused_over_separate"] = row["contiguous_kernels"]["ms"] / row["separate"]["ms"]
    row["paged_kernels_over_contiguous"] = row["paged_kernels"]["ms"] / row["contiguous"]["ms"]
    return row


def _graphs(cupy, caches: list, ok: dict, moved: int, kv_bytes: int, peak: dict | None) -> dict:
    """ours_graph, default_graph, cudnn_graph and read_graph: the public call, SDPA's default and cuDNN backend and
    the plain read of K and V captured in CUDA graphs, replayed (timing.replay_us, interleaved), {ms, gbps, dram_pct}
    per step (read_graph's of the kv_bytes it reads, the others' of `moved`); default_graph's time over ours_graph's,
    ours_graph's over read_graph's."""
    graphs, kept, row = {}, [], {}
    graphs["ours_graph"], held = timing.capture_cupy(ok["contiguous"], len(caches))
    kept.append(held)
    graphs["read_graph"], held = timing.capture_cupy(read_call(cupy, caches), len(caches))
    kept.append(held)
    for backend in ("default", "cudnn"):
        if backend in ok:
            try:
                graphs[f"{backend}_graph"], held = timing.capture_torch(ok[backend], len(caches))
                kept.append(held)
            except RuntimeError as e:  # PyTorch refusing to capture it: said, not timed
                row[f"{backend}_graph"] = {"status": "error", "why": str(e).strip().splitlines()[0][:200]}
    torch_stream = any(name in graphs for name in ("default_graph", "cudnn_graph"))
    for name, us in timing.replay_us(graphs, torch_stream=torch_stream).items():
        gbps = (kv_bytes if name == "read_graph" else moved) / us / 1e3
        row[name] = {"ms": us / 1e3, "gbps": gbps, "dram_pct": share(gbps * 1e9, peak)}
    if "default_graph" in graphs:
        row["graph_speedup_vs_default"] = row["default_graph"]["ms"] / row["ours_graph"]["ms"]
    row["graph_over_read"] = row["ours_graph"]["ms"] / row["read_graph"]["ms"]
    return row


def read_call(cupy, caches: list, out=None):
    """A call reading K and V of the next of the copies in turn with read_ceiling.cu and nothing else, in its one
    launch shape (geometry.READ_BLOCKS_PER_SM blocks an SM of READ_THREADS threads); `out`: the word it stores only
    when a thread's fold of its pieces is 0x9E3779B9 (the GPU test's check that it reads what it should)."""
    spec = registry.HELPERS["read_ceiling"]
    kernel = source.function(spec, spec.defines(D, "float16"))
    blocks = geometry.READ_BLOCKS_PER_SM * device.properties()["sm_count"]
    out = cupy.zeros(1, cupy.uint32) if out is None else out

    def read(c, p):
        kernel((blocks,), (geometry.READ_THREADS,), (c["k"], c["v"], np.int64(c["k"].nbytes // 16), out))

    return _cycle(caches, [None] * len(caches), read)


def _profile(call) -> dict[str, float]:
    """{GPU kernel name: µs} of one call of `call` (torch.profiler's CUDA activity; CuPy's kernels included)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    return {e.key[:120]: e.self_device_time_total for e in prof.key_averages() if e.self_device_time_total > 0}


def _cycle(caches: list, plans: list, fn):
    """A call running fn(cache, plan) on the next of the copies in turn."""
    turn = [0]

    def call():
        turn[0] = (turn[0] + 1) % len(caches)
        return fn(caches[turn[0]], plans[turn[0]])

    return call


def _cold_caches(cupy, batch: int, nk: int, dtype: str) -> list[dict]:
    """Enough copies of the cache (`_cache`, seeds 0, 1, …) that cycling through them moves COLD_L2 times the
    device's L2: each call reads its K/V from DRAM, not from L2."""
    cold = COLD_L2 * device.properties()["l2_bytes"]
    copies = max(1, math.ceil(cold / (2 * batch * KV_HEADS * nk * D * 2)))  # K and V, 2 bytes an element
    return [_cache(cupy, batch, nk, dtype, seed) for seed in range(copies)]


def _cache(cupy, batch: int, nk: int, dtype: str, seed: int) -> dict:
    """q, the contiguous cache k, v (B, Hkv, Nk, d), and the same keys paged: (pages, PAGE, Hkv, d) under a shuffled
    block_table; cache_seqlens = Nk for every sequence."""
    rng = cupy.random.default_rng(seed)
    store = {"float16": cupy.float16}[dtype]
    q = rng.standard_normal((batch, HEADS, NQ, D), dtype=cupy.float32).astype(store)
    k, v = (rng.standard_normal((batch, KV_HEADS, nk, D), dtype=cupy.float32).astype(store) for _ in range(2))
    per = math.ceil(nk / PAGE)
    table = cupy.asarray(np.random.default_rng(seed).permutation(batch * per).astype(np.int32).reshape(batch, per))
    pages = []
    for x in (k, v):
        paged = cupy.empty((batch * per, PAGE, KV_HEADS, D), store)
        paged[table.ravel()] = x.transpose(0, 2, 1, 3).reshape(batch * per, PAGE, KV_HEADS, D)
        pages.append(paged)
    seqlens = cupy.full((batch,), nk, cupy.int32)
    return {"q": q, "k": k, "v": v, "kp": pages[0], "vp": pages[1], "table": table, "seqlens": seqlens}


def _sdpa(backend: str):
    """SDPA with enable_gqa on a cache's q, k, v (torch views of the same memory), through `backend`."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    name = sdpa.BACKENDS[backend]
    views = {}

    def call(c, p):
        key = id(c["k"])
        if key not in views:
            views[key] = tuple(as_torch(c[n]) for n in ("q", "k", "v"))
        tq, tk, tv = views[key]
        f = torch.nn.functional.scaled_dot_product_attention
        if name is None:
            return f(tq, tk, tv, enable_gqa=True)
        with sdpa_kernel(getattr(SDPBackend, name)):
            return f(tq, tk, tv, enable_gqa=True)

    return call


def heading(peak: dict | None) -> str:
    """What the rows' percentages are a share of."""
    if peak is None:
        return "GB/s: bytes a step must move / its median time (no DRAM peak known for this GPU: no %)"
    return f"GB/s: bytes a step must move / its median time; % of {peak['bytes_per_s'] / 1e12:.2f} TB/s ({peak['of']})"


def progress_line(row: dict) -> str:
    """'B=1 Nk=4096: contiguous 1234 GB/s (37%) · paged … · sdpa … · ×1.10 SDPA'."""
    parts = [f"B={row['batch']} Nk={row['nk']} splits={row['splits']} (paged {row['paged_splits']}):"]
    for name in ("contiguous", "contiguous_kernels", "separate", "paged", "paged_kernels", *BASELINES, "ours_graph",
                 "default_graph", "cudnn_graph", "read_graph"):  # fmt: skip
        r = row.get(name)
        if r is not None:
            pct = f" ({r['dram_pct']:.0f}%)" if r.get("dram_pct") is not None else ""
            parts.append(f"{name} {r['gbps']:.0f} GB/s{pct}" if "ms" in r else f"{name} {r['status']}")
    for base in ("sdpa", "default"):
        if f"speedup_vs_{base}" in row:
            parts.append(f"×{row[f'speedup_vs_{base}']:.2f} SDPA {base}")
    if "graph_speedup_vs_default" in row:
        parts.append(f"×{row['graph_speedup_vs_default']:.2f} SDPA default, both graphs")
    if "graph_over_read" in row:
        parts.append(f"ours graph {row['graph_over_read']:.2f}× the plain read")
    return " ".join(parts)
