"""`flashsim bench gpu`: FlashAttention-2's benchmark (16k tokens per batch, hidden size 2048) on this GPU.

For each N, d, causal, dtype: the tensor-core kernel v2, the readable v1 (N ≤ V1_MAX_N), standard attention
(S and P in device memory; "OOM" where they do not fit) and, when PyTorch imports, SDPA's flash backend on the
same memory. TFLOP/s from gpu.harness.flops; peak extra device memory from the allocators' own counts.
"""

import json
import math

from gpu import device, sdpa, timing
from gpu.flash import flash_attention
from gpu.harness import flops, random_qkv
from gpu.standard import standard_attention

FULL = {"ns": (512, 1024, 2048, 4096, 8192, 16384), "ds": (64, 128), "dtypes": ("float16", "bfloat16")}
QUICK = {"ns": (1024, 4096), "ds": (64, 128), "dtypes": ("float16",)}
V1_MAX_N = 2048  # above this one v1 call takes seconds (it runs at a few TFLOP/s)
TOKENS, HIDDEN = 16384, 2048


def run_bench(*, quick=False, progress=None) -> dict:
    """Time every configuration; returns {"device", "torch", "rows", "notes"} (JSON-ready)."""
    cupy = device.require()
    grid = QUICK if quick else FULL
    torch_ok, torch_note = sdpa.torch_available()
    rows = []
    for dtype in grid["dtypes"]:
        for d in grid["ds"]:
            for causal in (False, True):
                for n in grid["ns"]:
                    row = _one(cupy, n, d, causal, dtype, torch_ok)
                    rows.append(row)
                    if progress:
                        progress(row)
    notes = [
        f"batch = {TOKENS}/N, heads = {HIDDEN}/d; FLOPs = 4·N²·d·batch·heads, halved when causal",
        f"v1 is timed for N ≤ {V1_MAX_N} only: above that one call takes seconds",
        "standard attention: S and P (batch, heads, N, N) in device memory; OOM where they do not fit",
    ]
    if not torch_ok:
        notes.append(f"no SDPA column: {torch_note}")
    return {"device": device.properties(), "torch": torch_note if torch_ok else None, "rows": rows, "notes": notes}


def _one(cupy, n, d, causal, dtype, torch_ok) -> dict:
    batch, heads = TOKENS // n, HIDDEN // d
    q, k, v = random_qkv(batch, heads, n, n, d, dtype, seed=n + d)
    f = flops(n, n, d, batch, heads, causal)
    row = {"n": n, "d": d, "causal": causal, "dtype": dtype, "batch": batch, "heads": heads, "flops": f}
    row["v2"] = _time(lambda: flash_attention(q, k, v, causal=causal, kernel="v2", check_finite=False), f)
    if torch_ok:
        call = sdpa.flash_sdpa(q, k, v, causal=causal, scale=1 / math.sqrt(d))
        row["sdpa"] = _time(call, f, peak=sdpa.peak_extra_bytes)
    s = q.dtype.itemsize
    need = batch * heads * n * (2 * n + d) * s
    cupy.get_default_memory_pool().free_all_blocks()
    if torch_ok:
        __import__("torch").cuda.empty_cache()
    if need > 0.9 * cupy.cuda.runtime.memGetInfo()[0]:
        row["standard"] = {"status": "OOM", "needs_bytes": need}
    else:
        row["standard"] = _time(lambda: standard_attention(q, k, v, causal=causal, check_finite=False), f)
        cupy.get_default_memory_pool().free_all_blocks()
    if n <= V1_MAX_N:
        row["v1"] = _time(
            lambda: flash_attention(q, k, v, causal=causal, kernel="v1", check_finite=False), f, warmup=1, repeats=2
        )
    else:
        row["v1"] = {"status": "skipped"}
    return row


def _time(call, f, *, peak=timing.peak_extra_bytes, warmup=2, repeats=10) -> dict:
    ms = timing.median_ms(call, warmup=warmup, repeats=repeats, budget_s=0.3)
    return {"ms": ms, "tflops": f / ms / 1e9, "peak_extra_bytes": peak(call)}


def write_json(report: dict, path) -> None:
    """Write the report as JSON."""
    with open(path, "w") as fh:
        json.dump(report, fh, indent=1)
