"""`flashsim bench gpu [--backward]`: FlashAttention-2's benchmark (16k tokens per batch, hidden size 2048) on this GPU.

Every implementation is timed through the call a user makes: `gpu.flash_attention(q, k, v, causal=…)` with its
defaults ("flash"), PyTorch SDPA's flash backend on the same memory ("sdpa", when PyTorch imports), standard
attention ("standard": S and P in device memory; "OOM" where they do not fit) and, forward only, the readable
rung 1 (N ≤ RUNG1_MAX_N). With `backward`, each is timed forward + backward (FLOPs = 3.5 × forward), and a
second table holds the peak extra memory against N at a fixed batch and head count. Reports: gpu/lab/results.py.
"""

import math

from gpu import device, flash, registry
from gpu.backward import flash_attention_backward
from gpu.flash import flash_attention
from gpu.lab import results, sdpa, timing
from gpu.lab.checks import random_like, random_qkv
from gpu.lab.harness import HIDDEN, TOKENS, TRAINING_FLOPS, flops
from gpu.standard import standard_attention, standard_attention_backward

FULL = {"ns": (512, 1024, 2048, 4096, 8192, 16384), "ds": (64, 128), "dtypes": ("float16", "bfloat16")}
QUICK = {"ns": (1024, 4096), "ds": (64, 128), "dtypes": ("float16",)}
RUNG1_MAX_N = 2048  # above this one call of rung 1 takes seconds (it runs at a few TFLOP/s)
MEMORY = {"ns": (1024, 2048, 4096, 8192, 16384, 32768), "batch": 1, "heads": 16, "d": 64, "dtype": "float16"}


def run_bench(*, quick=False, backward=False, kernel=None, progress=None, command=None) -> dict:
    """Time every configuration; returns the report (gpu/lab/results.py describes and writes it). `kernel` forces a
    forward rung (2, 3 or 6; None: the public call's default for each head dim on this GPU)."""
    cupy = device.require()
    grid = QUICK if quick else FULL
    forwards = sorted({flash.resolve(kernel, d).name for d in grid["ds"]})  # refuses a rung this GPU cannot run
    torch_ok, torch_note = sdpa.torch_available()
    rows = []
    for dtype in grid["dtypes"]:
        for d in grid["ds"]:
            for causal in (False, True):
                for n in grid["ns"]:
                    row = (_backward_row if backward else _forward_row)(cupy, n, d, causal, dtype, torch_ok, kernel)
                    rows.append(row)
                    if progress:
                        progress(row)
    what = "forward + backward, FLOPs = 3.5 × forward" if backward else "forward"
    kernels = "/".join(forwards) + (f" + rung {registry.DEFAULT_BACKWARD}" if backward else "")
    notes = [
        f"batch = {TOKENS}/N, heads = {HIDDEN}/d; forward FLOPs = 4·N²·d·batch·heads, halved when causal; timed: {what}",
        f"flashsim: gpu.flash_attention{'' if not backward else ' + gpu.flash_attention_backward'} as a user calls it "
        f"(kernels {kernels}: {'forced with --kernel' if kernel else 'the defaults for these head dims on this GPU'}, "
        "no input check, no synchronization)",
        "standard attention: S and P (batch, heads, N, N) in device memory"
        + (", and dP, dS in the backward" if backward else "")
        + "; OOM where they do not fit",
    ]
    if not backward:
        notes.append(f"rung 1 (readable) is timed for N ≤ {RUNG1_MAX_N} only: above that one call takes seconds")
    if not torch_ok:
        notes.append(f"no SDPA column: {torch_note}")
    report = {
        "kind": "bench-backward" if backward else "bench-forward",
        "env": results.environment(command),
        "device": device.properties(),
        "torch": torch_note if torch_ok else None,
        "kernel": "/".join(forwards) + (f"+rung {registry.DEFAULT_BACKWARD}" if backward else ""),
        "rows": rows,
        "notes": notes,
    }
    if backward:
        m = MEMORY
        report["memory_config"] = f"batch {m['batch']}, {m['heads']} heads, d = {m['d']}, {m['dtype']}"
        report["memory"] = memory_sweep(cupy, torch_ok, kernel)
    return report


def _forward_row(cupy, n, d, causal, dtype, torch_ok, kernel=None) -> dict:
    batch, heads = TOKENS // n, HIDDEN // d
    q, k, v = random_qkv(batch, heads, n, n, d, dtype, seed=n + d)
    f = flops(n, n, d, batch, heads, causal)
    row = {"n": n, "d": d, "causal": causal, "dtype": dtype, "batch": batch, "heads": heads, "flops": f}
    row["flash"] = _time(lambda: flash_attention(q, k, v, causal=causal, kernel=kernel), f)
    if torch_ok:
        row["sdpa"] = _time(
            sdpa.flash_sdpa(q, k, v, causal=causal, scale=1 / math.sqrt(d)), f, peak=sdpa.peak_extra_bytes
        )
    need = batch * heads * n * (2 * n + d) * q.dtype.itemsize
    row["standard"] = _if_fits(cupy, need, lambda: _time(lambda: standard_attention(q, k, v, causal=causal), f))
    if n <= RUNG1_MAX_N:
        row["rung1"] = _time(lambda: flash_attention(q, k, v, causal=causal, kernel=1), f, warmup=1, repeats=2)
    else:
        row["rung1"] = {"status": "skipped"}
    return row


def _backward_row(cupy, n, d, causal, dtype, torch_ok, kernel=None) -> dict:
    batch, heads = TOKENS // n, HIDDEN // d
    q, k, v = random_qkv(batch, heads, n, n, d, dtype, seed=n + d)
    do = random_like(q, seed=n + d + 1)
    f = TRAINING_FLOPS * flops(n, n, d, batch, heads, causal)
    row = {"n": n, "d": d, "causal": causal, "dtype": dtype, "batch": batch, "heads": heads, "flops": f}
    row["flash"] = _time(_flash_training(q, k, v, do, causal, kernel), f)
    if torch_ok:
        call = sdpa.flash_sdpa(q, k, v, causal=causal, scale=1 / math.sqrt(d), do=do)
        row["sdpa"] = _time(call, f, peak=sdpa.peak_extra_bytes)
    need = batch * heads * n * (3 * n + 4 * d) * q.dtype.itemsize  # P, dP, dS at once, and the outputs
    row["standard"] = _if_fits(cupy, need, lambda: _time(_standard_training(q, k, v, do, causal), f))
    return row


def memory_sweep(cupy, torch_ok, kernel=None) -> list[dict]:
    """Peak extra device memory of forward + backward against N, batch and heads fixed (MEMORY): O(N) vs O(N²)."""
    m = MEMORY
    rows = []
    for n in m["ns"]:
        q, k, v = random_qkv(m["batch"], m["heads"], n, n, m["d"], m["dtype"], seed=n)
        do = random_like(q, seed=n + 1)
        row = {
            "n": n,
            "flash": {"peak_extra_bytes": timing.peak_extra_bytes(_flash_training(q, k, v, do, True, kernel))},
        }
        if torch_ok:
            call = sdpa.flash_sdpa(q, k, v, causal=True, scale=1 / math.sqrt(m["d"]), do=do)
            row["sdpa"] = {"peak_extra_bytes": sdpa.peak_extra_bytes(call)}
        need = m["batch"] * m["heads"] * n * (3 * n + 4 * m["d"]) * q.dtype.itemsize
        call = _standard_training(q, k, v, do, True)
        row["standard"] = _if_fits(cupy, need, lambda c=call: {"peak_extra_bytes": timing.peak_extra_bytes(c)})
        rows.append(row)
    return rows


def _flash_training(q, k, v, do, causal, kernel=None):
    def call():
        o, lse = flash_attention(q, k, v, causal=causal, return_lse=True, kernel=kernel)
        return flash_attention_backward(q, k, v, o, lse, do, causal=causal)

    return call


def _standard_training(q, k, v, do, causal):
    def call():
        _, probs = standard_attention(q, k, v, causal=causal, return_probs=True)
        return standard_attention_backward(q, k, v, probs, do)

    return call


def _if_fits(cupy, need: int, run) -> dict:
    """run() if `need` bytes fit in 90% of the free device memory (both allocators emptied first), else OOM."""
    cupy.get_default_memory_pool().free_all_blocks()
    if sdpa.torch_available()[0]:
        __import__("torch").cuda.empty_cache()
    if need > 0.9 * cupy.cuda.runtime.memGetInfo()[0]:
        return {"status": "OOM", "needs_bytes": need}
    out = run()
    cupy.get_default_memory_pool().free_all_blocks()
    return out


def _time(call, f, *, peak=timing.peak_extra_bytes, warmup=2, repeats=10) -> dict:
    ms = timing.median_ms(call, warmup=warmup, repeats=repeats, budget_s=0.3)
    return {"ms": ms, "tflops": f / ms / 1e9, "peak_extra_bytes": peak(call)}
