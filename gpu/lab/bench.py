"""`flashsim bench gpu [--backward]`: FlashAttention-2's benchmark (16k tokens per batch, hidden size 2048) on this GPU.

Every implementation is timed through the call a user makes: `gpu.flash_attention(q, k, v, causal=…)` with its
defaults ("flash"), and PyTorch's `scaled_dot_product_attention` on the same memory, three ways (gpu/lab/sdpa.py): its
flash backend ("sdpa"), its cuDNN backend ("cudnn") and PyTorch's own choice ("default"); these are timed side by
side in interleaved rounds. Beside them: standard attention ("standard": S and P in device memory; "OOM" where they
do not fit) and, forward only, the readable rung 1 (N ≤ RUNG1_MAX_N). With `backward`, each is timed forward +
backward (FLOPs = 3.5 × forward), flashsim twice: the direct CuPy calls ("flash") and through PyTorch's autograd
(`gpu.autograd.attention`, then the backward: "autograd"); each entry also holds its backward alone ("backward_ms",
FLOPs = 2.5 × forward); a second table holds the peak extra memory against N at a fixed batch and head count.
Reports: gpu/lab/results.py.
"""

import math

from gpu import device, flash
from gpu.backward import flash_attention_backward
from gpu.backward import resolve as resolve_backward
from gpu.flash import flash_attention
from gpu.lab import results, sdpa, timing
from gpu.lab.checks import random_like, random_qkv
from gpu.lab.harness import BACKWARD_FLOPS, HIDDEN, TOKENS, TRAINING_FLOPS, flops
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
    backwards = sorted({resolve_backward(None, d).name for d in grid["ds"]})
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
    kernels = "/".join(forwards) + (f" + backward {'/'.join(backwards)}" if backward else "")
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
    if backward:
        notes.append(
            "autograd: gpu.autograd.attention on torch tensors, then torch.autograd.grad (the call a training loop "
            "makes); backward alone: the backward of one forward, FLOPs = 2.5 × forward"
        )
    if not torch_ok:
        notes.append(f"no SDPA or autograd columns: {torch_note}")
    report = {
        "kind": "bench-backward" if backward else "bench-forward",
        "env": results.environment(command),
        "device": device.properties(),
        "torch": torch_note if torch_ok else None,
        "kernel": "/".join(forwards) + (f"+{'/'.join(backwards)}" if backward else ""),
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
    calls = {"flash": (lambda: flash_attention(q, k, v, causal=causal, kernel=kernel), timing.peak_extra_bytes)}
    if torch_ok:
        for backend in sdpa.BACKENDS:
            call = sdpa.sdpa_call(q, k, v, causal=causal, scale=1 / math.sqrt(d), backend=backend)
            calls[backend] = (call, sdpa.peak_extra_bytes)
    row |= _time_side_by_side(calls, f)
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
    o, lse = flash_attention(q, k, v, causal=causal, return_lse=True, kernel=kernel)
    calls = {"flash": (_flash_training(q, k, v, do, causal, kernel), timing.peak_extra_bytes)}
    alone = {"flash": lambda: flash_attention_backward(q, k, v, o, lse, do, causal=causal)}
    if torch_ok:
        calls["autograd"] = (_autograd_training(q, k, v, do, causal), sdpa.peak_extra_bytes)
        for backend in sdpa.BACKENDS:
            kw = {"causal": causal, "scale": 1 / math.sqrt(d), "backend": backend, "do": do}
            calls[backend] = (sdpa.sdpa_call(q, k, v, **kw), sdpa.peak_extra_bytes)
            alone[backend] = _or_error(lambda kw=kw: sdpa.sdpa_call(q, k, v, **kw, backward_only=True))
    row |= _time_side_by_side(calls, f)
    backward_f = f * BACKWARD_FLOPS / TRAINING_FLOPS
    alone = {name: call for name, call in alone.items() if callable(call) and "ms" in row.get(name, {})}
    for name, ms in timing.interleaved_ms(alone).items():
        row[name] |= {"backward_ms": ms, "backward_tflops": backward_f / ms / 1e9}
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


def _autograd_training(q, k, v, do, causal):
    """Forward + backward through gpu.autograd.attention on torch tensors sharing q, k, v, do (what a model calls)."""
    import torch

    from gpu.autograd import attention
    from gpu.dlpack import as_torch

    tq, tk, tv = (as_torch(x).requires_grad_() for x in (q, k, v))
    tdo = as_torch(do)
    return lambda: torch.autograd.grad(attention(tq, tk, tv, causal=causal), (tq, tk, tv), tdo)


def _or_error(make):
    """make() (a callable), or {"status": "error", "why": …} where PyTorch refuses the backend or the shape."""
    try:
        call = make()
        call()
        return call
    except RuntimeError as e:
        return {"status": "error", "why": str(e).strip().splitlines()[0][:200]}


def _time_side_by_side(calls: dict, f: float) -> dict:
    """name → {"ms", "tflops", "peak_extra_bytes"} for each (call, peak) in `calls`, timed in interleaved rounds
    (gpu.lab.timing.interleaved_ms); a call PyTorch refuses (cuDNN at some shapes) gets {"status": "error", "why"}."""
    out, ok = {}, {}
    for name, (call, peak) in calls.items():
        checked = _or_error(lambda call=call: call)
        if callable(checked):
            ok[name] = call
            out[name] = {"peak_extra_bytes": peak(call)}
        else:
            out[name] = checked
    for name, ms in timing.interleaved_ms(ok).items():
        out[name] = {"ms": ms, "tflops": f / ms / 1e9} | out[name]
    return out


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
